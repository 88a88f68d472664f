"""What every connection shares: the model once loaded, the voices, the scheduler, the workers.

The server listens before the model exists: loading (importing torch, maybe downloading
weights) runs in a daemon thread started by `TtsService.start`, and requests that need the
model await `wait_ready()`. `describe` never needs it. The engine and the voices library are
only imported inside that thread, so `--help`, `--version` and the first `describe` do not
wait for torch.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field, replace
from typing import Any

from wyoming.info import Info

from ..core import GenerationOptions, ModelLike, VoiceInfo, VoiceSource, VoiceStateLike
from ..settings import BY_NAME, Scope, check_fields, default
from .info import build_info
from .scheduler import SynthesisScheduler

_LOGGER = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReplyOptions:
    """How the server shapes a reply around the engine: text as words, speaking rate, pauses.

    The settings of scope "reply" (`wyoming_pocket_tts.settings`), server-wide or per voice.
    """

    length_scale: float = default("length_scale")
    sentence_silence: float = default("sentence_silence")
    # Rewrite numbers, units, markdown and emoji as words first (`wyoming_pocket_tts.text`).
    normalize: bool = default("normalize")

    def __post_init__(self) -> None:
        check_fields("reply", self)


@dataclass
class Backend:
    """The loaded model and its voice library."""

    model: ModelLike
    voices: VoiceSource
    options: GenerationOptions
    reply: ReplyOptions = ReplyOptions()

    def options_for(self, voice_name: str) -> GenerationOptions:
        """The server's options, under the voice's own settings from the voices file."""
        own = self._voice_settings(voice_name, "generation")
        return replace(self.options, **own) if own else self.options

    def reply_options_for(self, voice_name: str) -> ReplyOptions:
        """The server's reply options, under the voice's own settings from the voices file."""
        own = self._voice_settings(voice_name, "reply")
        return replace(self.reply, **own) if own else self.reply

    def language_for(self, voice_name: str | None) -> str:
        """The language the voice's text is read in: the voice's, else the model's, else en."""
        name = voice_name or self.voices.default_name
        for voice in self.voices.voices:
            if voice.name == name and voice.languages:
                return voice.languages[0]
        return (tuple(self.model.languages) or ("en",))[0]

    def _voice_settings(self, voice_name: str, scope: Scope) -> dict[str, Any]:
        """The voices file's settings of `voice_name` that belong to `scope`, by field."""
        for voice in self.voices.voices:
            if voice.name == voice_name:
                chosen = (BY_NAME[name] for name in voice.settings)
                return {s.field_name: voice.settings[s.name] for s in chosen if s.scope == scope}
        return {}


class LoadFailed(Exception):
    """Loading the model or the voices failed; the message is one line for the user."""


Loader = Callable[[], Backend]
# Runs in a synthesis worker: (backend, default voice, cancel event) -> seconds of audio.
Warmup = Callable[[Backend, VoiceStateLike, threading.Event], float]


