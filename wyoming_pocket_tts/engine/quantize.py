"""int8 linears for the FlowLM transformer, in a few lines.

Weights are stored as int8 with one scale per output channel. Where the CPU has VNNI
(`rows_kernel.INT8_ROWS_KERNEL`), our kernel multiplies them, quantizing each row of the
input on its own: a batched step's rows, each as if alone, the weights read once for all.
Elsewhere the quantized engine's dynamic kernel does (FBGEMM on x86, QNNPACK on ARM),
which quantizes the whole input with one scale: a batched step then multiplies one row at
a time. On this kind of CPU both beat float32 and the int8 weight-only kernel
(`_weight_int8pack_mm`) several times over for batch-1 products.

Where torch's kernel multiplies, each `Int8Linear` packs its weights for the engine of
the machine it runs on (`engine_for`), whatever torch's global engine is, and leaves that
global alone: the packed weights carry their engine, so every later product runs on it too.

Applied to the attention (in_proj, out_proj) and feed-forward (linear1, linear2) layers
of the FlowLM transformer (~85% of the weights read per frame) and of the Mimi decoder's
transformer (a third of the decoder's time), and to the square MLP layers and stacked
adaLN projection of the sampler head (the other ~10%: float32, it took a third of an
int8 step). The head's small input and output layers, the embeddings, the convolutions
and the encoder stay float32: at their sizes the int8 kernel's per-call work outweighs
what it saves.
"""

from __future__ import annotations

import platform
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn

from .flow_lm import SamplerHead
from .kernels import independent_rows
from .layers import Transformer
from .network import PocketNetwork
from .rows_kernel import INT8_ROWS_KERNEL


# The operator itself, looked up once: resolving `torch.ops.quantized.linear_dynamic` and
# its overload on every call costs ~10 us, against ~30 us for a whole small product. Its
# compiled entry point (`_op`, where present) also skips the Python-side check for traced
# stand-ins of the packed weights, which never occur here: 5-10 us more per call.
_OVERLOAD = torch.ops.quantized.linear_dynamic.default
_LINEAR_DYNAMIC = getattr(_OVERLOAD, "_op", _OVERLOAD)


@dataclass(frozen=True)
class QuantizedEngine:
    """A quantized engine and how its dynamic kernel must quantize the activations."""

    name: str
    # FBGEMM's x86 kernels add pairs of uint8 x int8 products in int16 with saturation
    # (vpmaddubsw): 2 x 255 x 127 overflows, 2 x 127 x 127 does not, so activations keep 7
    # bits (torch's own default qconfig for fbgemm/x86 does the same). QNNPACK widens to
    # int32 before adding, takes all 8 bits, and warns on every call asked for 7.
    reduce_range: bool


FBGEMM = QuantizedEngine("fbgemm", reduce_range=True)
QNNPACK = QuantizedEngine("qnnpack", reduce_range=False)
# Our kernel (`rows_kernel.INT8_ROWS_KERNEL`): VNNI adds its byte products in int32, so
# activations take all 8 bits there too.
OURS = QuantizedEngine("ours", reduce_range=False)
# Preference per machine, best first; the first one this torch build supports is used.
_PREFERENCE = {
    "x86_64": (FBGEMM, QNNPACK), "amd64": (FBGEMM, QNNPACK), "i686": (FBGEMM, QNNPACK),
    "aarch64": (QNNPACK,), "arm64": (QNNPACK,), "armv7l": (QNNPACK,),
}  # fmt: skip


def engine_for(machine: str, supported: Sequence[str]) -> QuantizedEngine:
    """The quantized engine for `machine` (`platform.machine()`) among the `supported` ones
    (`torch.backends.quantized.supported_engines`). torch's default engine is not it: on
    aarch64 that default is "x86", whose packing raises "unknown architecure" there."""
    usable = engines_for(machine, supported)
    if not usable:
        raise RuntimeError(f"no int8 engine for {machine} in this torch build (it has {list(supported)}); "
                           "run without --quantize")  # fmt: skip
    return usable[0]


def engines_for(machine: str, supported: Sequence[str]) -> tuple[QuantizedEngine, ...]:
    """Every quantized engine that works on `machine` in this build, the preferred first
    (x86 builds carry FBGEMM and QNNPACK; ARM ones list FBGEMM but cannot pack for it)."""
    return tuple(engine for engine in _PREFERENCE.get(machine.lower(), (FBGEMM, QNNPACK)) if engine.name in supported)


def machine_engines() -> tuple[QuantizedEngine, ...]:
    """Every int8 engine this process can use, the preferred first: ours where its kernel
    is used (faster for one row and for a batch, see the module's docstring), then
    torch's for this machine (`engines_for`)."""
    ours = (OURS,) if INT8_ROWS_KERNEL is not None else ()
    return ours + engines_for(platform.machine(), torch.backends.quantized.supported_engines)


