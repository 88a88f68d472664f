"""Reading a voice recording, bounded: at most MAX_PROMPT_SECONDS of it, whatever it claims.

A voice is cloned from the first 30 s of a recording, so that is all that is ever read:
the file is decoded block by block (a block is about a megabyte of samples, whatever the
channel count), each block mixed down to mono and resampled at once (a streaming
resampler), and reading stops after 30 s. So a 6-hour WAV, a one-hour FLAC or a header
that claims 2^40 frames costs what a 30 s recording does, and a header that claims more
frames than the file holds simply ends early. Sample rates and channel counts outside
what any microphone records are refused (they are corrupt headers, or attempts to make a
"30 s" block enormous). Only regular files are opened (`core.files.open_regular`): a FIFO
or a device named as a recording never blocks the reader.

Torch-free (numpy, soundfile, soxr): the voices folder is listed with `recording_info`
by the server, which imports no torch. The engine turns the samples into a tensor
(`engine.audio.read_recording`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile

from ..core.errors import VoiceError
from ..core.files import open_regular, unreadable
from ..core.logsafe import escape

MAX_PROMPT_SECONDS = 30.0
MIN_PROMPT_SECONDS = 0.5
# Peak below which a recording is taken as silence (about -80 dBFS).
SILENCE_PEAK = 1e-4
# From telephone speech to the highest rate audio interfaces record at.
MIN_SAMPLE_RATE = 8_000
MAX_SAMPLE_RATE = 384_000
# More than any microphone array a household records with.
MAX_CHANNELS = 32
# Samples (frames x channels) decoded at a time: 1 MiB of float32.
_BLOCK_SAMPLES = 1 << 18


@dataclass(frozen=True)
class RecordingInfo:
    """What a recording's header says (checked by `recording_info`)."""

    sample_rate: int
    channels: int
    # As the header claims: a file may hold fewer (reading then ends early).
    frames: int
    format: str

    @property
    def seconds(self) -> float:
        return self.frames / self.sample_rate


def recording_info(path: Path) -> RecordingInfo:
    """The recording's header, checked; VoiceError if it is missing, not a regular file,
    not audio, empty, of an absurd rate or channel count, or shorter than MIN_PROMPT_SECONDS.
    Reads the header only."""
    with _opened(path) as sound:
        return _checked(path, sound)


def read_prompt(path: Path, sample_rate: int, max_seconds: float = MAX_PROMPT_SECONDS) -> np.ndarray:
    """The recording's first `max_seconds` as float32 mono samples at `sample_rate`.

    Channels are averaged; VoiceError (naming the file) for everything `recording_info`
    refuses, a recording that turns out shorter than MIN_PROMPT_SECONDS or silent, or
    samples that are not numbers. Memory: `max_seconds` of output plus one block.
    """
    shown = escape(path)
    with _opened(path) as sound:
        info = _checked(path, sound)
        wanted = int(max_seconds * info.sample_rate)
        block = max(1024, _BLOCK_SAMPLES // info.channels)
        resampler = None
        if info.sample_rate != sample_rate:
            import soxr  # only when needed: most recordings are read at the model's rate

            resampler = soxr.ResampleStream(info.sample_rate, sample_rate, 1, dtype="float32")
        pieces: list[np.ndarray] = []
        frames = 0
        peak = 0.0
        while frames < wanted:
            try:
                data = sound.read(min(block, wanted - frames), dtype="float32", always_2d=True)
            except Exception as err:  # noqa: BLE001 -- libsndfile reports every failure as one type
                raise VoiceError(f"recording {shown} cannot be decoded: {_reason(err)}") from None
            if not len(data):
                break  # the end, wherever the header said it was
            frames += len(data)
            mono = data.mean(axis=1)
            if not np.isfinite(mono).all():
                raise VoiceError(f"recording {shown} holds samples that are not numbers: it is corrupt")
            peak = max(peak, float(np.abs(mono).max()))
            pieces.append(mono if resampler is None else resampler.resample_chunk(mono, last=False))
    if frames < MIN_PROMPT_SECONDS * info.sample_rate:
        raise VoiceError(_too_short(shown, frames / info.sample_rate))
    if peak < SILENCE_PEAK:
        level = f"peak {20 * np.log10(peak):.0f} dBFS" if peak > 0 else "all samples are zero"
        raise VoiceError(f"recording {shown} is silent ({level}): no voice to clone")
    if resampler is not None:
        pieces.append(resampler.resample_chunk(np.zeros(0, dtype=np.float32), last=True))
    return np.ascontiguousarray(np.concatenate(pieces), dtype=np.float32)


@contextlib.contextmanager
def _opened(path: Path) -> Iterator[soundfile.SoundFile]:
    shown = escape(path)
    try:
        stream = open_regular(path)
    except OSError as err:
        raise VoiceError(unreadable("recording", path, err)) from None
    with stream:
        try:
            sound = soundfile.SoundFile(stream.fileno(), closefd=False)
        except Exception as err:  # noqa: BLE001 -- libsndfile reports every failure as one type
            raise VoiceError(f"recording {shown} cannot be read as audio: {_reason(err)}") from None
        with sound:
            yield sound


def _checked(path: Path, sound: soundfile.SoundFile) -> RecordingInfo:
    shown = escape(path)
    info = RecordingInfo(int(sound.samplerate), int(sound.channels), int(sound.frames), str(sound.format))
    if info.sample_rate <= 0 or info.frames <= 0 or info.channels <= 0:
        raise VoiceError(f"recording {shown} holds no audio")
    if not MIN_SAMPLE_RATE <= info.sample_rate <= MAX_SAMPLE_RATE:
        raise VoiceError(f"recording {shown} says its sample rate is {info.sample_rate} Hz; "
                         f"{MIN_SAMPLE_RATE} to {MAX_SAMPLE_RATE} Hz is accepted (is the file corrupt?)")  # fmt: skip
    if info.channels > MAX_CHANNELS:
        raise VoiceError(f"recording {shown} says it has {info.channels} channels; at most {MAX_CHANNELS} "
                         "are accepted (is the file corrupt?)")  # fmt: skip
    if info.seconds < MIN_PROMPT_SECONDS:
        raise VoiceError(_too_short(shown, info.seconds))
    return info


def _too_short(shown: str, seconds: float) -> str:
    return (f"recording {shown} lasts {seconds:.2f} s; at least {MIN_PROMPT_SECONDS} s of speech is needed "
            "(5 to 30 s works best)")  # fmt: skip


def _reason(err: Exception) -> str:
    """libsndfile's own words, without soundfile's "Error opening 7:" (a file descriptor)."""
    return escape(getattr(err, "error_string", None) or err)
