"""Loudness normalisation of a voice prompt, once, before it is encoded.

Pocket TTS continues the voice of its prompt, loudness included: a recording made far
from the phone's microphone gives a voice that speaks every answer quietly (a known
complaint with cloned voices). So each recording is brought to TARGET_LUFS before it is
encoded, measured as ITU-R BS.1770-4 integrated loudness (K-weighted, gated: the
absolute gate at -70 LUFS and the relative one at -10 LU leave pauses and silence out
of the measure, so a recording that is mostly silence is not pushed up for it). Then:

* one gain for the whole prompt (no compression: the voice's own dynamics stay);
* at most MAX_GAIN_DB up: a recording quieter than TARGET_LUFS - MAX_GAIN_DB is noise or
  a broken microphone, and amplifying it further only amplifies the noise;
* never past PEAK_CEILING_DBFS: the sample peak limits the gain, so nothing clips (a
  recording with one loud click may stay below the target);
* a prompt with nothing above the absolute gate (digital near-silence) is left as is.

The measure is written here, not taken from pyloudnorm (the well-kept implementation of
the standard, which the tests use as the oracle): pyloudnorm filters with scipy, whose
import alone adds 66 MB to the server's resident memory (and ~100 MB to an install on a
Raspberry Pi) for one measure per recording. The K-weighting filter is applied in the
frequency domain (numpy's FFT of the zero-padded prompt times the two biquads' response:
the same as filtering it, checked against scipy's `lfilter` in the tests), the biquads
made for any sample rate from the analog parameters that give exactly the standard's
48 kHz coefficients by the bilinear transform. pyloudnorm uses rounded parameters
(1500 Hz, 4 dB), so the two differ by 0.04 to 0.13 LU, a constant for a sample rate.

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


# K-weighting, ITU-R BS.1770-4: a high shelf (the head's effect), then a high-pass (RLB
# weighting), as centre frequency, quality factor and shelf gain: the parameters that
# give the standard's 48 kHz coefficients by the bilinear transform.
_SHELF = (1681.974450955533, 0.7071752369554196, 3.999843853973347)
_HIGH_PASS = (38.13547087602444, 0.5003270373238773)
_STEP_S = 0.1
_STEPS_PER_BLOCK = 4  # gating blocks of 400 ms, 75 % overlap
_SLICE = 1 << 16  # bins of the filter's response made at a time
_ABSOLUTE_GATE_LUFS = -70.0
_RELATIVE_GATE_LU = -10.0


def k_weighting(sample_rate: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The two biquads (b, a) of the K-weighting filter at `sample_rate`."""
    frequency, quality, gain_db = _SHELF
    k = math.tan(math.pi * frequency / sample_rate)
    high, band = 10.0 ** (gain_db / 20.0), 10.0 ** (gain_db / 20.0 * 0.4996667741545416)
    norm = 1.0 + k / quality + k * k
    shelf = (np.array([high + band * k / quality + k * k, 2.0 * (k * k - high), high - band * k / quality + k * k]) / norm,
             np.array([1.0, 2.0 * (k * k - 1.0) / norm, (1.0 - k / quality + k * k) / norm]))  # fmt: skip
    frequency, quality = _HIGH_PASS
    k = math.tan(math.pi * frequency / sample_rate)
    norm = 1.0 + k / quality + k * k
    high_pass = (np.array([1.0, -2.0, 1.0]),
                 np.array([1.0, 2.0 * (k * k - 1.0) / norm, (1.0 - k / quality + k * k) / norm]))  # fmt: skip
    return [shelf, high_pass]


def integrated_loudness(samples: np.ndarray, sample_rate: int) -> float:
    """ITU-R BS.1770-4 integrated loudness of mono samples, in LUFS (-inf if nothing is
    above the absolute gate, or shorter than one 0.4 s block). Memory: about four times
    the samples' size (single precision; the filter's response is made in slices)."""
    step = round(_STEP_S * sample_rate)
    steps = samples.size // step
    if steps < _STEPS_PER_BLOCK:
        return -math.inf
    # Padded by half a second, so the filter's response to the end does not wrap around.
    size = _fft_size(samples.size + sample_rate // 2)
    # Single precision: the measure needs 0.01 dB, and takes half the time and memory.
    spectrum = np.fft.rfft(samples.astype(np.float32, copy=False), size)
    biquads = k_weighting(sample_rate)
    for start in range(0, spectrum.size, _SLICE):
        part = spectrum[start : start + _SLICE]
        delay = np.exp(-2j * np.pi * np.arange(start, start + part.size) / size).astype(np.complex64)  # z^-1
        for b, a in biquads:
            part *= (b[0] + delay * (b[1] + delay * b[2])) / (a[0] + delay * (a[1] + delay * a[2]))
    weighted = np.fft.irfft(spectrum, size)[: steps * step]
    del spectrum
    # Energy per 100 ms step; a 400 ms block (75 % overlap) is four consecutive steps.
    energy = np.square(weighted).reshape(steps, step).sum(axis=1, dtype=np.float64)
    power = np.convolve(energy, np.ones(_STEPS_PER_BLOCK), mode="valid") / (_STEPS_PER_BLOCK * step)
    with np.errstate(divide="ignore"):
        loudness = -0.691 + 10.0 * np.log10(power)
    gated = power[loudness > _ABSOLUTE_GATE_LUFS]
    if not gated.size:
        return -math.inf
    relative_gate = -0.691 + 10.0 * math.log10(float(gated.mean())) + _RELATIVE_GATE_LU
    gated = power[(loudness > _ABSOLUTE_GATE_LUFS) & (loudness > relative_gate)]
    return -0.691 + 10.0 * math.log10(float(gated.mean()))


def _fft_size(minimum: int) -> int:
    """The smallest 2^a 3^b 5^c at least `minimum`: a size numpy's FFT is fast at, at most
    a few per cent larger (a power of two can be twice as large)."""
    best = 1 << (minimum - 1).bit_length()
    fives = 1
    while fives < best:
        threes = fives
        while threes < best:
            size = threes << max(0, (minimum - 1) // threes).bit_length()
            best = min(best, size)
            threes *= 3
        fives *= 5
    return best


def normalize_loudness(samples: np.ndarray, sample_rate: int) -> tuple[np.ndarray, LoudnessChange]:
    """`samples` (float32 mono) brought towards TARGET_LUFS within the bounds above."""
    measured = integrated_loudness(samples, sample_rate)
    peak = float(np.max(np.abs(samples))) if samples.size else 0.0
    if not math.isfinite(measured) or peak <= 0.0:
        return samples, LoudnessChange(measured, 0.0)
    gain_db = min(TARGET_LUFS - measured, MAX_GAIN_DB, PEAK_CEILING_DBFS - 20.0 * math.log10(peak))
    gain = np.float32(10.0 ** (gain_db / 20.0))
    return (samples * gain).astype(np.float32), LoudnessChange(measured, gain_db)
