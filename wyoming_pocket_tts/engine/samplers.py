"""The flow samplers: how the sampler head turns noise into a latent, one entry per kind.

A new kind is one entry in `SAMPLERS`: the config check, the head's time embeddings and
the sampling loop all read it. Torch-free at import (the loops only add and divide the
tensors they are given), so the config parser can check a kind without loading torch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

    # (condition, times, x) -> the head's output: a flow, or a sample.
    Head = Callable[[torch.Tensor, list[float], torch.Tensor], torch.Tensor]


def _lsd(head: Head, condition: torch.Tensor, noise: torch.Tensor, steps: int) -> torch.Tensor:
    """Lagrangian self-distillation: flow from s to t, `steps` times."""
    x = noise
    for i in range(steps):
        x = x + head(condition, [i / steps, (i + 1) / steps], x) / steps
    return x


def _flow_matching(head: Head, condition: torch.Tensor, noise: torch.Tensor, steps: int) -> torch.Tensor:
    """Euler integration of the flow."""
    x = noise
    for i in range(steps):
        x = x + head(condition, [i / steps], x) / steps
    return x


def _drifting(head: Head, condition: torch.Tensor, noise: torch.Tensor, steps: int) -> torch.Tensor:
    """The head maps noise to a sample in one step."""
    return head(condition, [], noise)


def _pointwise(head: Head, condition: torch.Tensor, noise: torch.Tensor, steps: int) -> torch.Tensor:
    """Noise plus the head's output."""
    return noise + head(condition, [], noise)


@dataclass(frozen=True)
class Sampler:
    # How many time embeddings the head sums (and so has weights for).
    time_conditions: int
    sample: Callable[[Head, torch.Tensor, torch.Tensor, int], torch.Tensor]


SAMPLERS: dict[str, Sampler] = {
    "lsd": Sampler(2, _lsd),
    "flow_matching": Sampler(1, _flow_matching),
    "drifting": Sampler(0, _drifting),
    "pointwise": Sampler(0, _pointwise),
}
