"""The execution settings of every frame: inference mode without subclass overrides
(`inference`), and the float32 linear (`Linear`).

A step's float32 products (one row per reply) go through our kernel where it is used
(`rows_kernel`), and otherwise through MKL one row at a time (`rows_linear`); every
other float32 product (a prompt's positions) is `F.linear` (MKL), on any thread count,
no other torch kernel. oneDNN's linear (an
internal operator, `torch.ops.mkldnn._linear_pointwise`) splits few-row products better
over two threads, but builds and caches a primitive per input shape: each new prompt
length was a new set of cache entries, and a server's resident memory rose without bound
with the variety of its texts (issues 18, 21: 430 -> 969 MB over 2,000 varied requests
of the tiny model; with `F.linear`, flat). Bounding it by padding prompts to a few row
counts still grew (308 -> 335 MB over 400 requests, tiny model, rows padded to multiples
of 8) and paid for the padding; oneDNN on one-row products alone (a fixed shape) stayed
flat but saves about 1 ms of a first frame (the few one-row products of the first step,
16.7-17.3 vs 14.0-14.3 GB/s on two threads). So no kernel is chosen at all: none depends
on the calling thread's settings, and no kernel keeps state per shape.

The price is the first step's prompt products on two threads: a first FlowLM step of the
English architecture with a 30-token prompt took 1.78x (fastest of 25) / 1.17x (median)
the oneDNN time, measured side by side on a heavily loaded 2-core VM; later steps and
the decoder run on one thread, where F.linear was already the kernel.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from .rows_kernel import ROWS_KERNEL

# Present in every PyTorch we support; looked up defensively all the same, since it lives in torch._C.
_SKIP_SUBCLASS_OVERRIDES: Callable[[], contextlib.AbstractContextManager[None]] = getattr(
    torch._C, "DisableTorchFunctionSubclass", contextlib.nullcontext
)


@contextlib.contextmanager
def inference() -> Iterator[None]:
    """Inference mode, with tensor subclasses' `__torch_function__` overrides skipped.

    Before each operator call, PyTorch asks every argument that is not a plain tensor
    whether it overrides `__torch_function__`. The int8 products' packed weights (a
    TorchScript object) answer by raising and catching an AttributeError inside
    PyTorch, C++ exception and message included: 20-30 us of a 40-55 us small int8
    product, measured here, 37 times a FlowLM step. Parameters are asked too. None of
    our tensors overrides it (nn.Parameter's override is the disabled one), so skipping
    the question changes no result. The setting is per thread, like inference mode.
    """
    with torch.inference_mode(), _SKIP_SUBCLASS_OVERRIDES():
        yield


_SIZE_UNITS = {"K": 1 << 10, "M": 1 << 20}


def _l2_cache_bytes(default: int = 1 << 20) -> int:
    """The first core's L2 cache as Linux describes it (sysfs, sizes such as "1024K");
    `default` where it does not (other systems, some VMs)."""
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            if (index / "level").read_text().strip() != "2" or (index / "type").read_text().strip() == "Instruction":
                continue
            size = (index / "size").read_text().strip().upper()
            return int(size[:-1]) * _SIZE_UNITS[size[-1]] if size[-1] in _SIZE_UNITS else int(size)
        except (OSError, ValueError, IndexError):
            continue
    return default


# The weight slice a batched float32 product multiplies every row by before the next
# (`rows_linear`): three quarters of the L2 cache, leaving room for the rows and outputs;
# at least 256 KB, where the calls would cost more than the cache saves (measured here:
# 128 KB slices were slower than 256 KB-1 MB ones with a 1 MB L2), at most 2 MB.
SLICE_BYTES = min(max(_l2_cache_bytes() * 3 // 4, 256 << 10), 2 << 20)
# Slices start at multiples of this many outputs: a multiple of every kernel's block (see
# `_slices`), on x86 and ARM.
SLICE_ALIGN = 64


def is_step(x: torch.Tensor) -> bool:
    """Whether `x` is a step's rows, one per reply ([B, features] or [B, 1, features], B
    >= 1), rather than one reply's positions ([1, t, features])."""
    return x.dim() == 2 or (x.dim() == 3 and x.shape[1] == 1)


