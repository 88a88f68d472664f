"""This process's memory figures from /proc/self/status (Linux), shared by the benchmarks."""

from __future__ import annotations


def status_kib(field: str) -> int | None:
    """A /proc/self/status field in KiB (e.g. "VmRSS", "VmHWM"); None off Linux."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None
