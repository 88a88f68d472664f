"""Defaults that depend on the machine the server runs on, decided without importing torch
(the settings and the server import no torch; see README, "Which model for which machine").

    >>> default_quantize("aarch64"), default_quantize("x86_64")
    (True, False)
"""

from __future__ import annotations

import platform

# ARM boards (Raspberry Pi 4/5) are bound by memory bandwidth: float32 English reads
# ~380 MB of weights per 80 ms frame, 4.8 GB/s just to keep up, nearly all a Pi 4 streams
# (~5.5 GB/s) and most of a Pi 5's; int8 reads ~110 MB (README, "Which model for which
# machine": Pi 5 ~2.2x real time in int8 against ~1.0x in float32). x86_64 PCs run float32
# faster than real time (2.7x on 2 cores of the development machine) with the better
# fidelity, so int8 stays an opt-in there.
_INT8_BY_DEFAULT = frozenset({"aarch64", "arm64", "armv7l", "armv8l"})


def default_quantize(machine: str | None = None) -> bool:
    """Whether `--quantize auto` means int8 on `machine` (`platform.machine()` by default)."""
    return (platform.machine() if machine is None else machine).lower() in _INT8_BY_DEFAULT