def independent_rows(x: torch.Tensor) -> int:
    """How many replies' rows `x` holds, each to be multiplied as if it were alone: the
    batch of a step (`is_step`); 1 for one reply's positions."""
    return x.shape[0] if is_step(x) else 1


def rows_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """F.linear of B independent rows, each row's result bit for bit what F.linear gives
    that row alone.

    A batched step must not change a reply's audio (a seeded reply sounds the same whatever
    else is being spoken), but a matrix product's rounding depends on how many rows it
    multiplies: F.linear of B rows differs from one row's in the last bits (MKL takes
    another kernel), and an autoregressive model carries the difference on. So every row
    is multiplied by a single-row product, the same kernel as a row alone: a batched product
    over the weight expanded (stride 0, nothing copied) runs one per row, back to back.

    And it does so one slice of the weight's rows (outputs) at a time, each slice small
    enough to stay in the core's L2 cache (`SLICE_BYTES`): the first row reads the slice
    from memory, the others from the cache, so the weights come from memory once per step
    whatever the number of rows (4 rows of the default model's FlowLM: 1.5-1.7x faster than
    over the whole weight, docs/batching.md). An output is one dot product over all the
    inputs, computed the same way in a slice as in the whole product, so slicing the
    outputs changes no bit (tests/test_engine_batch.py checks it, here and on ARM).
    """
    rows, outputs = x.shape[0], weight.shape[0]
    flat = x.reshape(rows, 1, x.shape[-1])
    transposed = weight.t()
    parts = []
    for start, end in _slices(outputs, weight.shape[1] * weight.element_size()):
        slice_t = transposed[:, start:end].expand(rows, -1, -1)
        if bias is None:
            parts.append(torch.bmm(flat, slice_t))
        else:
            parts.append(torch.baddbmm(bias[start:end].expand(rows, 1, -1), flat, slice_t))
    out = parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)
    return out.view(*x.shape[:-1], outputs)


def _slices(outputs: int, row_bytes: int) -> list[tuple[int, int]]:
    """(start, end) of each slice of a weight's `outputs` rows for `rows_linear`.

    A matrix-vector kernel computes its outputs in blocks (4 with MKL here), and the outputs
    left over after the last block another way: a slice of 5 outputs rounds its fifth
    differently than the whole product does. So every slice starts at a multiple of
    SLICE_ALIGN and holds at least that many outputs; the last one takes the leftover,
    like the whole product.
    """
    width = max(SLICE_ALIGN, SLICE_BYTES // row_bytes // SLICE_ALIGN * SLICE_ALIGN)
    starts = list(range(0, outputs, width))
    if len(starts) > 1 and outputs - starts[-1] < SLICE_ALIGN:
        starts.pop()  # too short a last slice: the one before it takes its outputs too
    return list(zip(starts, starts[1:] + [outputs]))


class Linear(nn.Linear):
    """nn.Linear (same parameters, same state dict) that can be made around given tensors,
    and multiplies the rows of a step each as if it were alone.

    With our kernel (`rows_kernel`), every step goes through it, one reply's as well as a
    batch's: that is what gives a row the same bits in both. Without it, one row is
    F.linear and several are `rows_linear`, which gives each row F.linear's bits.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight, bias = self.weight, self.bias
        if ROWS_KERNEL is not None and is_step(x):
            out = ROWS_KERNEL(x, weight, bias)
            if out is not None:
                return out
        if independent_rows(x) > 1:
            return rows_linear(x, weight, bias)
        return F.linear(x, weight, bias)

    @classmethod
    def around(cls, weight: torch.Tensor, bias: torch.Tensor | None) -> Linear:
        """A Linear whose parameters are these tensors (no random initialisation first)."""
        module = cls(1, 1, bias=bias is not None)  # a 1x1 placeholder: nothing big to initialise
        module.in_features, module.out_features = weight.shape[1], weight.shape[0]
        module.weight = nn.Parameter(weight, requires_grad=False)
        if bias is not None:
            module.bias = nn.Parameter(bias, requires_grad=False)
        return module
