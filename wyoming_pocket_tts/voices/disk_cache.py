"""Encoded voices kept on disk, so a restart loads them instead of encoding them again.

Files are named after a hash of the key (model and weights, hash of the source file's
content, format version): a changed recording or another model simply misses. The cache
is never authoritative: a file that fails to load is deleted and the voice encoded again.
The directory is bounded by size; the least recently used files go first (a hit
refreshes the file's date).
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, TypeVar

_LOGGER = logging.getLogger(__name__)

S = TypeVar("S")

SUFFIX = ".safetensors"
_TMP_PREFIX = ".tmp-"
# A temporary file this old was left by a crash, not by a write in progress.
_STALE_TMP_S = 3600.0


@dataclass(frozen=True)
class CacheKey:
    model_id: str
    source_sha256: str
    format_version: str

    def filename(self) -> str:
        material = "\n".join((self.model_id, self.source_sha256, self.format_version))
        return hashlib.sha256(material.encode("utf-8")).hexdigest()[:40] + SUFFIX


class DiskCache:
    """Thread-safe; a disabled cache (max_bytes 0) misses and stores nothing."""

    def __init__(self, directory: Path, max_bytes: int) -> None:
        self._dir = directory
        self._max_bytes = max_bytes
        self._lock = threading.Lock()
        if self.enabled:
            self._remove_stale_temporaries()

    @property
    def enabled(self) -> bool:
        return self._max_bytes > 0

    @property
    def directory(self) -> Path:
        return self._dir

    def path_for(self, key: CacheKey) -> Path:
        return self._dir / key.filename()

    def contains(self, key: CacheKey) -> bool:
        return self.enabled and self.path_for(key).is_file()

    def load(self, key: CacheKey, loader: Callable[[Path], S]) -> S | None:
        """The cached value, or None on a miss or a file that does not load (then deleted)."""
        if not self.enabled:
            return None
        path = self.path_for(key)
        if not path.is_file():
            return None
        try:
            value = loader(path)
        except Exception as err:  # noqa: BLE001 - any failure to read a cache file means "encode again"
            _LOGGER.warning("disk cache: %s does not load (%s); ignored, it will be rewritten", path, err)
            self._unlink(path)
            return None
        try:
            os.utime(path)  # the date orders eviction: a hit makes the file recent
        except OSError:
            pass
        return value

    def save(self, key: CacheKey, value: S, saver: Callable[[S, Path], None]) -> bool:
        """Write atomically then trim the directory; failures are logged, never raised."""
        if not self.enabled:
            return False
        final = self.path_for(key)
        # Written under a temporary name and renamed: a crash never leaves a half file
        # under a real name, and concurrent writers of one key do not interleave.
        temporary = self._dir / f"{_TMP_PREFIX}{uuid.uuid4().hex}{SUFFIX}"
        try:
            self._dir.mkdir(parents=True, exist_ok=True)
            saver(value, temporary)
            os.replace(temporary, final)
        except Exception as err:  # noqa: BLE001 - a cache that cannot be written only costs speed
            _LOGGER.warning("disk cache: cannot write %s: %s", final, err)
            self._unlink(temporary)
            return False
        self._trim(keep=final)
        return True

    def total_bytes(self) -> int:
        return sum(size for _, _, size in self._files())

    def _files(self) -> list[tuple[float, Path, int]]:
        found = []
        try:
            entries = list(self._dir.iterdir())
        except OSError:
            return []
        for path in entries:
            if path.suffix != SUFFIX or path.name.startswith("."):
                continue
            try:
                stat = path.stat()
            except OSError:
                continue  # removed meanwhile
            found.append((stat.st_mtime, path, stat.st_size))
        return found

    def _trim(self, keep: Path) -> None:
        with self._lock:
            files = sorted(self._files())
            total = sum(size for _, _, size in files)
            for _, path, size in files:  # oldest first
                if total <= self._max_bytes:
                    break
                if path == keep:
                    continue  # the file just written stays, even alone over the bound
                self._unlink(path)
                total -= size
                _LOGGER.info("disk cache: evicted %s to stay under %d bytes", path.name, self._max_bytes)

    def _remove_stale_temporaries(self) -> None:
        try:
            entries = list(self._dir.glob(f"{_TMP_PREFIX}*"))
        except OSError:
            return
        now = time.time()
        for path in entries:
            try:
                if now - path.stat().st_mtime > _STALE_TMP_S:
                    path.unlink()
            except OSError:
                pass

    @staticmethod
    def _unlink(path: Path) -> None:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError as err:
            _LOGGER.warning("disk cache: cannot remove %s: %s", path, err)
