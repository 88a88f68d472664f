"""The float32 kernel of batched steps (native/rows_linear.c, engine/rows_kernel.py)."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from wyoming_pocket_tts.engine import kernels
from wyoming_pocket_tts.engine.rows_kernel import ROWS_KERNEL, load

# What `target_clones("arch=x86-64-v3")` requires, in /proc/cpuinfo's names.
X86_64_V3 = {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"}


def cpu_flags() -> set[str]:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def test_the_kernel_is_built_and_used_where_it_is_faster() -> None:
    """Installed by `pip install` (CI's and the README's) and taken on x86-64-v3 CPUs;
    elsewhere (ARM, older x86) steps keep torch's kernels."""
    vectorized = platform.machine() == "x86_64" and X86_64_V3 <= cpu_flags()
    assert (ROWS_KERNEL is not None) == vectorized


needs_kernel = pytest.mark.skipif(ROWS_KERNEL is None, reason="the kernel is used only on x86-64-v3 CPUs (test above)")


@needs_kernel
@pytest.mark.parametrize("rows", [1, 2, 3, 8])
@pytest.mark.parametrize("shape", [(1024, 3072), (4096, 1024), (1001, 37), (7, 5), (8, 16)])
@pytest.mark.parametrize("with_bias", [True, False])
def test_each_row_is_bit_for_bit_what_it_is_alone(rows: int, shape: tuple[int, int], with_bias: bool) -> None:
    """Inputs not a multiple of the vector width, outputs left over after the blocks."""
    inputs, outputs = shape
    generator = torch.Generator().manual_seed(rows * inputs + outputs)
    weight = torch.randn(outputs, inputs, generator=generator)
    bias = torch.randn(outputs, generator=generator) if with_bias else None
    x = torch.randn(rows, inputs, generator=generator)
    together = ROWS_KERNEL(x, weight, bias)  # type: ignore[misc]
    for row in range(rows):
        assert torch.equal(together[row], ROWS_KERNEL(x[row : row + 1].clone(), weight, bias)[0])  # type: ignore[misc]


@needs_kernel
@pytest.mark.parametrize("shape", [(1024, 3072), (4096, 1024), (1001, 37), (3, 2)])
def test_it_multiplies_as_accurately_as_torch(shape: tuple[int, int]) -> None:
    inputs, outputs = shape
    generator = torch.Generator().manual_seed(inputs)
    weight, bias = torch.randn(outputs, inputs, generator=generator), torch.randn(outputs, generator=generator)
    x = torch.randn(4, inputs, generator=generator)
    exact = F.linear(x.double(), weight.double(), bias.double())
    scale = exact.abs().max()
    ours = (ROWS_KERNEL(x, weight, bias).double() - exact).abs().max() / scale  # type: ignore[misc]
    torchs = (F.linear(x, weight, bias).double() - exact).abs().max() / scale
    assert ours < 1e-6
    assert ours < 4 * torchs + 1e-7


@needs_kernel
def test_a_linear_takes_it_for_every_step_and_torch_for_a_prompt() -> None:
    """A reply's step alone goes through the kernel too: a row's bits must be the same
    alone and batched. A prompt's positions keep MKL's matrix product."""
    generator = torch.Generator().manual_seed(0)
    linear = kernels.Linear(96, 40)
    step, steps, prompt = (torch.randn(shape, generator=generator) for shape in ((1, 1, 96), (3, 96), (1, 9, 96)))
    with torch.inference_mode():
        assert torch.equal(linear(step), ROWS_KERNEL(step[0], linear.weight, linear.bias)[None])  # type: ignore[misc]
        assert torch.equal(linear(steps), ROWS_KERNEL(steps, linear.weight, linear.bias))  # type: ignore[misc]
        assert torch.equal(linear(prompt), F.linear(prompt, linear.weight, linear.bias))
        # A weight that is not contiguous (the kernel reads rows of it) takes torch's way.
        linear.weight = torch.nn.Parameter(torch.randn(96, 40).t(), requires_grad=False)
        assert torch.equal(linear(step), F.linear(step, linear.weight, linear.bias))


@needs_kernel
def test_mismatched_shapes_are_refused_before_any_memory_is_read() -> None:
    with pytest.raises(ValueError, match="shapes do not match"):
        ROWS_KERNEL(torch.randn(2, 8), torch.randn(4, 9), None)  # type: ignore[misc]
    with pytest.raises(ValueError, match="shapes do not match"):
        ROWS_KERNEL(torch.randn(2, 8), torch.randn(4, 8), torch.randn(5))  # type: ignore[misc]


def test_without_it_steps_use_torch_and_rows_keep_their_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not built (no C compiler at install) or not vectorized: F.linear for one row, and
    each row of several with F.linear's bits (`rows_linear`)."""
    monkeypatch.setattr(kernels, "ROWS_KERNEL", None)
    generator = torch.Generator().manual_seed(1)
    linear = kernels.Linear(300, 70)
    steps = torch.randn(4, 1, 300, generator=generator)
    with torch.inference_mode():
        together = linear(steps)
        for row in range(4):
            assert torch.equal(together[row], F.linear(steps[row], linear.weight, linear.bias))


def test_a_missing_library_is_no_kernel() -> None:
    assert load("wyoming_pocket_tts_no_such_library") is None
