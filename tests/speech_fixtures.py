"""Real speech for audio tests: espeak-ng, installed from Debian when missing, at 24 kHz."""

from __future__ import annotations

import logging
import shutil
import subprocess
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

_LOGGER = logging.getLogger(__name__)

SAMPLE_RATE = 24_000
FRAME_SIZE = 1920  # the engine's 80 ms frame at 24 kHz
# Below this level a recording's start and end count as its own silence.
QUIET = 1e-3


def ensure_espeak() -> str | None:
    """The espeak-ng program, installed with apt-get if needed; None (and why, logged) if not."""
    found = shutil.which("espeak-ng")
    if found:
        return found
    apt = shutil.which("apt-get")
    if apt is None:
        _LOGGER.warning("espeak-ng is missing and there is no apt-get to install it")
        return None
    for command in ([apt, "install", "-y", "espeak-ng"], [apt, "update"], [apt, "install", "-y", "espeak-ng"]):
        result = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
        if result.returncode == 0 and shutil.which("espeak-ng"):
            break
        if result.returncode != 0:
            _LOGGER.warning("%s failed: %s", " ".join(command), result.stderr.strip()[-500:])
    return shutil.which("espeak-ng")


def speak(espeak: str, text: str, path: Path) -> np.ndarray:
    """``text`` spoken by espeak-ng, as float32 mono at 24 kHz, its own silence trimmed."""
    subprocess.run([espeak, "-w", str(path), text], check=True, capture_output=True, timeout=60)
    audio, rate = sf.read(path, dtype="float32", always_2d=True)
    audio = soxr.resample(audio[:, 0], rate, SAMPLE_RATE).astype(np.float32)
    loud = np.flatnonzero(np.abs(audio) >= QUIET)
    return audio[loud[0] : loud[-1] + 1]


def frames_of(audio: np.ndarray, size: int = FRAME_SIZE) -> list[np.ndarray]:
    return [audio[start : start + size] for start in range(0, audio.size, size)]
