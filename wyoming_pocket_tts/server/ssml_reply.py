"""A reply to SSML: its segments (`text/ssml.py`) spoken in the voices, models, languages
and rates they ask for, with its breaks as exact silence.

`ReplyVoices` finds the voice of each `Speech` and holds the model it needs:

* `<voice name>`: that voice; the same model's voice goes on in the reply's session
  (`SessionLike.speak(text, voice)`, the same decoder: seamless), another model's voice is
  spoken by that model in a session of its own, its first samples faded in from where the
  audio before stopped, so the seam does not click;
* `<lang xml:lang>`: the request's voice if it speaks the language, else the first offered
  voice that does (another model's default voice: `TtsService.voice_for_language`), else
  the request's voice with that language's text rules;
* an unknown voice name, a voice that cannot be made or a model that cannot load: the
  request's voice speaks it (logged once).

At most one model is held at a time (released before another is acquired), so that a reply
moving between models cannot deadlock a server with `--max-loaded-models 1`.

`ReplySpeaker` turns one `Speech` into frames (in the synthesis worker) through one
`ReplyAudio` for the whole reply: the span's length scale is the voice's divided by its
`<prosody rate>` (within the stretcher's bounds), and a `Pause` is owed to it.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from ..audio import MAX_LENGTH_SCALE, MIN_LENGTH_SCALE, ReplyAudio
from ..core import ModelLike, SessionLike, TextError, VoiceError, VoiceStateLike
from ..text.ssml import Pause, Segment, Speech
from .loading import LoadFailed
from .logsafe import clip
from .models import ModelEntry, Route
from .service import Backend, ReplyOptions, TtsService, VoiceSettings, language_match
from .synthesis import FrameIterator

_LOGGER = logging.getLogger(__name__)

# A new model's audio starts from where the audio before it stopped, moving to its own
# over this long (a raised cosine): no step, so no click.
SEAM_SECONDS = 0.01

# normalize() unless the voice's settings turn it off: the handler's `_spoken`.
Spoken = Callable[[str, str, ReplyOptions], str]


@dataclass(frozen=True)
class ReplyVoice:
    """A voice as the reply speaks it: its model, its name in that model's library, its
    state and its settings."""

    backend: Backend
    name: str
    state: VoiceStateLike
    settings: VoiceSettings


class ReplyVoices:
    """The voices of one SSML reply (see the module docstring). Runs on the event loop."""

    def __init__(self, service: TtsService, requested: str | None) -> None:
        self._service = service
        self._requested = requested
        self._entry: ModelEntry | None = None  # the model held, if any
        self._backend: Backend | None = None
        # The voices of the held model by route (library name; None: its default voice).
        self._voices: dict[str | None, ReplyVoice] = {}
        # Routes spoken in the request's voice instead (their voice could not be made).
        self._fallbacks: set[tuple[int, str | None]] = set()
        self._unknown: set[str] = set()  # voice names no model offers (logged once)
        self.request: ReplyVoice | None = None

    async def start(self) -> ReplyVoice:
        """The request's voice, its model held (loaded first if needed)."""
        backend, name, state = await self._service.acquire_voice(self._requested)
        self._entry, self._backend = self._service.pool.entry_of(backend), backend
        self.request = ReplyVoice(backend, name, state, backend.settings_for(name))
        self._voices[self._request_route().voice] = self.request
        return self.request

    def ready(self, segment: Segment) -> bool:
        """Whether `segment` can be spoken now, without loading a model or a voice."""
        if isinstance(segment, Pause):
            return True
        route = self._route(segment)
        return route.entry is self._entry and route.voice in self._voices

    async def prepare(self, segment: Segment) -> None:
        """Make `segment`'s voice ready: acquire its model (releasing the one held), get
        its state. A voice that cannot be made, or whose model cannot load, is replaced by
        the request's voice (the reply goes on)."""
        if self.ready(segment):
            return
        assert isinstance(segment, Speech)
        route = self._route(segment)
        pool = self._service.pool
        try:
            if route.entry is not self._entry:
                self.release()
                self._backend = await pool.acquire(route.entry)
                self._entry = route.entry
            assert self._backend is not None
            name, state = await self._service.get_voice(self._backend, route.voice)
        except (VoiceError, LoadFailed) as err:
            if route == self._request_route():
                raise
            self._fallbacks.add((id(route.entry), route.voice))
            _LOGGER.warning("SSML voice %s of model %s unavailable (%s); spoken in the request's voice",
                            clip(repr(route.voice)), route.entry.label, clip(str(err), 200))  # fmt: skip
            return await self.prepare(segment)
        self._voices[route.voice] = ReplyVoice(self._backend, name, state, self._backend.settings_for(name))

    def voice_for(self, speech: Speech) -> ReplyVoice:
        """The voice `speech` is spoken in (`prepare` made it ready)."""
        return self._voices[self._route(speech).voice]

    def release(self) -> None:
        """Let go of the model held (its voices are dropped with it)."""
        if self._entry is not None:
            self._service.pool.release(self._entry)
        self._entry, self._backend = None, None
        self._voices.clear()

    def _request_route(self) -> Route:
        return self._service.pool.route(self._requested)

    def _route(self, speech: Speech) -> Route:
        style, pool = speech.style, self._service.pool
        route = self._request_route()
        if style.voice:
            if self._service.voice_languages(style.voice):  # an offered voice
                route = pool.route(style.voice)
            elif style.voice.lower() not in self._unknown:
                self._unknown.add(style.voice.lower())
                _LOGGER.warning("SSML voice %s is not offered; spoken in the request's voice", clip(repr(style.voice)))
        elif style.language and not self._request_speaks(style.language):
            name = self._service.voice_for_language(style.language)
            if name is not None:
                route = pool.route(name)
        return self._request_route() if (id(route.entry), route.voice) in self._fallbacks else route

    def _request_speaks(self, language: str) -> bool:
        assert self.request is not None
        return language_match(language, self.request.settings.language) > 0


