"""The execution settings of every frame: inference mode without subclass overrides
(`inference`), and PyTorch's own float32 linear (`Linear`).

Every float32 product is `F.linear` (MKL), on any thread count. oneDNN's linear (an
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

import torch
import torch.nn.functional as F
from torch import nn

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


def independent_rows(x: torch.Tensor) -> int:
    """How many replies' rows `x` holds, each to be multiplied as if it were alone: the
    batch of a batched step ([B, features] or [B, 1, features], B > 1); 1 for anything
    else (one reply's positions, [1, t, features])."""
    if x.dim() == 2 or (x.dim() == 3 and x.shape[1] == 1):
        return x.shape[0]
    return 1


def rows_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """F.linear of B independent rows, each row's result bit for bit what F.linear gives
    that row alone, in one call.

    A batched step must not change a reply's audio (a seeded reply sounds the same whatever
    else is being spoken), but a matrix product's rounding depends on how many rows it
    multiplies: F.linear of B rows differs from one row's in the last bits (MKL takes
    another kernel), and an autoregressive model carries the difference on. A batched
    product over the weight expanded (stride 0, nothing copied) runs one single-row product
    per row instead, each the same kernel as a row alone, back to back in one call, so the
    weights come from memory once and from the cache for the other rows.
    """
    rows = x.shape[0]
    flat = x.reshape(rows, 1, x.shape[-1])
    weight_t = weight.t().unsqueeze(0).expand(rows, -1, -1)
    if bias is None:
        out = torch.bmm(flat, weight_t)
    else:
        out = torch.baddbmm(bias.view(1, 1, -1).expand(rows, 1, -1), flat, weight_t)
    return out.view(*x.shape[:-1], weight.shape[0])


class Linear(nn.Linear):
    """nn.Linear (same parameters, same state dict) that can be made around given tensors,
    and multiplies the rows of a batched step each as if it were alone (`rows_linear`)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if independent_rows(x) > 1:
            return rows_linear(x, self.weight, self.bias)
        return F.linear(x, self.weight, self.bias)

    @classmethod
    def around(cls, weight: torch.Tensor, bias: torch.Tensor | None) -> Linear:
        """A Linear whose parameters are these tensors (no random initialisation first)."""
        module = cls(1, 1, bias=bias is not None)  # a 1x1 placeholder: nothing big to initialise
        module.in_features, module.out_features = weight.shape[1], weight.shape[0]
        module.weight = nn.Parameter(weight, requires_grad=False)
        if bias is not None:
            module.bias = nn.Parameter(bias, requires_grad=False)
        return module
