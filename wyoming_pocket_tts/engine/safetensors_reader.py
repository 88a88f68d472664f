"""Reading a safetensors weights file into tensors that own their memory.

Our own reader rather than the `safetensors` library, for memory. Measured here on the
default English architecture's weights (381 MB of tensors, the encoder's left out, every
tensor then read once, safetensors 0.8.0), resident memory added by the read / peak of
the process:

* this reader: 371 MB / 593 MB;
* the library's `safe_open(...).get_tensor` copied into owned tensors: 737 MB / 959 MB
  (the file mapping's pages stay resident beside the copies until the file is closed);
* the library's tensors as they come, views of its file mapping: 372 MB / 594 MB, but
  then every weight a frame reads lives in file pages, which the kernel may drop under
  memory pressure and read back from disk in the middle of a request, and a file
  replaced or truncated under the server (a hub cache update) is a SIGBUS.

(Each figure from a fresh process: VmRSS before and after reading, and VmHWM.) The
format is simple (an 8-byte header length, a JSON header of dtype, shape and byte
offsets, then the raw data), so the reader stays short.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import torch

from .huge_pages import weight_tensor


_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
    "BOOL": torch.bool,
}  # fmt: skip


def read_safetensors(path: Path, select: Callable[[str], bool] = lambda key: True,
                     mapped: frozenset[str] = frozenset()) -> dict[str, torch.Tensor]:
    """Read the selected tensors of a safetensors file with plain reads into freshly
    allocated tensors (in huge pages where they are big enough, see `huge_pages`), except those named in `mapped`, which are copy-on-write views of a
    memory map of the file (a lookup table: only the rows looked up are ever read)."""
    tensors = {}
    with open(path, "rb") as file:
        header, data_start = _read_header(file)
        for name, entry in header.items():
            if not select(name):
                continue
            start, end = entry["data_offsets"]
            dtype, shape = _DTYPES[entry["dtype"]], entry["shape"]
            nbytes = math.prod(shape) * dtype.itemsize
            if nbytes != end - start:
                raise ValueError(f"{name}: {end - start} bytes for shape {shape}")
            if name in mapped and nbytes:
                raw = np.memmap(file, dtype=np.uint8, mode="c", offset=data_start + start, shape=(nbytes,))
                tensors[name] = torch.from_numpy(raw).view(dtype).view(shape)
                continue
            tensor = weight_tensor(tuple(shape), dtype)
            file.seek(data_start + start)
            if nbytes and file.readinto(memoryview(tensor.view(-1).view(torch.uint8).numpy())) != nbytes:
                raise ValueError(f"{name}: file truncated")
            tensors[name] = tensor
    return tensors


def safetensors_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """The shape of every tensor in a safetensors file, from its header alone."""
    with open(path, "rb") as file:
        header, _ = _read_header(file)
    return {name: tuple(entry["shape"]) for name, entry in header.items()}


def _read_header(file: BinaryIO) -> tuple[dict[str, Any], int]:
    """The header's tensor entries (metadata left out) and where the data starts."""
    header_size = int.from_bytes(file.read(8), "little")
    if not 0 < header_size < 100_000_000:
        raise ValueError("not a safetensors file")
    header = json.loads(file.read(header_size))
    header.pop("__metadata__", None)
    return header, 8 + header_size
