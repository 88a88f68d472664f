"""Real speech for audio tests and bench/stretch_bench.py: espeak-ng (installed from Debian
when missing) at 24 kHz, and the measures they apply to it (pitch, largest jump)."""

from __future__ import annotations

import logging
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

_LOGGER = logging.getLogger(__name__)

SAMPLE_RATE = 24_000
FRAME_SIZE = 1920  # the engine's 80 ms frame at 24 kHz
# Below this level a recording's start and end count as its own silence.
QUIET = 1e-3
# Three sentences of a reply, about 8 s in all.
SENTENCES = (
    "The quick brown fox jumps over the lazy dog.",
    "Home Assistant turned on the kitchen lights at seven o'clock.",
    "Tomorrow will be sunny, with a light breeze from the west.",
)


def ensure_espeak() -> str | None:
    """The espeak-ng program, installed with apt-get if needed; None (and why, logged) if not."""
    return ensure_debian_package("espeak-ng", lambda: shutil.which("espeak-ng"))


def ensure_debian_package(package: str, find: Callable[[], str | None]) -> str | None:
    """What `find` finds, after installing `package` with apt-get if it finds nothing
    (updating the package lists if the first try fails); None, logged, if it cannot."""
    found = find()
    if found:
        return found
    apt = shutil.which("apt-get")
    if apt is None:
        _LOGGER.warning("%s is missing and there is no apt-get to install it", package)
        return None
    for command in ([apt, "install", "-y", package], [apt, "update"], [apt, "install", "-y", package]):
        result = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
        if result.returncode == 0 and find():
            break
        if result.returncode != 0:
            _LOGGER.warning("%s failed: %s", " ".join(command), result.stderr.strip()[-500:])
    return find()


def speak(espeak: str, text: str, path: Path) -> np.ndarray:
    """``text`` spoken by espeak-ng, as float32 mono at 24 kHz, its own silence trimmed."""
    subprocess.run([espeak, "-w", str(path), text], check=True, capture_output=True, timeout=60)
    audio, rate = sf.read(path, dtype="float32", always_2d=True)
    audio = soxr.resample(audio[:, 0], rate, SAMPLE_RATE).astype(np.float32)
    loud = np.flatnonzero(np.abs(audio) >= QUIET)
    return audio[loud[0] : loud[-1] + 1]


def speak_sentences(espeak: str, folder: Path) -> list[np.ndarray]:
    """Each of SENTENCES spoken (see ``speak``), its recording kept in ``folder``."""
    return [speak(espeak, text, folder / f"sentence{index}.wav") for index, text in enumerate(SENTENCES)]


def frames_of(audio: np.ndarray, size: int = FRAME_SIZE) -> list[np.ndarray]:
    return [audio[start : start + size] for start in range(0, audio.size, size)]


def pitch_track(audio: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(centre times in s, fundamental frequencies in Hz) of voiced 40 ms windows, by
    autocorrelation."""
    window, hop = int(0.04 * SAMPLE_RATE), int(0.01 * SAMPLE_RATE)
    shortest, longest = SAMPLE_RATE // 400, SAMPLE_RATE // 60  # lags for 400 Hz .. 60 Hz
    loud = 0.1 * np.sqrt(np.mean(audio**2))
    times, pitches = [], []
    for start in range(0, audio.size - window, hop):
        piece = audio[start : start + window].astype(np.float64)
        piece = piece - piece.mean()
        if np.sqrt(np.mean(piece**2)) < loud:
            continue
        ac = np.correlate(piece, piece, mode="full")[window - 1 :]
        # Normalised per lag by the energy of the two overlapping parts: no bias to short lags.
        energy = np.cumsum(piece**2)
        head, tail = energy[::-1][: window - 1], energy[-1] - np.concatenate([[0.0], energy[:-2]])
        ac = ac[: window - 1] / np.sqrt(np.maximum(head * tail, 1e-20))
        lag = shortest + int(np.argmax(ac[shortest:longest]))
        if ac[lag] < 0.8:  # not clearly periodic: unvoiced or a transition
            continue
        # Parabolic interpolation of the peak for sub-sample lags.
        a, b, c = ac[lag - 1], ac[lag], ac[lag + 1]
        offset = 0.5 * (a - c) / (a - 2 * b + c) if a - 2 * b + c != 0 else 0.0
        times.append((start + window / 2) / SAMPLE_RATE)
        pitches.append(SAMPLE_RATE / (lag + offset))
    assert len(pitches) > 20, "too few voiced windows to estimate a pitch"
    return np.array(times), np.array(pitches)


def pitch_ratio(original: np.ndarray, changed: np.ndarray, length_scale: float) -> float:
    """Median ratio of the pitch of ``changed`` at time t to that of ``original`` at
    t / length_scale (the same moment of speech), over windows voiced in both."""
    times_in, pitch_in = pitch_track(original)
    times_out, pitch_out = pitch_track(changed)
    nearest = np.clip(np.searchsorted(times_in, times_out / length_scale), 0, times_in.size - 1)
    close = np.abs(times_in[nearest] - times_out / length_scale) <= 0.01
    assert np.count_nonzero(close) > 20, "too few windows voiced in both"
    return float(np.median(pitch_out[close] / pitch_in[nearest[close]]))


def max_jump(audio: np.ndarray) -> float:
    return float(np.max(np.abs(np.diff(audio))))
