"""What a hostile or careless voices folder holds (issue 27, item 5), made locally and
cheaply: sparse and lying WAVs, a long FLAC, special files, thousands of files.

Shared by tests/test_voices_folder_process.py and bench/voices_folder_bench.py.
"""

from __future__ import annotations

import os
import socket
import struct
from pathlib import Path

import numpy as np
import soundfile

from wyoming_pocket_tts.engine.demo import demo_voice_audio

RATE = 24000


def voice_samples(seconds: float, rate: int = RATE, gain: float = 1.0) -> np.ndarray:
    """The demo model's speech-like signal, float32 mono."""
    return (gain * demo_voice_audio(rate, seconds)[0].numpy()).astype(np.float32)


def _wav_header(rate: int, channels: int, data_bytes: int) -> bytes:
    """A 16-bit PCM WAV header that says `data_bytes` of samples follow."""
    return struct.pack("<4sI4s4sIHHIIHH4sI", b"RIFF", 36 + data_bytes, b"WAVE", b"fmt ", 16, 1, channels, rate,
                       rate * 2 * channels, 2 * channels, 16, b"data", data_bytes)  # fmt: skip


def _pcm16(samples: np.ndarray) -> bytes:
    return (np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes()


def sparse_wav(path: Path, size: int = 1 << 30, voice_seconds: float = 10.0) -> Path:
    """A WAV of `size` bytes (1 GiB: 6.2 hours at 24 kHz), a voice then zeros, almost
    nothing of it on disk (the zeros are a hole)."""
    with open(path, "wb") as stream:
        stream.write(_wav_header(RATE, 1, size - 44))
        stream.write(_pcm16(voice_samples(voice_seconds)))
        stream.truncate(size)
    return path


def lying_wav(path: Path, claimed_bytes: int = 1 << 30, voice_seconds: float = 10.0) -> Path:
    """A WAV whose header claims `claimed_bytes` of samples; it holds `voice_seconds`."""
    with open(path, "wb") as stream:
        stream.write(_wav_header(RATE, 1, claimed_bytes))
        stream.write(_pcm16(voice_samples(voice_seconds)))
    return path


def absurd_wav(path: Path, rate: int = RATE, channels: int = 1, voice_seconds: float = 2.0) -> Path:
    """A WAV whose header says an absurd rate or channel count (its data is a voice)."""
    payload = _pcm16(voice_samples(voice_seconds))
    with open(path, "wb") as stream:
        stream.write(_wav_header(rate, channels, len(payload)))
        stream.write(payload)
    return path


def long_flac(path: Path, hours: float = 1.0, rate: int = 16000, voice_seconds: float = 10.0) -> Path:
    """A FLAC of `hours` (a voice, then digital silence: small on disk, quick to write)."""
    minute = np.zeros(rate * 60, dtype=np.float32)
    with soundfile.SoundFile(str(path), "w", rate, 1, subtype="PCM_16") as sound:
        sound.write(voice_samples(voice_seconds, rate))
        for _ in range(int(hours * 60)):
            sound.write(minute)
    return path


def special_files(folder: Path) -> dict[str, Path]:
    """A FIFO, a device (a symlink to /dev/zero) and a socket, each named as a recording."""
    folder.mkdir(parents=True, exist_ok=True)
    made = {"fifo": folder / "pipe.wav", "device": folder / "zero.wav", "socket": folder / "sock.wav"}
    os.mkfifo(made["fifo"])
    os.symlink("/dev/zero", made["device"])
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(made["socket"]))
    return made


def many_files(folder: Path, count: int, seconds: float = 1.0) -> Path:
    """`count` recordings in `folder` (hard links to one small WAV: cheap on disk), named
    voice00000.wav..."""
    folder.mkdir(parents=True, exist_ok=True)
    original = folder.parent / f"{folder.name}-original.wav"
    soundfile.write(str(original), voice_samples(seconds), RATE, subtype="PCM_16")
    for index in range(count):
        os.link(original, folder / f"voice{index:05d}.wav")
    return folder
