"""Freed memory goes back to the system once the engine is idle (glibc's malloc), so a
server's resident memory does not ratchet up with the variety of its requests.

Every frame allocates buffers of a megabyte and more (KV caches sized per chunk, the
decoder's activations). glibc serves them from its heap arenas once its mmap threshold
has risen past their size (it rises to the size of every mapped block freed, up to 32
MiB), and blocks of ever new sizes fragment the heap: the freed memory stays resident
(946 -> 1020 MB over 200 varied requests, issue 21).

Fixing the threshold low (256 KiB) kept memory flat but made every such buffer a fresh
mapping, faulted in and zeroed on every frame: int8 ran at 8x real time instead of 14x
(issue 25). Instead the heap keeps its buffers while replies run, and `malloc_trim` hands
its free pages back once no reply is being spoken (the batcher calls it when its last row
ends): the cost of one trim per burst of replies, not per allocation.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable


def _find_malloc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim, or None where the C library has none (musl, macOS)."""
    try:
        return ctypes.CDLL(ctypes.util.find_library("c")).malloc_trim
    except (OSError, AttributeError, TypeError):
        return None


_MALLOC_TRIM = _find_malloc_trim()


def give_back_free_memory() -> bool:
    """Return the heap's free pages to the system; False where that cannot be done."""
    return bool(_MALLOC_TRIM is not None and _MALLOC_TRIM(0))
