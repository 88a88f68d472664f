"""A recording made ready to encode: read once (bounded), loudness normalised, hashed.

The disk cache key of a recorded voice is the hash of these very samples, the ones the
engine encodes: the file is read once, and nothing read after it can change what the
key says. (Hashing the file and then reading it again to encode it let a recording
replaced in between be stored under the other recording's key.) Hashing the prompt,
not the file, also means that only what is encoded counts: the same first 30 s in a
longer file, or in another container, is the same voice.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from wyoming_pocket_tts.engine.recording import read_prompt

from .loudness import VERSION as LOUDNESS_VERSION
from .loudness import LoudnessChange, normalize_loudness

# Part of the disk cache key: how a recording becomes the samples that are encoded.
PROMPT_VERSION = f"prompt-1/{LOUDNESS_VERSION}"


@dataclass(frozen=True, eq=False)
class PreparedRecording:
    """The prompt to encode: float32 mono samples at the model's rate, normalised."""

    samples: np.ndarray
    sample_rate: int
    loudness: LoudnessChange

    @property
    def sha256(self) -> str:
        """Hash of exactly the samples (and their rate) that the engine encodes."""
        digest = hashlib.sha256(f"{self.sample_rate}:float32le\n".encode("ascii"))
        digest.update(np.ascontiguousarray(self.samples, dtype="<f4").tobytes())
        return digest.hexdigest()

    @property
    def seconds(self) -> float:
        return self.samples.size / self.sample_rate


def prepare_recording(path: Path, sample_rate: int) -> PreparedRecording:
    """The recording's first 30 s, mono at `sample_rate`, loudness normalised; VoiceError
    (naming the file) if it cannot be a voice. See `engine.recording` for what is read."""
    samples, change = normalize_loudness(read_prompt(path, sample_rate), sample_rate)
    return PreparedRecording(samples, sample_rate, change)
