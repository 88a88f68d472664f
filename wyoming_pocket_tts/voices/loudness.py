"""Loudness normalisation of a voice prompt, once, before it is encoded.

Pocket TTS continues the voice of its prompt, loudness included: a recording made far
from the phone's microphone gives a voice that speaks every answer quietly (a known
complaint with cloned voices). So each recording is brought to TARGET_LUFS before it is
encoded, measured as ITU-R BS.1770-4 integrated loudness (K-weighted, gated: the
absolute gate at -70 LUFS and the relative one at -10 LU leave pauses and silence out
of the measure, so a recording that is mostly silence is not pushed up for it). The
measure is pyloudnorm's, a well-kept implementation of the standard; the gain is ours:

* one gain for the whole prompt (no compression: the voice's own dynamics stay);
* at most MAX_GAIN_DB up: a recording quieter than TARGET_LUFS - MAX_GAIN_DB is noise or
  a broken microphone, and amplifying it further only amplifies the noise;
* never past PEAK_CEILING_DBFS: the sample peak limits the gain, so nothing clips (a
  recording with one loud click may stay below the target);
* a prompt with nothing above the absolute gate (digital near-silence) is left as is.

Changing any of this changes the prompts, so VERSION is part of the disk cache key.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

VERSION = "bs1770-20lufs-1"
TARGET_LUFS = -20.0
MAX_GAIN_DB = 30.0
PEAK_CEILING_DBFS = -1.0


@dataclass(frozen=True)
class LoudnessChange:
    """What normalisation measured and did (for the log)."""

    measured_lufs: float  # -inf: nothing above the gate
    gain_db: float

    def describe(self) -> str:
        if not math.isfinite(self.measured_lufs):
            return "loudness below the gate, left as is"
        return f"loudness {self.measured_lufs:.1f} LUFS, gain {self.gain_db:+.1f} dB"


def integrated_loudness(samples: np.ndarray, sample_rate: int) -> float:
    """ITU-R BS.1770-4 integrated loudness of mono samples, in LUFS (-inf if all is gated out).
    Needs at least 0.4 s (one gating block)."""
    import pyloudnorm  # imports scipy: only where a recording is encoded

    with np.errstate(divide="ignore"):
        return float(pyloudnorm.Meter(sample_rate).integrated_loudness(samples.astype(np.float64)))


def normalize_loudness(samples: np.ndarray, sample_rate: int) -> tuple[np.ndarray, LoudnessChange]:
    """`samples` (float32 mono) brought towards TARGET_LUFS within the bounds above."""
    measured = integrated_loudness(samples, sample_rate)
    peak = float(np.max(np.abs(samples))) if samples.size else 0.0
    if not math.isfinite(measured) or peak <= 0.0:
        return samples, LoudnessChange(measured, 0.0)
    gain_db = min(TARGET_LUFS - measured, MAX_GAIN_DB, PEAK_CEILING_DBFS - 20.0 * math.log10(peak))
    gain = np.float32(10.0 ** (gain_db / 20.0))
    return (samples * gain).astype(np.float32), LoudnessChange(measured, gain_db)
