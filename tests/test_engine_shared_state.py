"""What a request leaves behind in the shared model: nothing it wrote, and no per-shape
kernel state that grows with every new prompt length (issues 18, 19, 21)."""

from __future__ import annotations

import torch

from wyoming_pocket_tts.engine import GenerationOptions, build_demo_model
from wyoming_pocket_tts.engine import kernels
from wyoming_pocket_tts.engine.mimi import StreamingConv1d, StreamingConvTranspose1d


def _tensors(model) -> dict[str, tuple[int, tuple[int, ...], tuple[int, ...]]]:
    """Where each parameter and buffer lives, and its layout."""
    return {name: (t.data_ptr(), tuple(t.shape), t.stride()) for name, t in model.network.state_dict().items()}


def test_a_request_writes_nothing_in_the_shared_model() -> None:
    model = build_demo_model(seed=3)  # fresh: no earlier request may have prepared it
    voice = model.voice_from_predefined("demo")
    convolutions = [m for m in model.network.mimi.modules() if isinstance(m, (StreamingConv1d, StreamingConvTranspose1d))]
    assert convolutions and all(conv._weight_matrix is not None for conv in convolutions)
    before = _tensors(model)
    for _ in model.synthesize("Two words.", voice, GenerationOptions(seed=0)):
        pass
    assert _tensors(model) == before
