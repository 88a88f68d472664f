"""The audio of one reply, as the handler sends it: stretched frames, pauses between sentences.

One `ReplyAudio` per reply (one-shot or streamed). Its stretcher runs across every
sentence of the reply, so sentence joins are as seamless as the engine made them.

The pause is owed, not sent, at a sentence boundary: it goes out in front of the next
sentence's first frame, in the same chunk. So a reply never ends on a pause (a streamed
reply does not know its last sentence until the text stream ends), a skipped sentence
does not make a double pause, and every model frame still makes exactly one chunk.
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

    @property
    def length_scale(self) -> float:
        return self._stretcher.length_scale

    def sentence_boundary(self) -> None:
        """A new sentence starts: a pause is owed if audio went out before. Safe to call
        before the first sentence and more than once."""
        if self._audio_sent and self.sentence_silence > 0:
            self._pause_owed = True

    def frame(self, samples: np.ndarray) -> np.ndarray:
        if self._pause_owed:
            self._pause_owed = False
            # The pause goes in before the frame: through the stretcher, order matters.
            out = np.concatenate([self._pause(), self._stretcher.process(samples)])
        else:
            out = self._stretcher.process(samples)
        self._audio_sent = True
        return out

    def sentence(self, frames: Iterable[np.ndarray]) -> Iterator[np.ndarray]:
        """One sentence's frames, shaped; closing this closes ``frames`` too (so an engine
        iterator frees its state at once when the handler stops early)."""
        self.sentence_boundary()
        try:
            for samples in frames:
                yield self.frame(samples)
        finally:
            close = getattr(frames, "close", None)
            if close is not None:
                close()

    def finish(self) -> np.ndarray:
        """The end of the reply; an owed pause is dropped (none after the last sentence)."""
        self._pause_owed = False
        return self._stretcher.flush()

    def _pause(self) -> np.ndarray:
        if self._stretcher.passthrough:
            return silence(self.sentence_silence, self.sample_rate)
        # Through the stretcher, so the speech before it ends as it would have, without a
        # cut: silence of S / X seconds in comes out as S seconds (zeros stay zeros).
        length_in = round(self.sentence_silence * self.sample_rate / self.length_scale)
        return self._stretcher.process(np.zeros(length_in, dtype=np.float32))
