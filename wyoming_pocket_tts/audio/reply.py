"""The audio of one reply, as the handler sends it: stretched frames, pauses between sentences.

One `ReplyAudio` per reply (one-shot or streamed). Its stretcher runs across every
sentence of the reply, so sentence joins are as seamless as the engine made them.

The pause is owed, not sent, at a sentence boundary: it goes out in front of the next
sentence's first frame, in the same chunk. So a reply never ends on a pause (a streamed
reply does not know its last sentence until the text stream ends), a skipped sentence
does not make a double pause, and every model frame still makes exactly one chunk.

SSML adds two things (`text/ssml.py`): a `<break>` is owed the same way but is exact digital
silence, not stretched (the speech before it is stretched to its end first), and replaces
the pause between sentences where both fall; and `<prosody rate>` changes the length scale
for a span, which ends the stretch of the span before (the same flush, owed as well) and
starts a new one.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

from .stretch import TimeStretcher


MAX_SENTENCE_SILENCE_SECONDS = 10.0


def check_sentence_silence(seconds: float) -> float:
    """``seconds`` as a float, or a ValueError saying what is accepted."""
    try:
        value = float(seconds)
    except (TypeError, ValueError):
        raise ValueError(f"sentence_silence must be a number of seconds, not {seconds!r}") from None
    if not (0.0 <= value <= MAX_SENTENCE_SILENCE_SECONDS):  # also rejects NaN
        raise ValueError(
            f"sentence_silence must be between 0 and {MAX_SENTENCE_SILENCE_SECONDS:g} seconds, not {seconds!r}"
        )
    return value


def silence(seconds: float, sample_rate: int) -> np.ndarray:
    """``seconds`` of digital silence (float32 zeros)."""
    return np.zeros(round(check_sentence_silence(seconds) * sample_rate), dtype=np.float32)


class ReplyAudio:
    """Shape one reply's frames: ``frame`` per model frame, ``sentence_boundary`` between
    sentences, ``finish`` once at the end.

    ``frame`` returns that frame's audio (about ``length_scale`` times as long, plus the
    owed pause, if any); ``finish`` returns what the stretcher still holds (empty at 1.0).
    Not thread-safe: one reply, one caller at a time (calls may move between threads).
    """

    def __init__(self, sample_rate: int, length_scale: float = 1.0, sentence_silence: float = 0.0) -> None:
        self.sample_rate = sample_rate
        self.sentence_silence = check_sentence_silence(sentence_silence)
        self._stretcher = TimeStretcher(length_scale, sample_rate)
        self._audio_sent = False  # no pause before the first sentence
        self._pause_owed = False
        # An SSML <break> (seconds of exact silence) and the stretched audio that must go
        # out before it or before a change of length scale; both go in front of the next frame.
        self._break_owed: float | None = None
        self._owed_audio: list[np.ndarray] = []

    @property
    def length_scale(self) -> float:
        return self._stretcher.length_scale

    def sentence_boundary(self) -> None:
        """A new sentence starts: a pause is owed if audio went out before. Safe to call
        before the first sentence and more than once."""
        if self._audio_sent and self.sentence_silence > 0:
            self._pause_owed = True

    def pause(self, seconds: float) -> None:
        """An explicit pause (SSML <break>): exactly ``seconds`` of zeros before the next
        frame, in place of a pause between sentences there; pauses in a row add up (to at
        most MAX_SENTENCE_SILENCE_SECONDS). Unlike that pause, it is sent at the end too."""
        owed = (self._break_owed or 0.0) + max(0.0, float(seconds))
        self._break_owed = min(owed, MAX_SENTENCE_SILENCE_SECONDS)
        self._owed_audio.append(self._stretcher.flush())  # the speech before ends, unstretched silence follows

    def set_length_scale(self, length_scale: float) -> None:
        """The length scale from the next frame on (SSML <prosody rate>, or another voice's
        rate): the current stretch is ended (its rest goes before the next frame)."""
        if length_scale != self._stretcher.length_scale:
            self._owed_audio.append(self._stretcher.flush())
            self._stretcher = TimeStretcher(length_scale, self.sample_rate)

    def frame(self, samples: np.ndarray) -> np.ndarray:
        owed = self._take_owed()
        if self._pause_owed:
            self._pause_owed = False
            # The pause goes in before the frame: through the stretcher, order matters.
            owed.append(self._pause())
        owed.append(self._stretcher.process(samples))
        self._audio_sent = True
        return owed[0] if len(owed) == 1 else np.concatenate(owed)

    def _take_owed(self) -> list[np.ndarray]:
        """What goes out before the next frame's audio: the ended stretches, and a break
        (which cancels the pause between sentences owed at the same place)."""
        owed, self._owed_audio = [audio for audio in self._owed_audio if audio.size], []
        if self._break_owed is not None:
            owed.append(np.zeros(round(self._break_owed * self.sample_rate), dtype=np.float32))
            self._break_owed = None
            self._pause_owed = False
        return owed

    def sentence(self, frames: Iterable[np.ndarray], starts_sentence: bool = True) -> Iterator[np.ndarray]:
        """One sentence's frames, shaped; closing this closes ``frames`` too (so an engine
        iterator frees its state at once when the handler stops early). ``starts_sentence``
        False: the frames go on with the sentence before (no pause between them)."""
        if starts_sentence:
            self.sentence_boundary()
        try:
            for samples in frames:
                yield self.frame(samples)
        finally:
            close = getattr(frames, "close", None)
            if close is not None:
                close()

    def finish(self) -> np.ndarray:
        """The end of the reply; an owed pause is dropped (none after the last sentence),
        an owed break is not (the client asked for it)."""
        self._pause_owed = False
        # What is owed was flushed before: the stretcher has taken nothing since.
        return np.concatenate([*self._take_owed(), self._stretcher.flush()])

    def _pause(self) -> np.ndarray:
        if self._stretcher.passthrough:
            return silence(self.sentence_silence, self.sample_rate)
        # Through the stretcher, so the speech before it ends as it would have, without a
        # cut: silence of S / X seconds in comes out as S seconds (zeros stay zeros).
        length_in = round(self.sentence_silence * self.sample_rate / self.length_scale)
        return self._stretcher.process(np.zeros(length_in, dtype=np.float32))
