"""The 24 kHz mono prompt the codec encodes: a recording read as a tensor, its end made a pause."""

from __future__ import annotations

from pathlib import Path

import torch

from .recording import read_prompt


def read_recording(path: Path, sample_rate: int) -> torch.Tensor:
    """A recording as float32 [1, samples] at `sample_rate`, mono, at most 30 s (read
    bounded, see `engine.recording`); VoiceError naming the file if it cannot be a voice."""
    return torch.from_numpy(read_prompt(Path(path), sample_rate)).unsqueeze(0)


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
