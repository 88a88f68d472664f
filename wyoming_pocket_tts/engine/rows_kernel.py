"""The float32 kernel of batched steps (native/rows_linear.c), where it is built and fast.

A batched FlowLM step multiplies each reply's row by every weight, and each row's result
must be bit for bit what it is alone (a reply sounds the same whatever else is spoken).
torch's kernels give that only one row at a time (`kernels.rows_linear`), paying most of a
row's time again for every row. This one computes every output of every row the same way
whatever the number of rows, and reads each block of weights from memory once for all of
them: on one core of a 2-core x86 VM, the 24 transformer products of the default model's
step about as fast as MKL for one row (a reply alone 2-4% slower), 1.7x faster than
`rows_linear` for 4 rows and 1.8x for 8 (docs/batching.md).

It is a plain C library (no Python API) built by `pip install` where a C compiler is
found (setup.py) and loaded with ctypes, which releases the GIL for the call like torch
does. Used only where its build is the vectorized one (x86-64 with AVX2 and FMA, from
2013 on): its baseline build was slower than MKL for one row, and on ARM it has not been
measured on a real Pi. Elsewhere, or not built, `ROWS_KERNEL` is None and steps use torch.
"""

from __future__ import annotations

import ctypes
import importlib.util
import logging
from collections.abc import Callable

import torch

logger = logging.getLogger(__name__)

# The module name setup.py builds the library under.
LIBRARY_MODULE = "wyoming_pocket_tts_rows"

RowsLinear = Callable[[torch.Tensor, torch.Tensor, torch.Tensor | None], "torch.Tensor | None"]


def load(module: str = LIBRARY_MODULE) -> RowsLinear | None:
    """The kernel as `f(x [rows, in] or [rows, 1, in], weight [out, in], bias [out] or None)
    -> [rows, (1,) out]`, or None where it is not installed or not the vectorized build
    (said in the log). `f` returns None for tensors that are not float32 or a weight or
    bias that is not contiguous: the caller multiplies those another way, alone and batched
    alike (nothing that differs between the two)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin:
        logger.debug("%s not installed (no C compiler at install?): batched steps use torch's kernels", module)
        return None
    try:
        library = ctypes.CDLL(spec.origin)
    except OSError as err:
        logger.warning("cannot load %s (%s): batched steps use torch's kernels", spec.origin, err)
        return None
    if not library.rows_linear_f32_vectorized():
        logger.debug("%s: no vectorized build for this CPU: batched steps use torch's kernels", module)
        return None
    function = library.rows_linear_f32
    size = ctypes.c_ssize_t
    function.argtypes = [ctypes.c_void_p, size, size, ctypes.c_void_p, size, ctypes.c_void_p, ctypes.c_void_p]
    function.restype = None

    def multiply(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor | None:
        # A few microseconds a call count here (46 calls a step): plain checks, no loops.
        if not (x.dtype == weight.dtype == torch.float32 and weight.is_contiguous()
                and (bias is None or (bias.dtype == torch.float32 and bias.is_contiguous()))):  # fmt: skip
            return None
        x = x.contiguous()  # a step's rows are already: no copy
        inputs, outputs = x.shape[-1], weight.shape[0]
        if weight.shape[1] != inputs or (bias is not None and bias.shape[0] != outputs):
            raise ValueError(f"shapes do not match: x {tuple(x.shape)}, weight {tuple(weight.shape)}")  # raw memory
        out = torch.empty((*x.shape[:-1], outputs), dtype=torch.float32)
        function(x.data_ptr(), x.numel() // inputs, inputs, weight.data_ptr(), outputs,
                 None if bias is None else bias.data_ptr(), out.data_ptr())  # fmt: skip
        return out

    return multiply


# Loaded once, at import, like the cache size in kernels: a property of the install and
# the CPU, the same for every caller.
ROWS_KERNEL = load()
