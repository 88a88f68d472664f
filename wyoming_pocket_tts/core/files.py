"""Durable file writes, shared by the disk cache and the voices page's store."""

from __future__ import annotations

import os
from pathlib import Path


def write_synced(path: Path, content: bytes, mode: str = "wb") -> None:
    """Write `content` to `path` and fsync it (`mode` "xb": only if it does not exist)."""
    with open(path, mode) as file:
        file.write(content)
        file.flush()
        os.fsync(file.fileno())


def sync_directory(directory: Path) -> None:
    """Make the renames in `directory` durable (POSIX); not every platform can open a directory."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
