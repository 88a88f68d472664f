"""The engine behaves the same on every machine it ships to (x86_64 PCs, aarch64 Pis):
int8 products pick their own quantized engine, and the demo model's weights do not
depend on the CPU. Run under the aarch64 kit too (README, "Development")."""

from __future__ import annotations

import hashlib
import platform
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from wyoming_pocket_tts.engine import build_demo_model
from wyoming_pocket_tts.engine.network import portable_normal
from wyoming_pocket_tts.engine.quantize import FBGEMM, QNNPACK, Int8Linear, engine_for

MACHINE = platform.machine()
SUPPORTED = torch.backends.quantized.supported_engines
PLATFORM_ENGINE = engine_for(MACHINE, SUPPORTED)
# sha256 of the demo model's weights (parameter names, shapes and float32 bytes): the same
# on x86_64 and aarch64, because they come from integers, not from torch's CPU generator.
# Buffers are left out: the model computes them (e.g. the sampler's time-embedding
# frequencies, with torch.exp, like upstream), and each CPU's exp may round its last bit
# differently, as every kernel may; they are not weights.
DEMO_WEIGHTS_SHA256 = "9c2750edf67063cf75b62768e034337c98015dcdb91c9f6434f83b71c2a1ec7d"


def _float_linear(seed: int = 0) -> torch.nn.Linear:
    generator = torch.Generator().manual_seed(seed)
    linear = torch.nn.Linear(64, 48)
    with torch.no_grad():
        linear.weight.copy_(torch.randn(48, 64, generator=generator))
        linear.bias.copy_(torch.randn(48, generator=generator))
    return linear


def _reference_product(linear: torch.nn.Linear, x: torch.Tensor, engine_name: str, reduce_range: bool) -> torch.Tensor:
    """The int8 product packed by `engine_name` chosen globally, the way torch documents it."""
    weight = linear.weight.detach()
    scales = (weight.abs().amax(dim=1) / 127.0).clamp(min=1e-12).double()
    qweight = torch.quantize_per_channel(weight, scales, torch.zeros_like(scales, dtype=torch.long), 0, torch.qint8)
    previous = torch.backends.quantized.engine
    torch.backends.quantized.engine = engine_name
    try:
        packed = torch.ops.quantized.linear_prepack(qweight, linear.bias.detach())
    finally:
        torch.backends.quantized.engine = previous
    return torch.ops.quantized.linear_dynamic(x, packed, reduce_range)


@pytest.mark.parametrize("global_engine", [name for name in SUPPORTED if name != "none"])
def test_an_int8_linear_packs_for_its_platform_whatever_the_global_engine(global_engine: str) -> None:
    linear = _float_linear()
    x = torch.randn(1, 3, 64, generator=torch.Generator().manual_seed(1))  # one reply's three positions
    previous = torch.backends.quantized.engine
    torch.backends.quantized.engine = global_engine
    try:
        int8 = Int8Linear(linear, PLATFORM_ENGINE)  # torch's (ours packs nothing: tests/test_rows_kernel.py)
        assert torch.backends.quantized.engine == global_engine  # left as the caller set it
        with torch.inference_mode():
            product = int8(x)
    finally:
        torch.backends.quantized.engine = previous
    assert int8.engine == PLATFORM_ENGINE
    expected = _reference_product(linear, x, PLATFORM_ENGINE.name, PLATFORM_ENGINE.reduce_range)
    assert torch.equal(product, expected)
    exact = linear(x).detach()
    assert (product - exact).abs().max() < 0.05 * exact.abs().max()


def test_the_engine_follows_the_machine() -> None:
    on_arm = ["qnnpack", "onednn", "x86", "fbgemm"]  # torch 2.13.0 on aarch64 lists these; its default is "x86"
    assert engine_for("aarch64", on_arm) == QNNPACK
    assert engine_for("arm64", on_arm) == QNNPACK
    assert engine_for("x86_64", ["qnnpack", "none", "onednn", "x86", "fbgemm"]) == FBGEMM
    assert engine_for("AMD64", ["qnnpack", "fbgemm"]) == FBGEMM
    assert engine_for("x86_64", ["qnnpack", "none"]) == QNNPACK  # a build without FBGEMM
    assert FBGEMM.reduce_range and not QNNPACK.reduce_range


def test_a_machine_without_an_int8_engine_gets_a_clear_error() -> None:
    with pytest.raises(RuntimeError, match="no int8 engine for riscv64.*without --quantize"):
        engine_for("riscv64", ["none"])


def test_int8_products_log_no_reduce_range_warning() -> None:
    """torch warns once per process, so the products run in a fresh one: with the
    platform's engine, and with QNNPACK (the engine that warns) wherever it exists."""
    script = textwrap.dedent("""
        import torch
        from wyoming_pocket_tts.engine.quantize import QNNPACK, Int8Linear
        engines = [None] + ([QNNPACK] if "qnnpack" in torch.backends.quantized.supported_engines else [])
        for engine in engines:
            int8 = Int8Linear(torch.nn.Linear(64, 48), engine)
            for _ in range(3):
                int8(torch.randn(2, 64))
        print("products", 3 * len(engines))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, check=True)
    assert "products" in result.stdout
    assert "reduce_range" not in result.stderr


def _weights_digest(network: torch.nn.Module) -> str:
    digest = hashlib.sha256()
    for name, tensor in sorted(network.named_parameters()):
        digest.update(f"{name}:{tuple(tensor.shape)}:{tensor.dtype}".encode())
        digest.update(tensor.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def test_the_demo_weights_are_the_same_on_every_platform() -> None:
    assert _weights_digest(build_demo_model().network) == DEMO_WEIGHTS_SHA256


def test_portable_normal_is_standard_and_seeded() -> None:
    values = portable_normal((200_000,), np.random.PCG64(3))
    assert values.dtype == torch.float32
    assert torch.equal(values, portable_normal((200_000,), np.random.PCG64(3)))
    assert not torch.equal(values, portable_normal((200_000,), np.random.PCG64(4)))
    assert abs(values.mean().item()) < 0.01
    assert abs(values.std().item() - 1.0) < 0.01
    # bell-shaped like a normal: ~68% within one standard deviation, none beyond four
    assert 0.64 < (values.abs() < 1).float().mean().item() < 0.72
    assert values.abs().max().item() <= 4.0

