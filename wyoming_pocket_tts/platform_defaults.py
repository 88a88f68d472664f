"""Defaults that depend on the machine the server runs on, decided without importing torch
(the settings and the server import no torch; see README, "Which model for which machine").

    >>> default_quantize("aarch64"), default_quantize("x86_64")
    (True, False)
"""

from __future__ import annotations

import platform

# ARM boards (Raspberry Pi 4/5) are bound by memory bandwidth: float32 English reads
# ~380 MB of weights per 80 ms frame, more than a Pi 4 streams (~5.5 GB/s) and most of what
# a Pi 5 does, so only int8 (~110 MB a frame, QNNPACK) speaks faster than real time there.
# x86_64 PCs run float32 faster than real time (2.7x on 2 cores of the development
# machine) and keep its fidelity; int8 stays an opt-in.
_INT8_BY_DEFAULT = frozenset({"aarch64", "arm64", "armv7l", "armv8l"})


def default_quantize(machine: str | None = None) -> bool:
    """Whether `--quantize auto` means int8 on `machine` (`platform.machine()` by default)."""
    return (platform.machine() if machine is None else machine).lower() in _INT8_BY_DEFAULT
