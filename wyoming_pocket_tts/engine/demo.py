"""Small local stand-ins for the released files: a tokenizer and a tiny model config.

They let a newcomer without network check the whole pipeline (`--model demo`), and let
tests and benchmarks build random-weight models of any released architecture offline
(the SentencePiece trainer that only tests need lives in tests/tokenizer_fixtures.py).
"""

from __future__ import annotations

import itertools
import string
from pathlib import Path
from typing import Any

WORD_START = "\u2581"  # SentencePiece's word-start marker

# The demo model's facts, here (torch-free) so the server can list its voice before building it.
DEMO_NAME = "demo"
DEMO_VOICE = "demo"
DEMO_LANGUAGES = ("en",)


def make_tokenizer_json(path: Path, vocab_size: int) -> Path:
    """A unigram `tokenizers` file with exactly `vocab_size` pieces, SentencePiece-style."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    symbols = string.ascii_letters + string.digits + ".,!?;:'\"-()\u2026"
    pieces: list[tuple[str, float]] = [("<unk>", 0.0), (WORD_START, -1.0)]
    for symbol in symbols:
        pieces += [(WORD_START + symbol, -2.0), (symbol, -3.0)]
    for letters in itertools.chain(
        itertools.product(string.ascii_lowercase, repeat=2), itertools.product(string.ascii_lowercase, repeat=3)
    ):
        if len(pieces) >= vocab_size:
            break
        pieces.append((WORD_START + "".join(letters), -4.0 - len(letters)))
    if len(pieces) < vocab_size:
        raise ValueError(f"cannot make {vocab_size} pieces")
    tokenizer = Tokenizer(models.Unigram(pieces[:vocab_size], unk_id=0))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    path.parent.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(path))
    return path


def demo_voice_audio(sample_rate: int, seconds: float = 2.0) -> "torch.Tensor":
    """A voice-like test signal [1, samples]: a gliding harmonic tone in syllable bursts."""
    import math

    import torch

    # float64: the phase of a long recording accumulates over hundreds of thousands of steps
    t = torch.arange(int(seconds * sample_rate), dtype=torch.float64) / sample_rate
    pitch = 140 + 30 * torch.sin(2 * math.pi * 0.7 * t)
    phase = 2 * math.pi * torch.cumsum(pitch, 0) / sample_rate
    voiced = sum(torch.sin(k * phase) / k for k in range(1, 8))
    envelope = torch.sin(2 * math.pi * 4 * t).clamp(min=0).sqrt()
    return (0.2 * voiced * envelope).float().unsqueeze(0)


def demo_config(tokenizer_path: str, vocab_size: int) -> dict[str, Any]:
    """A tiny model of the default architecture's shape (~2 M parameters)."""
    seanet = {
        "dimension": 64, "channels": 1, "n_filters": 8, "n_residual_layers": 1, "ratios": [6, 5, 4],
        "kernel_size": 7, "residual_kernel_size": 3, "last_kernel_size": 3, "dilation_base": 2,
        "pad_mode": "constant", "compress": 2,
    }  # fmt: skip
    return {
        "flow_lm": {
            "dtype": "float32",
            "insert_bos_before_voice": True,
            "flow": {"dim": 32, "depth": 2},
            "transformer": {"d_model": 64, "hidden_scale": 2, "max_period": 10000, "num_heads": 4, "num_layers": 2},
            "lookup_table": {"dim": 64, "n_bins": vocab_size, "tokenizer": "tokenizers", "tokenizer_path": tokenizer_path},
        },
        "mimi": {
            "dtype": "float32", "sample_rate": 24000, "channels": 1, "frame_rate": 12.5,
            "inner_dim": 32, "outer_dim": 64, "seanet": seanet,
            "transformer": {
                "d_model": 64, "num_heads": 4, "num_layers": 1, "layer_scale": 0.01, "context": 250,
                "dim_feedforward": 128, "input_dimension": 64, "output_dimensions": [64],
            },
            "quantizer": {"dimension": 32, "output_dimension": 64},
        },  # fmt: skip
    }