@dataclass
class TtsService:
    """Shared state of the server; all methods are called on the event loop."""

    model_name: str
    loader: Loader
    scheduler: SynthesisScheduler
    synth_executor: Executor
    voice_executor: Executor
    # Run once the model is ready, under a scheduler slot like a request: the first
    # synthesis after start pays one-off costs that should not fall on a user's request,
    # and it gives the scheduler its first measure of the engine's speed.
    warmup: Warmup | None = None
    # Lists the voices before the model is loaded (run first in the loader thread), so
    # that a Home Assistant connecting during a long first download still sees them.
    previewer: Callable[[], Sequence[VoiceInfo]] | None = None
    _preview: tuple[VoiceInfo, ...] = field(default=(), init=False)
    _ready: asyncio.Future[Backend] | None = field(default=None, init=False)
    _backend: Backend | None = field(default=None, init=False)
    _loader_thread: threading.Thread | None = field(default=None, init=False)
    _stopping: threading.Event = field(default_factory=threading.Event, init=False)
    _warmup_task: asyncio.Task[None] | None = field(default=None, init=False)
    # The task of every open connection, so that shutdown can wait for their cleanup.
    connections: set[asyncio.Task[None]] = field(default_factory=set, init=False)
    _request_ids: Iterator[int] = field(default_factory=lambda: itertools.count(1), init=False)

    def next_request_id(self) -> int:
        """Numbers requests in the log, across connections."""
        return next(self._request_ids)

    def start(self) -> asyncio.Future[Backend]:
        """Start loading in a background thread; the future fails with LoadFailed."""
        loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        ready = self._ready

        def deliver(backend: Backend | None, error: BaseException | None) -> None:
            if ready.done():
                return
            if error is not None:
                ready.set_exception(error)
                return
            assert backend is not None
            self._backend = backend
            ready.set_result(backend)
            if self.warmup is not None:
                self._warmup_task = loop.create_task(self._warm_up(backend), name="warm-up")

        def load() -> None:
            started = time.monotonic()
            if self.previewer is not None:
                try:
                    self._preview = tuple(self.previewer())
                except Exception:  # noqa: BLE001 -- the real loading reports the problem
                    _LOGGER.debug("Voice preview failed", exc_info=True)
            try:
                backend = self.loader()
            except BaseException as err:  # noqa: BLE001 - reported to the user as one line
                _LOGGER.debug("Loading failed", exc_info=True)
                failure = err if isinstance(err, LoadFailed) else LoadFailed(str(err) or type(err).__name__)
                outcome: tuple[Backend | None, BaseException | None] = (None, failure)
            else:
                _LOGGER.info("Model %s ready in %.1f s", self.model_name, time.monotonic() - started)
                outcome = (backend, None)
            try:
                loop.call_soon_threadsafe(deliver, *outcome)
            except RuntimeError:
                pass  # the loop was closed while we loaded (shutdown)

        # A daemon thread: a download in progress must not keep a stopping server alive
        # (see `loading`: the caller then exits without waiting for it).
        self._loader_thread = threading.Thread(target=load, name="model-loader", daemon=True)
        self._loader_thread.start()
        return ready

    async def _warm_up(self, backend: Backend) -> None:
        assert self.warmup is not None
        loop = asyncio.get_running_loop()
        try:
            # The default voice first (it may be encoding), outside the slot like a request.
            _, voice = await self.get_voice(backend, None)
            async with self.scheduler.slot() as slot:
                audio_s = await loop.run_in_executor(
                    self.synth_executor, self.warmup, backend, voice, self._stopping
                )
                # Also the scheduler's first measure of how fast one synthesis runs.
                slot.add_audio(audio_s)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - a failed warm-up only costs latency
            _LOGGER.warning("Warm-up failed", exc_info=True)

    @property
    def loading(self) -> bool:
        """True while the loader thread still runs (torch may be busy in it)."""
        return self._loader_thread is not None and self._loader_thread.is_alive()

    @property
    def backend(self) -> Backend | None:
        return self._backend

    async def wait_ready(self) -> Backend:
        """The backend, once loaded. Raises LoadFailed."""
        if self._backend is not None:
            return self._backend
        assert self._ready is not None, "start() was not called"
        # shield: a cancelled request must not cancel the loading shared by everyone.
        return await asyncio.shield(self._ready)

    async def settle(self, timeout: float) -> None:
        """Wait up to `timeout` for loading to finish (either way); never raises."""
        if self._ready is not None and not self._ready.done():
            # asyncio.wait neither raises the loader's error nor cancels on timeout.
            await asyncio.wait([self._ready], timeout=timeout)

    def info(self) -> Info:
        backend = self._backend
        if backend is None:
            return build_info(self.model_name, self._preview, loading=True)
        return build_info(self.model_name, backend.voices.voices)

    def text_language(self, voice_name: str | None) -> str | None:
        """The language a voice's text is read in; None while the model loads."""
        return None if self._backend is None else self._backend.language_for(voice_name)

    async def get_voice(self, backend: Backend, name: str | None) -> tuple[str, VoiceStateLike]:
        """The voice to use (the default for None or an unknown name); may encode it first."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.voice_executor, backend.voices.get, name)

    def stopping(self) -> None:
        """Shutdown has begun: background synthesis (the warm-up) stops within a frame."""
        self._stopping.set()

    async def close(self) -> None:
        """Stop background work (warm-up, voice pre-encoding) and wait for it to end."""
        self._stopping.set()
        if self._warmup_task is not None:
            await asyncio.wait([self._warmup_task], timeout=5)
        backend = self._backend
        if backend is not None:
            loop = asyncio.get_running_loop()
            try:
                # Blocking (it joins the pre-encoding thread): off the event loop.
                await loop.run_in_executor(None, backend.voices.close)
            except Exception:  # noqa: BLE001
                _LOGGER.debug("Closing the voice library failed", exc_info=True)


def error_text(err: BaseException) -> str:
    """A one-line message for an `error` event; engine errors are already worded for users."""
    text = " ".join(str(err).split())
    return text or type(err).__name__

