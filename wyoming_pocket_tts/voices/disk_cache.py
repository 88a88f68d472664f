"""Encoded voices kept on disk, so a restart loads them instead of encoding them again.

Files are named after a hash of the key (model and weights, hash of the source file's
content, format version): a changed recording or another model simply misses. The cache
is never authoritative: a file that fails to load is deleted and the voice encoded again.
The directory is bounded by size; the least recently used files go first (a hit
refreshes the file's date).

Each entry is two files: the value (`<hash>.safetensors`, in whatever format the caller's
saver writes) and its check (`<hash>.check.json`: the key it was written for, the value's
size and SHA-256). A value whose check is missing, names another key or does not match
(a zeroed block, two files swapped) is logged, deleted and reported as a miss. The check
is a separate file so that the caller's loader reads its own format unchanged. Both are
written under temporary names, fsynced and renamed: after a kill, a restart finds every
completed entry intact and never a partial file under a real name; temporaries left by a
dead process are removed at start. A directory that cannot be written (read-only, full)
turns writing off with one warning: voices are then kept in memory only.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, TypeVar

from ..core.files import sync_directory, write_synced

_LOGGER = logging.getLogger(__name__)

S = TypeVar("S")

SUFFIX = ".safetensors"
CHECK_SUFFIX = ".check.json"
_TMP_PREFIX = ".tmp-"
# A temporary file this old was left by a crash, not by a write in progress.
_STALE_TMP_S = 3600.0
# Errors that say the directory cannot take writes at all, rather than this one value.
_UNWRITABLE = frozenset({errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT})
_HASH_BLOCK = 1 << 20
# In every file name: entries of an earlier layout (no check file) miss quietly instead of
# each being reported as untrusted, and age out of the size bound.
_LAYOUT = "checked-1"


@dataclass(frozen=True)
class CacheKey:
    model_id: str
    source_sha256: str
    format_version: str

    def filename(self) -> str:
        material = "\n".join((self.model_id, self.source_sha256, self.format_version, _LAYOUT))
        return hashlib.sha256(material.encode("utf-8")).hexdigest()[:40] + SUFFIX

    def fields(self) -> dict[str, str]:
        return {"model_id": self.model_id, "source_sha256": self.source_sha256,
                "format_version": self.format_version}  # fmt: skip


@dataclass(frozen=True)
class _Check:
    """What an entry's check file holds."""

    key: dict[str, str]
    size: int
    sha256: str

    def to_json(self) -> bytes:
        return json.dumps({"key": self.key, "size": self.size, "sha256": self.sha256}).encode("utf-8")

    @classmethod
    def from_file(cls, path: Path) -> _Check | None:
        """The check in `path`; None if missing or unreadable (then the entry is not trusted)."""
        try:
            raw = json.loads(path.read_bytes())
            return cls(dict(raw["key"]), int(raw["size"]), str(raw["sha256"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None


class DiskCache:
    """Thread-safe; a disabled cache (max_bytes 0) misses and stores nothing."""

    def __init__(self, directory: Path, max_bytes: int) -> None:
        self._dir = directory
        self._max_bytes = max_bytes
        self._lock = threading.Lock()
        self._writable = True  # until a write finds the directory read-only or full
        if self.enabled:
            self._remove_stale_temporaries()

    @property
    def enabled(self) -> bool:
        return self._max_bytes > 0

    @property
    def directory(self) -> Path:
        return self._dir

    @property
    def writable(self) -> bool:
        """False once a write found the directory read-only or full."""
        return self._writable

    def path_for(self, key: CacheKey) -> Path:
        return self._dir / key.filename()

    def contains(self, key: CacheKey) -> bool:
        path = self.path_for(key)
        return self.enabled and path.is_file() and _check_path(path).is_file()

    def load(self, key: CacheKey, loader: Callable[[Path], S]) -> S | None:
        """The cached value, or None on a miss or an entry that fails its check or does not
        load (then deleted)."""
        if not self.enabled:
            return None
        path = self.path_for(key)
        if not path.is_file():
            return None
        problem = self._verify(key, path)
        if problem:
            _LOGGER.warning("disk cache: %s does not load (%s); ignored, it will be rewritten", path, problem)
            self._remove_entry(path)
            return None
        try:
            value = loader(path)
        except Exception as err:  # noqa: BLE001 - any failure to read a cache file means "encode again"
            _LOGGER.warning("disk cache: %s does not load (%s); ignored, it will be rewritten", path, err)
            self._remove_entry(path)
            return None
        try:
            os.utime(path)  # the date orders eviction: a hit makes the file recent
        except OSError:
            pass
        return value

    def save(self, key: CacheKey, value: S, saver: Callable[[S, Path], None]) -> bool:
        """Write atomically then trim the directory; failures are logged, never raised."""
        if not self.enabled or not self._writable:
            return False
        final = self.path_for(key)
        # Written under temporary names and renamed: a crash never leaves a half file
        # under a real name, and concurrent writers of one key do not interleave. The pid
        # in the name lets a restart tell a dead writer's leftovers from a live one's.
        stem = f"{_TMP_PREFIX}{os.getpid()}-{uuid.uuid4().hex}"
        temporary = self._dir / f"{stem}{SUFFIX}"
        temporary_check = self._dir / f"{stem}{CHECK_SUFFIX}"
        try:
            self._dir.mkdir(parents=True, exist_ok=True)
            saver(value, temporary)
            size, digest = _digest(temporary, sync=True)
            write_synced(temporary_check, _Check(key.fields(), size, digest).to_json())
            with self._lock:  # two writers of one key in this process must not mix their halves
                os.replace(temporary, final)
                os.replace(temporary_check, _check_path(final))
            sync_directory(self._dir)
        except Exception as err:  # noqa: BLE001 - a cache that cannot be written only costs speed
            _discard(temporary)
            _discard(temporary_check)
            # Savers report a read-only or full disk in their own exception types (safetensors:
            # SafetensorError), so the directory itself is asked.
            unwritable = _unwritable_reason(self._dir) if not _is_unwritable_error(err) else str(err)
            if unwritable:
                self._writable = False
                _LOGGER.warning("disk cache: %s cannot be written (%s); new voices are kept in memory only "
                                "until restart", self._dir, unwritable)  # fmt: skip
            else:
                _LOGGER.warning("disk cache: cannot write %s: %s", final, err)
            return False
        self._trim(keep=final)
        return True

    def _verify(self, key: CacheKey, path: Path) -> str | None:
        """Why the entry at `path` cannot be trusted for `key`, or None if it can."""
        check = _Check.from_file(_check_path(path))
        if check is None:
            return "no readable check file"
        if check.key != key.fields():
            return "its check names another key"
        try:
            size, digest = _digest(path)
        except OSError as err:
            return f"unreadable: {err}"
        if size != check.size or digest != check.sha256:
            return "content does not match its checksum"
        return None

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
                self._remove_entry(path)
                total -= size
                _LOGGER.info("disk cache: evicted %s to stay under %d bytes", path.name, self._max_bytes)

    def _remove_stale_temporaries(self) -> None:
        """Remove what a killed writer left: its process is gone, or the file is old."""
        try:
            entries = list(self._dir.glob(f"{_TMP_PREFIX}*"))
        except OSError:
            return
        now = time.time()
        for path in entries:
            try:
                if not _writer_alive(path.name) or now - path.stat().st_mtime > _STALE_TMP_S:
                    path.unlink()
                    _LOGGER.info("disk cache: removed %s, left by an interrupted write", path.name)
            except OSError:
                pass

    def _remove_entry(self, path: Path) -> None:
        self._unlink(path)
        self._unlink(_check_path(path))

    @staticmethod
    def _unlink(path: Path) -> None:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError as err:
            _LOGGER.warning("disk cache: cannot remove %s: %s", path, err)


def _is_unwritable_error(err: Exception) -> bool:
    return isinstance(err, OSError) and err.errno in _UNWRITABLE


def _unwritable_reason(directory: Path) -> str | None:
    """Why `directory` takes no writes (read-only, full, not ours), or None if it does:
    a probe of 64 KiB is written, synced and removed."""
    probe = directory / f"{_TMP_PREFIX}{os.getpid()}-probe-{uuid.uuid4().hex}"
    try:
        write_synced(probe, bytes(64 * 1024))
    except OSError as err:
        return err.strerror or str(err)
    finally:
        _discard(probe)
    return None


def _discard(path: Path) -> None:
    """Remove a temporary file if it is there; quietly, as a read-only directory refuses
    even to remove what does not exist."""
    try:
        path.unlink()
    except OSError:
        pass


def _check_path(path: Path) -> Path:
    return path.with_name(path.name[: -len(SUFFIX)] + CHECK_SUFFIX)


def _digest(path: Path, sync: bool = False) -> tuple[int, str]:
    """Size and SHA-256 of `path`; `sync` also flushes it to disk first."""
    sha = hashlib.sha256()
    size = 0
    with open(path, "rb+" if sync else "rb") as file:
        if sync:
            os.fsync(file.fileno())
        while block := file.read(_HASH_BLOCK):
            sha.update(block)
            size += len(block)
    return size, sha.hexdigest()


def _writer_alive(name: str) -> bool:
    """Whether the process that wrote temporary file `name` (".tmp-<pid>-...") still runs.
    Our own pid counts as alive (another cache in this process may be writing); names
    without a pid (an older version's) count as alive, and are left to age out."""
    try:
        pid = int(name[len(_TMP_PREFIX) :].split("-", 1)[0])
    except ValueError:
        return True
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True
