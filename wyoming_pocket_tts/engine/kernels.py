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


class Linear(nn.Linear):
    """nn.Linear (same parameters, same state dict) that can be made around given tensors."""

    @classmethod
    def around(cls, weight: torch.Tensor, bias: torch.Tensor | None) -> Linear:
        """A Linear whose parameters are these tensors (no random initialisation first)."""
        module = cls(1, 1, bias=bias is not None)  # a 1x1 placeholder: nothing big to initialise
        module.in_features, module.out_features = weight.shape[1], weight.shape[0]
        module.weight = nn.Parameter(weight, requires_grad=False)
        if bias is not None:
            module.bias = nn.Parameter(bias, requires_grad=False)
        return module
