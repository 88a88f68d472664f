"""What a request leaves behind in the shared model: nothing it wrote, and no per-shape
kernel state that grows with every new prompt length (issues 18, 19, 21)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from wyoming_pocket_tts.engine import GenerationOptions, build_demo_model
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


# Run in a fresh process, so that no other test's allocations move its resident memory.
# Two torch threads: the old code took oneDNN's shape-cached product only on more than one.
_PROMPT_LENGTHS_SCRIPT = """
import sys, threading
import torch
torch.set_num_threads(2)
from wyoming_pocket_tts.engine import GenerationOptions, build_demo_model

def rss_mb():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024

model = build_demo_model()
voice = model.voice_from_predefined("demo")
words = "the kitchen lights are on and the front door is locked tonight".split()

def first_frame(count):
    text = " ".join(words[i % len(words)] for i in range(count)) + "."
    cancel = threading.Event()
    frames = model.synthesize(text, voice, GenerationOptions(seed=count, max_tokens_per_chunk=200), cancel)
    next(frames)
    cancel.set()
    for _ in frames:
        pass

for count in range(1, 6):  # warm-up: first-use costs are not growth
    first_frame(count)
warm = rss_mb()
for count in range(6, 80):  # every prompt a new length
    first_frame(count)
print(rss_mb() - warm)
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="resident memory is read from /proc (Linux)")
def test_memory_stays_bounded_over_many_distinct_prompt_lengths() -> None:
    """Issue 18/21: every distinct prompt length was a new matrix shape, and oneDNN kept
    a primitive per shape; 74 new lengths then added about 100 MB to the tiny model."""
    result = subprocess.run([sys.executable, "-c", _PROMPT_LENGTHS_SCRIPT], capture_output=True, text=True,
                            timeout=600, cwd=Path(__file__).resolve().parents[1])
    assert result.returncode == 0, result.stderr[-2000:]
    growth_mb = float(result.stdout.split()[-1])
    assert growth_mb < 30, f"resident memory grew by {growth_mb:.0f} MB over 74 new prompt lengths"
