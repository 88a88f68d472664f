"""The int8 kernel of batched steps (native/rows_int8.c, engine/rows_kernel.py) and the
int8 linears that use it (engine/quantize.py)."""

from __future__ import annotations

import ctypes
import logging
import platform

import pytest
import torch

from test_rows_kernel import cpu_flags
from wyoming_pocket_tts.engine import quantize, rows_kernel
from wyoming_pocket_tts.engine.quantize import OURS, Int8Linear, engine_for, machine_engine
from wyoming_pocket_tts.engine.rows_kernel import INT8_ROWS_KERNEL, load_int8

LEVELS = 255  # the kernel's activations: 8 bits


# Each instruction set of the kernel, by its name in /proc/cpuinfo's flags.
CPU_FLAG = {"avx-vnni": "avx_vnni", "avx512-vnni": "avx512_vnni"}


def test_the_kernel_is_used_where_the_cpu_has_vnni() -> None:
    """Installed by `pip install` and taken on x86-64 CPUs with VNNI, in its AVX-512 or its
    AVX form; elsewhere (ARM, x86 without VNNI) int8 keeps torch's engine."""
    on_x86 = platform.machine() == "x86_64"
    for instructions, flag in CPU_FLAG.items():
        assert (load_int8(instructions=instructions) is not None) == (on_x86 and flag in cpu_flags())
    vnni = on_x86 and bool(set(CPU_FLAG.values()) & cpu_flags())
    assert (INT8_ROWS_KERNEL is not None) == vnni
    torchs = engine_for(platform.machine(), torch.backends.quantized.supported_engines)
    assert machine_engine() == (OURS if vnni else torchs)


needs_kernel = pytest.mark.skipif(INT8_ROWS_KERNEL is None, reason="used only on x86-64 CPUs with VNNI (test above)")


def int8_weights(outputs: int, inputs: int, seed: int, with_bias: bool = True) -> tuple[torch.Tensor, ...]:
    """int8 weights as Int8Linear makes them: one scale per output, the rows' sums."""
    generator = torch.Generator().manual_seed(seed)
    weight = torch.randn(outputs, inputs, generator=generator)
    scales = weight.abs().amax(dim=1) / 127
    values = torch.round(weight / scales[:, None]).clamp(-127, 127).to(torch.int8)
    bias = torch.randn(outputs, generator=generator) if with_bias else None
    return values, scales, values.sum(dim=1, dtype=torch.int32), bias


def reference(x: torch.Tensor, values: torch.Tensor, scales: torch.Tensor, sums: torch.Tensor,
              bias: torch.Tensor | None) -> torch.Tensor:  # fmt: skip
    """What the kernel is documented to compute, in torch: each row quantized from its own
    range (0 included), integer sums, then the zero point's share taken off and scaled."""
    lo = x.amin(dim=1, keepdim=True).clamp(max=0)
    hi = x.amax(dim=1, keepdim=True).clamp(min=0)
    scale = (hi - lo) / LEVELS
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    inverse = 1 / scale
    zero = torch.round(-lo * inverse).clamp(0, LEVELS)
    q = (torch.round(x * inverse) + zero).clamp(0, LEVELS).to(torch.int64)
    dots = q @ values.to(torch.int64).t() - zero.to(torch.int64) * sums.to(torch.int64)
    out = dots.to(torch.float32) * (scale * scales)
    return out if bias is None else out + bias


@pytest.mark.parametrize("instructions", ["best", *CPU_FLAG])
@pytest.mark.parametrize("rows", [1, 2, 3, 9])
@pytest.mark.parametrize("shape", [(1024, 3072), (4096, 1024), (1001, 37), (33, 9), (7, 5), (64, 16)])
@pytest.mark.parametrize("with_bias", [True, False])
def test_each_row_is_what_it_is_alone_and_what_the_formula_says(instructions: str, rows: int, shape: tuple[int, int],
                                                                with_bias: bool) -> None:  # fmt: skip
    """Inputs not a multiple of the vector widths (32, 64), outputs left over after the
    blocks of 8: each row bit for bit what it is alone, and what `reference` computes,
    whichever instruction set multiplies (a user's CPU may have either)."""
    kernel = load_int8(instructions=instructions)
    if kernel is None:
        pytest.skip(f"this CPU has no {instructions} (the first test says where the kernel must be)")
    inputs, outputs = shape
    values, scales, sums, bias = int8_weights(outputs, inputs, seed=rows * inputs + outputs, with_bias=with_bias)
    multiply = kernel(values, scales, sums, bias)
    x = torch.randn(rows, inputs, generator=torch.Generator().manual_seed(inputs)) * torch.arange(1, rows + 1)[:, None]
    together = multiply(x)
    assert torch.equal(together, reference(x, values, scales, sums, bias))
    for row in range(rows):
        assert torch.equal(together[row], multiply(x[row : row + 1].clone())[0])


@needs_kernel
def test_rows_of_one_sign_zeros_and_garbage() -> None:
    """A row of zeros gives the bias; rows all positive or all negative still have 0 in
    their range; a row with inf or NaN gives garbage for itself alone, and breaks nothing."""
    values, scales, sums, bias = int8_weights(24, 40, seed=3)
    multiply = INT8_ROWS_KERNEL(values, scales, sums, bias)  # type: ignore[misc]
    x = torch.stack([torch.zeros(40), torch.rand(40) + 1, -torch.rand(40) - 1, torch.full((40,), float("nan")),
                     torch.full((40,), float("inf")), torch.randn(40)])  # fmt: skip
    out = multiply(x)
    assert torch.equal(out[0], bias)
    assert torch.equal(out[:3], reference(x[:3], values, scales, sums, bias))
    assert torch.equal(out[5], multiply(x[5:6].clone())[0])


