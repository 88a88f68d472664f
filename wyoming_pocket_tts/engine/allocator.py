"""Large buffers go back to the system when freed (glibc's malloc), so a server's resident
memory does not ratchet up with the variety of its requests.

glibc serves a request above its mmap threshold (128 KiB at start) with a fresh mapping,
returned to the system on free, but raises the threshold to the size of every mapped
block freed (up to 32 MiB). After the first few requests, the megabyte buffers of every
frame (KV caches sized per chunk, the decoder's activations) therefore come from the
heap arenas, where blocks of ever new sizes fragment it and the freed memory stays
resident. Fixing the threshold (which also stops it moving) keeps them mapped.

Measured with `python bench/soak.py --model english` (full-size English architecture,
random weights, every float32 product already by F.linear): resident memory after 50,
100 and 200 requests 946, 1008 and 1020 MB with glibc's moving threshold; 763 MB after
50 and 762 MB after 150 with MALLOC_MMAP_THRESHOLD_=262144, and 776 / 778 / 778 MB after
50 / 100 / 300 with this call. The tiny demo model, whose buffers are small, was flat either way.
Set in code, at model load, rather than by MALLOC_MMAP_THRESHOLD_ in the
environment, which must be in place before the process starts.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

logger = logging.getLogger(__name__)

_M_MMAP_THRESHOLD = -3  # mallopt's parameter number (glibc's malloc.h)
MMAP_THRESHOLD_BYTES = 256 * 1024


def return_large_buffers_to_the_system() -> bool:
    """Fix glibc's mmap threshold at MMAP_THRESHOLD_BYTES; False where the C library
    is not glibc (then nothing changes). Process-wide and idempotent."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        logger.debug("no mallopt in the C library: its allocator keeps its defaults")
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))
