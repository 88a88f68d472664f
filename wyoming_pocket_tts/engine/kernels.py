"""The matrix product behind every float32 layer.

PyTorch's float32 `F.linear` calls MKL, whose products with few rows gain little from a
second thread; oneDNN (also inside PyTorch) splits them better. Measured here:

* two threads (a request's first step, which has both cores): a 30-row prompt product ran
  at 64 (MKL) vs 105 GFLOP/s (oneDNN), and a one-row product, streaming its weights from
  memory, at 14.0-14.3 vs 16.7-17.3 GB/s;
* one thread (every later step, beside the decoder; the decoder itself): MKL is the
  faster, 14.7-15.5 vs 12.8-14.0 GB/s for a one-row product, and 43-66 vs 39-60 GFLOP/s
  for the decoder transformer's products of 16-64 rows (faster in 11 of 12 shapes).

So `linear` takes MKL on one thread and oneDNN on more. oneDNN's entry point is an
internal operator, so it is checked once against `F.linear`, which stays the fallback
wherever it is missing.

Every frame runs inside `inference()` (see there).
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F
from torch import nn

logger = logging.getLogger(__name__)

LinearKernel = Callable[[torch.Tensor, torch.Tensor, "torch.Tensor | None"], torch.Tensor]


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


def _onednn_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


@functools.cache
def linear_kernel() -> LinearKernel:
    """oneDNN's float32 linear when this build has it and it agrees with F.linear."""
    try:
        generator = torch.Generator().manual_seed(0)
        x, weight, bias = (torch.randn(shape, generator=generator) for shape in ((3, 5, 64), (48, 64), (48,)))
        if torch.allclose(_onednn_linear(x, weight, bias), F.linear(x, weight, bias), atol=1e-4):
            return _onednn_linear
        logger.warning("oneDNN's linear disagrees with F.linear here: using F.linear")
    except (AttributeError, RuntimeError) as err:
        logger.info("oneDNN's linear is unavailable (%s): using F.linear", err)
    return F.linear


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """x @ weight.T + bias, float32, for x [..., in] and a contiguous weight [out, in],
    by the faster kernel for the calling thread's thread count."""
    kernel = F.linear if torch.get_num_threads() == 1 else linear_kernel()
    return kernel(x, weight, bias)


class Linear(nn.Linear):
    """nn.Linear (same parameters, same state dict) computed by `linear`."""

    @classmethod
    def around(cls, weight: torch.Tensor, bias: torch.Tensor | None) -> Linear:
        """A Linear whose parameters are these tensors (no random initialisation first)."""
        module = cls(1, 1, bias=bias is not None)  # a 1x1 placeholder: nothing big to initialise
        module.in_features, module.out_features = weight.shape[1], weight.shape[0]
        module.weight = nn.Parameter(weight, requires_grad=False)
        if bias is not None:
            module.bias = nn.Parameter(bias, requires_grad=False)
        return module

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias)
