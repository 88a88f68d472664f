"""The disk cache: keys, atomic writes, corrupt files, the size bound."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from wyoming_pocket_tts.voices.disk_cache import CacheKey, DiskCache


def save(value: np.ndarray, path: Path) -> None:
    save_file({"v": value}, str(path))


def load(path: Path) -> np.ndarray:
    return load_file(str(path))["v"]


def key(n: int = 0) -> CacheKey:
    return CacheKey("model-a", f"{n:064x}", "1")


def test_round_trip_and_miss(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path / "c", max_bytes=1 << 20)
    assert cache.load(key(), load) is None
    assert not cache.contains(key())
    assert cache.save(key(), np.arange(10, dtype=np.float32), save)
    assert cache.contains(key())
    np.testing.assert_array_equal(cache.load(key(), load), np.arange(10, dtype=np.float32))
    assert not list((tmp_path / "c").glob(".tmp-*"))


def test_every_key_field_matters() -> None:
    names = {
        CacheKey("model-a", "ab", "1").filename(),
        CacheKey("model-b", "ab", "1").filename(),
        CacheKey("model-a", "cd", "1").filename(),
        CacheKey("model-a", "ab", "2").filename(),
    }
    assert len(names) == 4
    assert all(name.endswith(".safetensors") for name in names)


def test_corrupt_file_is_ignored_and_removed(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cache = DiskCache(tmp_path, max_bytes=1 << 20)
    cache.save(key(), np.ones(4, dtype=np.float32), save)
    path = cache.path_for(key())
    path.write_bytes(b"\x00garbage")
    with caplog.at_level(logging.WARNING):
        assert cache.load(key(), load) is None
    assert "does not load" in caplog.text and path.name in caplog.text
    assert not path.exists()
    assert cache.save(key(), np.ones(4, dtype=np.float32), save)  # rewritten
    assert cache.load(key(), load) is not None


def test_size_bound_evicts_oldest_first(tmp_path: Path) -> None:
    value = np.zeros(1000, dtype=np.float32)  # ~4 KB per file
    cache = DiskCache(tmp_path, max_bytes=10_000)
    now = time.time()
    for n in range(2):
        cache.save(key(n), value, save)
        os.utime(cache.path_for(key(n)), (now - 100 + n, now - 100 + n))
    cache.load(key(0), load)  # a hit refreshes: key 1 is now the oldest
    cache.save(key(2), value, save)  # 3 files > 10 KB
    assert cache.contains(key(0)) and cache.contains(key(2))
    assert not cache.contains(key(1))
    assert cache.total_bytes() <= 10_000


def test_file_over_the_bound_alone_is_kept(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path, max_bytes=100)
    cache.save(key(0), np.zeros(1000, dtype=np.float32), save)
    cache.save(key(1), np.zeros(1000, dtype=np.float32), save)
    assert cache.contains(key(1)) and not cache.contains(key(0))


def test_disabled_cache(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path / "c", max_bytes=0)
    assert not cache.save(key(), np.ones(1, dtype=np.float32), save)
    assert cache.load(key(), load) is None
    assert not (tmp_path / "c").exists()


def test_write_failure_is_logged_not_raised(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    def failing(value: object, path: Path) -> None:
        path.write_bytes(b"half")
        raise OSError("disk full")

    cache = DiskCache(tmp_path, max_bytes=1 << 20)
    with caplog.at_level(logging.WARNING):
        assert not cache.save(key(), np.ones(1), failing)
    assert "disk full" in caplog.text
    assert list(tmp_path.iterdir()) == []


def test_stale_temporaries_removed_at_start(tmp_path: Path) -> None:
    stale = tmp_path / ".tmp-old.safetensors"
    fresh = tmp_path / ".tmp-new.safetensors"
    stale.write_bytes(b"x")
    fresh.write_bytes(b"x")
    old = time.time() - 7200
    os.utime(stale, (old, old))
    DiskCache(tmp_path, max_bytes=1 << 20)
    assert not stale.exists() and fresh.exists()
