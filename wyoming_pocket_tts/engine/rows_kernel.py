"""Our kernels of batched steps (native/), float32 and int8, where they are built and fast.

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

The int8 kernel (native/rows_int8.c) does the same for int8 weights: each row quantized on
its own and multiplied by exact integer dot products, so its result cannot depend on the
other rows. torch's dynamic int8 kernel quantizes its whole input with one scale, so a
batch had to be multiplied one row at a time (on one core here, the 24 transformer
products of a step: 8 rows 11 ms against 34 ms so; one row 6.1-6.4 against 7.5 ms).
Used where the CPU has VNNI (AVX-512 or AVX form; Intel from Ice Lake and Alder Lake, AMD
from Zen 4), for every int8 product there: `INT8_ROWS_KERNEL` is None elsewhere.
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
Int8Product = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, "torch.Tensor | None"], Callable[[torch.Tensor], torch.Tensor]]


def _open(module: str) -> ctypes.CDLL | None:
    """The installed library, or None where it is not (said in the log)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin:
        logger.debug("%s not installed (no C compiler at install?): batched steps use torch's kernels", module)
        return None
    try:
        return ctypes.CDLL(spec.origin)  # a CDLL's calls release the GIL, like torch's
    except OSError as err:
        logger.warning("cannot load %s (%s): batched steps use torch's kernels", spec.origin, err)
        return None


def load(module: str = LIBRARY_MODULE) -> RowsLinear | None:
    """The float32 kernel as `f(x [rows, in] or [rows, 1, in], weight [out, in], bias [out]
    or None) -> [rows, (1,) out]`, or None where it is not installed or not the vectorized
    build (said in the log). `f` returns None for tensors that are not float32 or a weight
    or bias that is not contiguous: the caller multiplies those another way, alone and
    batched alike (nothing that differs between the two)."""
    library = _open(module)
    if library is None:
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


# The int8 kernel's instruction sets (its `instructions` argument): the best this CPU has,
# or one of them (they give the same bits: the tests check it).
INT8_INSTRUCTIONS = {"best": 0, "avx-vnni": 1, "avx512-vnni": 2}


def load_int8(module: str = LIBRARY_MODULE, instructions: str = "best") -> Int8Product | None:
    """The int8 kernel (native/rows_int8.c) as `bind(weight [out, in] int8, scales [out]
    float32, sums [out] int32, bias [out] float32 or None) -> multiply`, `sums` being the
    weight rows' sums, and `multiply(x [..., in] float32) -> [..., out]` quantizing every
    row of `x` on its own. None where it is not installed or the CPU has no VNNI (or not
    those `instructions`, see INT8_INSTRUCTIONS): the int8 linears then use torch's engine."""
    library = _open(module)
    if library is None:
        return None
    code = INT8_INSTRUCTIONS[instructions]
    if not hasattr(library, "rows_int8_supported"):  # built from an older checkout
        logger.warning("%s has no int8 kernel (reinstall: pip install .): int8 products use torch's engine", module)
        return None
    library.rows_int8_supported.argtypes = [ctypes.c_int]
    if not library.rows_int8_supported(code):
        logger.debug("%s: no VNNI (%s) on this CPU: int8 products use torch's engine", module, instructions)
        return None
    function = library.rows_linear_int8
    size, pointer = ctypes.c_ssize_t, ctypes.c_void_p
    function.argtypes = [ctypes.c_int, pointer, size, size, pointer, pointer, pointer, size, pointer, pointer]
    function.restype = ctypes.c_int

    def bind(weight: torch.Tensor, scales: torch.Tensor, sums: torch.Tensor,
             bias: torch.Tensor | None) -> Callable[[torch.Tensor], torch.Tensor]:  # fmt: skip
        # The C function reads raw memory: the weights are checked here, once, and each
        # input in `multiply` (a few microseconds a call count: ~40 calls a step).
        outputs, inputs = weight.shape
        parts = (weight, scales, sums) if bias is None else (weight, scales, sums, bias)
        if (weight.dtype, scales.dtype, sums.dtype) != (torch.int8, torch.float32, torch.int32) or not (
            all(part.is_contiguous() for part in parts) and scales.shape == sums.shape == (outputs,)
            and (bias is None or (bias.dtype == torch.float32 and bias.shape == (outputs,)))
        ):  # fmt: skip
            raise ValueError("an int8 product needs contiguous int8 weights and, per output, float32 scales, int32 sums and float32 bias")  # fmt: skip

        def multiply(x: torch.Tensor) -> torch.Tensor:
            if x.dtype != torch.float32 or x.shape[-1] != inputs:
                raise ValueError(f"x {tuple(x.shape)} {x.dtype} does not fit an int8 weight {tuple(weight.shape)}")
            x = x.contiguous()  # a step's rows and a prompt's positions already are: no copy
            out = torch.empty((*x.shape[:-1], outputs), dtype=torch.float32)
            rows = x.numel() // inputs
            if function(code, x.data_ptr(), rows, inputs, weight.data_ptr(), scales.data_ptr(), sums.data_ptr(), outputs,
                        None if bias is None else bias.data_ptr(), out.data_ptr()) != 0:  # fmt: skip
                raise MemoryError(f"the int8 kernel could not multiply {rows} rows of {inputs} inputs (no memory, or over 65536 inputs)")
            return out

        return multiply

    return bind


# Loaded once, at import, like the cache size in kernels: a property of the install and
# the CPU, the same for every caller.
ROWS_KERNEL = load()
INT8_ROWS_KERNEL = load_int8()
