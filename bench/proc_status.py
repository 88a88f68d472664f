"""Memory figures of a process from /proc/PID/status (Linux), shared by the benchmarks."""

from __future__ import annotations


def status_kib(field: str, pid: int | str = "self") -> int | None:
    """A /proc/PID/status field in KiB (e.g. "VmRSS", "VmHWM"); None off Linux."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None
