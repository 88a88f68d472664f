"""Plain data handed between the engine's callers and the engine."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GenerationOptions:
    """Sampling settings of one request; None means "the model's default"."""

    temperature: float | None = None
    decode_steps: int = 1
    eos_threshold: float | None = None
    # Seed of the request's own noise generator: the same seed gives the same audio.
    seed: int | None = None
    max_tokens_per_chunk: int = 50