@needs_kernel
def test_it_multiplies_more_accurately_than_torchs_int8() -> None:
    """8-bit activations with a scale per row, against FBGEMM's 7 bits with one scale per
    input: the default model's step products, 4 rows, relative to float64."""
    torchs = engine_for(platform.machine(), torch.backends.quantized.supported_engines)
    for inputs, outputs in ((1024, 3072), (1024, 4096), (4096, 1024)):
        generator = torch.Generator().manual_seed(inputs + outputs)
        linear = torch.nn.Linear(inputs, outputs)
        with torch.no_grad():
            linear.weight.copy_(torch.randn(outputs, inputs, generator=generator) / inputs**0.5)
        x = torch.randn(4, 1, inputs, generator=generator)
        exact = torch.nn.functional.linear(x.double(), linear.weight.double(), linear.bias.double())
        with torch.inference_mode():
            errors = {
                engine.name: ((Int8Linear(linear, engine)(x).double() - exact).abs().max() / exact.abs().max()).item()
                for engine in (OURS, torchs)
            }
        assert errors["ours"] < 0.02, errors
        assert errors["ours"] < errors[torchs.name], errors


@needs_kernel
def test_an_int8_linear_multiplies_steps_and_prompts_with_it() -> None:
    """A step's rows and a prompt's positions: every row quantized on its own, so a row of
    a batch or of a prompt is what it is alone; no packed weights kept beside ours."""
    generator = torch.Generator().manual_seed(0)
    linear = torch.nn.Linear(96, 40)
    int8 = Int8Linear(linear)
    assert int8.engine == OURS and not hasattr(int8, "packed")
    steps, prompt = torch.randn(3, 1, 96, generator=generator), torch.randn(1, 9, 96, generator=generator)
    with torch.inference_mode():
        together, positions = int8(steps), int8(prompt)
        assert together.shape == (3, 1, 40) and positions.shape == (1, 9, 40)
        for row in range(3):
            assert torch.equal(together[row], int8(steps[row : row + 1])[0])
        for position in range(9):
            assert torch.equal(positions[0, position], int8(prompt[:, position : position + 1])[0, 0])
        exact = linear(steps)
        assert (together - exact).abs().max() < 0.02 * exact.abs().max()


@needs_kernel
def test_what_does_not_fit_is_refused_before_any_memory_is_read() -> None:
    values, scales, sums, bias = int8_weights(16, 32, seed=1)
    multiply = INT8_ROWS_KERNEL(values, scales, sums, bias)  # type: ignore[misc]
    with pytest.raises(ValueError, match="does not fit"):
        multiply(torch.randn(2, 31))
    with pytest.raises(ValueError, match="does not fit"):
        multiply(torch.randn(2, 32, dtype=torch.float64))
    with pytest.raises(ValueError, match="contiguous int8 weights"):
        INT8_ROWS_KERNEL(values.t().contiguous().t(), scales, sums, bias)  # type: ignore[misc]
    with pytest.raises(ValueError, match="contiguous int8 weights"):
        INT8_ROWS_KERNEL(values, scales, sums, bias[:8])  # type: ignore[misc,index]
    with pytest.raises(ValueError, match="contiguous int8 weights"):
        INT8_ROWS_KERNEL(values.float(), scales, sums, bias)  # type: ignore[misc]
    x = torch.randn(2, 64)[:, ::2]  # not contiguous: copied, then multiplied as any other
    assert torch.equal(multiply(x), reference(x, values, scales, sums, bias))


def test_without_it_int8_uses_torchs_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """No C compiler at install, no VNNI: torch's engine, which multiplies a batch's rows
    one at a time to keep each row's bits; asking for ours there is a clear error."""
    monkeypatch.setattr(quantize, "INT8_ROWS_KERNEL", None)
    torchs = engine_for(platform.machine(), torch.backends.quantized.supported_engines)
    assert machine_engine() == torchs
    linear = torch.nn.Linear(64, 24)
    int8 = Int8Linear(linear)
    assert int8.engine == torchs
    steps = torch.randn(4, 1, 64, generator=torch.Generator().manual_seed(2))
    with torch.inference_mode():
        together = int8(steps)
        for row in range(4):
            assert torch.equal(together[row], int8(steps[row : row + 1])[0])
    with pytest.raises(RuntimeError, match="not used on this machine"):
        Int8Linear(linear, OURS)


def test_a_missing_library_is_no_int8_kernel() -> None:
    assert load_int8("wyoming_pocket_tts_no_such_library") is None


def test_a_library_built_without_it_is_no_int8_kernel(monkeypatch: pytest.MonkeyPatch,
                                                       caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    """A library from an older checkout (installed before the int8 kernel existed)."""
    monkeypatch.setattr(rows_kernel, "_open", lambda module: ctypes.CDLL(None))  # the process's own symbols
    with caplog.at_level(logging.WARNING):
        assert load_int8() is None
    assert "pip install ." in caplog.text