class ReplySpeaker:
    """The frames of an SSML reply: a session per model, one audio shaping for the reply.
    Its frame callables run in the synthesis worker, one at a time."""

    def __init__(self, first: ReplyVoice, cancel: threading.Event, spoken: Spoken) -> None:
        reply = first.settings.reply
        self.shaper = ReplyAudio(first.backend.model.sample_rate, reply.length_scale, reply.sentence_silence)
        self._cancel = cancel
        self._spoken = spoken
        self._session: SessionLike | None = None
        self._session_model: ModelLike | None = None
        # The last sample given to the listener (0 after a pause): where a seam starts.
        self._last_sample = 0.0

    def pause(self, pause: Pause) -> None:
        self.shaper.pause(pause.seconds)
        self._last_sample = 0.0

    def frames(self, speech: Speech, voice: ReplyVoice) -> Callable[[], FrameIterator]:
        def make() -> FrameIterator:
            model = voice.backend.model
            if model.sample_rate != self.shaper.sample_rate:
                raise TextError(f"voice {voice.name} speaks at {model.sample_rate} Hz, the reply at "
                                f"{self.shaper.sample_rate} Hz")  # fmt: skip
            seam = self._session is not None and self._session_model is not model
            if self._session is None or seam:
                self._session = model.session(voice.state, voice.settings.options, self._cancel)
                self._session_model = model
            language = speech.style.language or voice.settings.language
            frames = self._session.speak(self._spoken(speech.text, language, voice.settings.reply), voice.state)
            self.shaper.set_length_scale(span_length_scale(voice.settings.reply.length_scale, speech.style.rate))
            return self.shaper.sentence(self._followed(frames, seam), speech.starts_sentence)

        return make

    def finish(self) -> np.ndarray:
        return self.shaper.finish()

    def _followed(self, frames: Iterator[np.ndarray], seam: bool) -> Iterator[np.ndarray]:
        """`frames`, the first one faded in from the last sample sent if `seam`; closing
        this closes `frames` (the engine frees its state at once)."""
        try:
            for samples in frames:
                if seam:
                    samples = fade_in_from(samples, self._last_sample, round(SEAM_SECONDS * self.shaper.sample_rate))
                    seam = False
                if samples.size:
                    self._last_sample = float(samples[-1])
                yield samples
        finally:
            close = getattr(frames, "close", None)
            if close is not None:
                close()


def span_length_scale(voice_length_scale: float, rate: float) -> float:
    """The length scale of a span: the voice's, divided by its <prosody rate> (2.0 is twice
    as fast, so half as long), within what the stretcher does."""
    return min(MAX_LENGTH_SCALE, max(MIN_LENGTH_SCALE, voice_length_scale / rate))


def fade_in_from(samples: np.ndarray, start: float, length: int) -> np.ndarray:
    """`samples` with their first `length` moving from the value `start` to their own."""
    length = min(length, samples.size)
    if length == 0 or math.isnan(start):
        return samples
    out = np.array(samples, dtype=np.float32, copy=True)
    weight = (0.5 - 0.5 * np.cos(np.pi * np.arange(length) / length)).astype(np.float32)
    out[:length] = start * (1 - weight) + out[:length] * weight
    return out
