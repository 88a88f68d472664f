"""Reading a voice recording into the 24 kHz mono prompt the codec encodes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ..core.errors import VoiceError

MAX_PROMPT_SECONDS = 30.0
MIN_PROMPT_SECONDS = 0.5
# Peak below which a recording is taken as silence (about -80 dBFS).
SILENCE_PEAK = 1e-4


def read_recording(path: Path, sample_rate: int) -> torch.Tensor:
    """A recording as float32 [1, samples] at `sample_rate`, mono, at most 30 s."""
    import soundfile

    if not path.is_file():
        raise VoiceError(f"recording not found: {path}")
    try:
        data, rate = soundfile.read(str(path), dtype="float32", always_2d=True)
    except Exception as err:  # noqa: BLE001 -- libsndfile reports every failure as one type
        raise VoiceError(f"cannot read recording {path}: {err}") from None
    mono = data.mean(axis=1)
    if mono.size < MIN_PROMPT_SECONDS * rate:
        raise VoiceError(
            f"recording {path} lasts {mono.size / rate:.2f} s; a voice needs at least "
            f"{MIN_PROMPT_SECONDS} s of speech (5 to 30 s works best)"
        )
    if not np.isfinite(mono).all() or np.abs(mono).max() < SILENCE_PEAK:
        raise VoiceError(f"recording {path} is silent or unreadable: no voice to clone")
    mono = mono[: int(MAX_PROMPT_SECONDS * rate)]
    if rate != sample_rate:
        import soxr

        mono = soxr.resample(mono, rate, sample_rate).astype(np.float32)
    return torch.from_numpy(np.ascontiguousarray(mono)).unsqueeze(0)


def end_on_pause(audio: torch.Tensor, sample_rate: int, pause: float = 0.08, fade: float = 0.02,
                 floor_db: float = 35.0) -> torch.Tensor:
    """Trim trailing silence, fade the end out and append a short pause.

    The model continues whatever the prompt ends on: a prompt cut mid-word makes every
    answer start with a burst, and a long silence delays the first word. Trailing 20 ms
    blocks quieter than `floor_db` below the loudest are cut, then `fade` seconds are
    faded out and `pause` seconds of zeros appended, like the prompts the model saw.
    """
    block = max(1, int(0.02 * sample_rate))
    blocks = audio.shape[-1] // block
    if blocks == 0:
        return audio
    energy = audio[..., : blocks * block].reshape(-1, blocks, block).square().mean(dim=(0, 2)).sqrt()
    level = 20 * torch.log10(energy + 1e-12)
    loud = torch.nonzero(level > level.max() - floor_db).flatten()
    end = (int(loud[-1]) + 1) * block
    trimmed = audio[..., :end].clone()
    fade_len = min(int(fade * sample_rate), end)
    trimmed[..., end - fade_len :] *= torch.linspace(1, 0, fade_len, dtype=audio.dtype)
    silence = audio.new_zeros(*audio.shape[:-1], int(pause * sample_rate))
    return torch.cat([trimmed, silence], dim=-1)
