"""Checks of a voice recording made before the engine sees it, and its content hash."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import soundfile

from wyoming_pocket_tts.engine.errors import VoiceError

# Shorter prompts give the model too little of the voice to clone it.
MIN_DURATION_S = 0.5
# Peak below -80 dBFS (the engine's own threshold): digital silence, no voice to clone.
SILENCE_PEAK = 1e-4
_HASH_BLOCK = 1 << 20
_READ_BLOCK = 1 << 16


def recording_duration(path: Path) -> float:
    """Duration in seconds, read from the header only; VoiceError if missing or unreadable."""
    if not path.exists():
        raise VoiceError(f"recording {path} not found")
    try:
        info = soundfile.info(str(path))
    except (soundfile.LibsndfileError, RuntimeError, OSError) as err:
        raise VoiceError(f"recording {path} cannot be read as audio: {err}") from None
    if info.samplerate <= 0 or info.frames <= 0:
        raise VoiceError(f"recording {path} holds no audio")
    duration = info.frames / info.samplerate
    if duration < MIN_DURATION_S:
        raise VoiceError(
            f"recording {path} lasts {duration:.2f} s; at least {MIN_DURATION_S} s of speech is needed"
        )
    return duration


def check_recording(path: Path) -> None:
    """Full check before encoding: the header (as above), then the samples are not silent."""
    recording_duration(path)
    peak = 0.0
    try:
        # Block by block: a long recording is never held whole just to find its peak.
        for block in soundfile.blocks(str(path), blocksize=_READ_BLOCK, dtype="float32", always_2d=True):
            if block.size:
                peak = max(peak, float(np.max(np.abs(block))))
            if peak >= SILENCE_PEAK:
                return
    except (soundfile.LibsndfileError, RuntimeError, OSError) as err:
        raise VoiceError(f"recording {path} cannot be decoded: {err}") from None
    level = f"peak {20 * np.log10(peak):.0f} dBFS" if peak > 0 else "all samples are zero"
    raise VoiceError(f"recording {path} is silent ({level}): no voice to clone")


def file_sha256(path: Path) -> str:
    """Hash of the file's bytes: the disk cache key follows the content, not the name or date."""
    digest = hashlib.sha256()
    try:
        with path.open("rb") as stream:
            while chunk := stream.read(_HASH_BLOCK):
                digest.update(chunk)
    except OSError as err:
        raise VoiceError(f"recording {path} cannot be read: {err.strerror or err}") from None
    return digest.hexdigest()
