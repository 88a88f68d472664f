"""Memory for the weights a frame reads, in huge pages (2 MiB) where the system allows it.

Every FlowLM step reads all its float32 weights (340 MB for the default English model)
from memory, one row of 4 KB after another: with 4 KiB pages that is a page, and so a
TLB entry, per weight row, far more than the TLB holds, and each miss is a page walk in
the middle of a memory-bound product. With 2 MiB pages a step touches 170 pages instead
of 83,000. Linux gives anonymous memory transparent huge pages where asked (madvise, the
default setting of many distributions). Measured on this 2-core x86 VM: a float32 reply
alone 1.04x faster in one process (the same weights in huge pages and in plain ones,
alternating: 2.60x against 2.49x real time), 1.06x in the engine bench; int8, whose
remaining float32 weights are 24 MB, as fast as before, ~9 MB more resident
(docs/batching.md).

Written here rather than through the allocator: glibc gives its large blocks 4 KiB
alignment, so no 2 MiB page fits their start, and its own huge-page tunable
(glibc.malloc.hugetlb) acts on every allocation of the process and only when set before
it starts. Each tensor gets its own mapping, so freeing it (a float32 weight that int8
replaced) gives its memory back to the system at once.
"""

from __future__ import annotations

import ctypes
import mmap
from pathlib import Path

import torch


def _huge_page_size(default: int = 2 << 20) -> int:
    """The size of a transparent huge page as Linux says it: 2 MiB on x86 and on ARM with
    4 KiB pages, 32 MiB on a Raspberry Pi 5's 16 KiB-page kernel; `default` elsewhere."""
    try:
        return int(Path("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size").read_text())
    except (OSError, ValueError):
        return default


# Read once, at import, like the L2 cache size in kernels: a property of the system.
HUGE_PAGE = _huge_page_size()
# madvise's advice, where this Python and system have it (Linux); elsewhere plain memory.
_ADVICE = getattr(mmap, "MADV_HUGEPAGE", None)


def weight_tensor(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """An uninitialised tensor like `torch.empty(shape, dtype=dtype)`, starting on a huge
    page's boundary in a mapping of its own advised for huge pages; `torch.empty` itself for
    tensors smaller than a huge page, or where the system cannot (no madvise, or a
    mapping that cannot be shrunk in place)."""
    size = torch.Size(shape).numel() * dtype.itemsize
    if _ADVICE is None or size < HUGE_PAGE:
        return torch.empty(shape, dtype=dtype)
    try:
        memory = mmap.mmap(-1, size + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        probe = ctypes.c_char.from_buffer(memory)
        start = -ctypes.addressof(probe) % HUGE_PAGE
        del probe  # a buffer exported from the mapping would forbid the resize
        # The part after the tensor is unmapped: a huge page partly past its end would
        # make up to 2 MiB resident that nothing uses. The part before it is never touched.
        memory.resize(start + size)
        memory.madvise(_ADVICE)
    except (OSError, ValueError, SystemError):
        return torch.empty(shape, dtype=dtype)
    # The tensor keeps the mapping alive (torch.frombuffer holds the buffer); freeing the
    # tensor unmaps it.
    return torch.frombuffer(memory, dtype=torch.uint8)[start : start + size].view(dtype).view(shape)