def machine_engine() -> QuantizedEngine:
    """The int8 engine this process uses unless told otherwise."""
    if INT8_ROWS_KERNEL is not None:
        return OURS
    return engine_for(platform.machine(), torch.backends.quantized.supported_engines)


@contextmanager
def _packing_with(engine: QuantizedEngine) -> Iterator[None]:
    """Select `engine` while weights are packed, then restore torch's global choice."""
    previous = torch.backends.quantized.engine
    torch.backends.quantized.engine = engine.name
    try:
        yield
    finally:
        torch.backends.quantized.engine = previous


class Int8Linear(nn.Module):
    """An int8 linear multiplied by `engine` (None: `machine_engine()`): ours, or torch's
    dynamic kernel packed for that engine."""

    def __init__(self, linear: nn.Linear, engine: QuantizedEngine | None = None) -> None:
        super().__init__()
        self.engine = engine or machine_engine()
        weight = linear.weight.detach().float()
        scales = (weight.abs().amax(dim=1) / 127.0).clamp(min=1e-12).double()
        with warnings.catch_warnings():
            # Quantized tensor creation is deprecated in favour of torchao, which is not on
            # every platform we ship to; the packed kernel itself is current.
            warnings.simplefilter("ignore", UserWarning)
            qweight = torch.quantize_per_channel(weight, scales, torch.zeros_like(scales, dtype=torch.long), 0, torch.qint8)
        bias = None if linear.bias is None else linear.bias.detach().float().contiguous()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.rows_product: Callable[[torch.Tensor], torch.Tensor] | None = None
        if self.engine == OURS:
            if INT8_ROWS_KERNEL is None:
                raise RuntimeError("our int8 kernel is not used on this machine (no VNNI, or not built)")
            # Only our weights are kept, not torch's packed ones beside them (twice the
            # memory): ours multiplies a prompt's positions too.
            values = qweight.int_repr().contiguous()
            self.rows_product = INT8_ROWS_KERNEL(values, scales.float(), values.sum(dim=1, dtype=torch.int32), bias)
        else:
            with _packing_with(self.engine):
                self.packed = torch.ops.quantized.linear_prepack(qweight, bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.rows_product is not None:
            return self.rows_product(x)
        rows = independent_rows(x)
        if rows > 1:
            # The dynamic kernel quantizes its whole input with one scale: rows multiplied
            # together would change each other's rounding. One product per row keeps each
            # reply's audio what it is alone (the packed weights stay in the cache between them).
            return torch.cat([_LINEAR_DYNAMIC(x[row : row + 1], self.packed, self.engine.reduce_range) for row in range(rows)])
        return _LINEAR_DYNAMIC(x, self.packed, self.engine.reduce_range)


@dataclass(frozen=True)
class Int8Slot:
    """Where one float32 linear that int8 replaces sits: `owner`'s attribute `name`
    (for an nn.Sequential, its index as a string)."""

    owner: nn.Module
    name: str

    def get(self) -> nn.Module:
        return getattr(self.owner, self.name)

    def put(self, module: nn.Module) -> None:
        setattr(self.owner, self.name, module)


def _transformer_slots(transformer: Transformer) -> list[Int8Slot]:
    slots = []
    for layer in transformer.layers:
        slots += [Int8Slot(layer.self_attn, "in_proj"), Int8Slot(layer.self_attn, "out_proj"),
                  Int8Slot(layer, "linear1"), Int8Slot(layer, "linear2")]  # fmt: skip
    return slots


def _sampler_head_slots(head: SamplerHead) -> list[Int8Slot]:
    """The sampler head's MLP linears and its stacked adaLN projection."""
    if head.modulation is None:
        head.fuse_modulations()
    slots = [Int8Slot(head, "modulation")]
    for block in head.res_blocks:
        slots += [Int8Slot(block.mlp, "0"), Int8Slot(block.mlp, "2")]
    return slots


def int8_slots(network: PocketNetwork) -> list[Int8Slot]:
    """Every linear that int8 runs in int8 (see the module's docstring for which and why)."""
    return (_transformer_slots(network.flow_lm.transformer)
            + _transformer_slots(network.mimi.decoder_transformer.transformer)
            + _sampler_head_slots(network.flow_lm.flow_net))  # fmt: skip


def quantize_network(network: PocketNetwork, engine: QuantizedEngine | None = None) -> int:
    """Swap the network's float32 linears for int8 ones in place, multiplied by `engine`
    (None: the machine's, see `machine_engine`); returns how many."""
    slots = int8_slots(network)
    for slot in slots:
        slot.put(Int8Linear(slot.get(), engine))
    return len(slots)
