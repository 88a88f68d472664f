"""Streaming, pitch-preserving time stretch (WSOLA) for the engine's frames.

Why our own WSOLA rather than a library: ``bench/stretch_bench.py`` on real espeak-ng
speech (8 s at 24 kHz, fed in 80 ms frames, one thread, this busy 2-core machine), median
cost per 80 ms frame at length_scale 1.25, and the ratio to ours measured in the same run:

==========================  =======  =========  ====================  ==================
candidate                   licence  streams?   wheels amd64/aarch64  ms per frame (x)
==========================  =======  =========  ====================  ==================
ours (WSOLA, numpy)         MIT      yes        numpy only            0.22 (1.0x)
audiotsm 0.1.2 (WSOLA)      MIT      yes        pure Python           0.67 (3.0x)
pytsmod 0.3.8 (WSOLA)       GPL-3.0  no         pure Python + scipy   0.96 (4.4x) *
pedalboard 0.9.26 (Rubber   GPL-3.0  no         yes / yes (C++)       1.56 (7.1x) *
Band)
pyrubberband 0.4.0          ISC,     no         pure Python, runs     1.43 (6.5x) *
                            GPL CLI             the ``rubberband``
                                                program (Debian)
==========================  =======  =========  ====================  ==================

``*`` whole signal at once (cannot stream): its total time over the number of frames, the
best it could do. All preserve the pitch (within 0.2%) and the duration, but audiotsm
(last release September 2017) loses the last 0.7-1% of the audio, gives nothing for the
first frame (a whole frame of latency), and is not bit-identical at speed 1.0.
pytsmod, pyrubberband and pedalboard's Rubber Band stretcher only take a whole signal,
and two of them are GPL while this project is MIT. A streaming WSOLA is about a hundred
lines of numpy, cheaper than each of them, so we keep our own. Worst p99 here: 0.46 ms of
CPU per frame (0.6% of the frame's time; 4-12 ms of wall time, from preemption).

The algorithm (Verhelst and Roelands, 1993): output frames of ``window`` samples are laid
every ``hop`` (= window / 2) samples with a Hann window, which sums to one at that hop.
Output frame ``k`` copies the input around ``k * hop / length_scale``, shifted by up to
``tolerance`` samples to where it best matches (normalised cross-correlation) the natural
continuation of the previous copied frame, so pitch periods line up and no phase jumps.
Positions are nominal plus a bounded shift, never accumulated, so durations do not drift:
the total output is ``round(length_scale * total input)`` samples.

Streaming: output is released as soon as no later frame can change it, which needs the
input up to ``window + tolerance`` (about 40 ms at 24 kHz) past the nominal position, so
the added latency is below one 80 ms frame. ``flush`` pads the end with silence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


MIN_LENGTH_SCALE = 0.5
MAX_LENGTH_SCALE = 2.0
# 32 ms windows hold two pitch periods of a 60 Hz voice; a shift of +-8 ms can align any
# period up to 16 ms. Shorter windows blur low voices, longer ones smear consonants.
WINDOW_SECONDS = 0.032
TOLERANCE_SECONDS = 0.008
# Below this energy the reference is silence: any shift is as good, keep the nominal one.
SILENCE_ENERGY = 1e-10


def check_length_scale(length_scale: float) -> float:
    """``length_scale`` as a float, or a ValueError saying what is accepted."""
    try:
        value = float(length_scale)
    except (TypeError, ValueError):
        raise ValueError(f"length_scale must be a number, not {length_scale!r}") from None
    if not (MIN_LENGTH_SCALE <= value <= MAX_LENGTH_SCALE):  # also rejects NaN
        raise ValueError(
            f"length_scale must be between {MIN_LENGTH_SCALE} and {MAX_LENGTH_SCALE} "
            f"(1.0 normal, above slower, below faster), not {length_scale!r}"
        )
    return value


@dataclass(frozen=True)
class WsolaShape:
    """Frame sizes in samples for one sample rate."""

    window: int
    hop: int
    tolerance: int

    @classmethod
    def for_rate(cls, sample_rate: int) -> WsolaShape:
        hop = max(2, round(WINDOW_SECONDS * sample_rate / 2))
        return cls(window=2 * hop, hop=hop, tolerance=max(1, round(TOLERANCE_SECONDS * sample_rate)))


class TimeStretcher:
    """Stretch a stream of mono float frames by ``length_scale``, keeping the pitch.

    ``process`` takes each frame as it comes and returns the stretched audio that is final
    so far (on average ``length_scale`` times the input); ``flush`` returns the rest and
    makes the stretcher ready for a new stream. At 1.0 it passes frames through untouched.
    Not thread-safe: one stream, one caller at a time.
    """

    def __init__(self, length_scale: float, sample_rate: int) -> None:
        self.length_scale = check_length_scale(length_scale)
        if not isinstance(sample_rate, int) or sample_rate < 1000:
            raise ValueError(f"sample_rate must be an integer of at least 1000 Hz, not {sample_rate!r}")
        self.sample_rate = sample_rate
        self.shape = WsolaShape.for_rate(sample_rate)
        hop = self.shape.hop
        self._window = np.hanning(2 * hop + 1)[:-1].astype(np.float32)  # periodic: sums to 1
        # Frame 0 has no predecessor to overlap: flat first half, so the start is not faded.
        self._first_window = self._window.copy()
        self._first_window[:hop] = 1.0
        self._reset()

    @property
    def passthrough(self) -> bool:
        return self.length_scale == 1.0

    def _reset(self) -> None:
        self._input = np.zeros(0, dtype=np.float32)
        self._input_start = 0  # absolute index of self._input[0]
        self._received = 0
        self._next_frame = 0
        self._previous_position = 0
        self._overlap = np.zeros(self.shape.hop, dtype=np.float32)  # second half of the last frame

    def process(self, frame: np.ndarray) -> np.ndarray:
        samples = _mono_float32(frame)
        if self.passthrough:
            return samples
        self._input = np.concatenate([self._input, samples])
        self._received += samples.size
        return self._run(self._received)

    def flush(self) -> np.ndarray:
        """The rest of the stream (its total is ``round(length_scale * input)``); then reset."""
        if self.passthrough:
            return np.zeros(0, dtype=np.float32)
        total = round(self.length_scale * self._received)
        emitted = self._next_frame * self.shape.hop
        # Enough silence after the end for every frame that still reaches into the output.
        frames_left = max(0, math.ceil((total - emitted) / self.shape.hop))
        end = self._nominal(self._next_frame + frames_left) + 2 * self.shape.window + self.shape.tolerance
        pad = max(0, end - (self._input_start + self._input.size))
        self._input = np.concatenate([self._input, np.zeros(pad, dtype=np.float32)])
        tail = np.concatenate([self._run(self._input_start + self._input.size), self._overlap])
        tail = tail[: max(0, total - emitted)]
        self._reset()
        return tail

    # -- the algorithm -----------------------------------------------------------------

    def _nominal(self, frame_index: int) -> int:
        return round(frame_index * self.shape.hop / self.length_scale)

    def _run(self, available: int) -> np.ndarray:
        """Lay every output frame whose input is in (absolute index < ``available``)."""
        window, hop, tolerance = self.shape.window, self.shape.hop, self.shape.tolerance
        finished: list[np.ndarray] = []
        while True:
            k = self._next_frame
            nominal = self._nominal(k)
            if k == 0:
                needed = window
            else:
                needed = max(nominal + tolerance, self._previous_position + hop) + window
            if needed > available:
                break
            position = 0 if k == 0 else self._best_position(nominal)
            segment = self._slice(position, window)
            weighted = segment * (self._first_window if k == 0 else self._window)
            finished.append(self._overlap + weighted[:hop])
            self._overlap = weighted[hop:].copy()
            self._previous_position = position
            self._next_frame = k + 1
        self._forget_consumed()
        if not finished:
            return np.zeros(0, dtype=np.float32)
        return np.concatenate(finished)

    def _best_position(self, nominal: int) -> int:
        window, hop, tolerance = self.shape.window, self.shape.hop, self.shape.tolerance
        reference = self._slice(self._previous_position + hop, window)
        if float(np.dot(reference, reference)) < SILENCE_ENERGY:
            return nominal
        low = max(0, nominal - tolerance)
        region = self._slice(low, nominal + tolerance + window - low)
        correlation = np.correlate(region, reference, mode="valid")
        energy = np.cumsum(np.square(region, dtype=np.float64))
        energy = np.concatenate([[energy[window - 1]], energy[window:] - energy[:-window]])
        score = correlation / np.sqrt(np.maximum(energy, SILENCE_ENERGY))
        return low + int(np.argmax(score))

    def _slice(self, start: int, length: int) -> np.ndarray:
        offset = start - self._input_start
        return self._input[offset : offset + length]

    def _forget_consumed(self) -> None:
        """Drop input that no later frame can read (it only reads forwards)."""
        keep_from = min(self._previous_position + self.shape.hop,
                        max(0, self._nominal(self._next_frame) - self.shape.tolerance))  # fmt: skip
        drop = keep_from - self._input_start
        if drop > 0:
            self._input = self._input[drop:]
            self._input_start = keep_from


def _mono_float32(frame: np.ndarray) -> np.ndarray:
    samples = np.asarray(frame)
    if samples.ndim != 1:
        raise ValueError(f"a frame must be one channel of samples (1-D), not of shape {samples.shape}")
    if not np.issubdtype(samples.dtype, np.floating):
        raise ValueError(f"a frame must hold float samples in [-1, 1], not {samples.dtype}")
    return samples.astype(np.float32, copy=False)
