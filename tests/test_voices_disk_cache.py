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


# -- a cache that can be trusted: checks, kills, read-only directories ---------------------


def two_entries(directory: Path) -> tuple[DiskCache, Path, Path]:
    cache = DiskCache(directory, max_bytes=1 << 20)
    cache.save(key(0), np.zeros(1000, dtype=np.float32), save)
    cache.save(key(1), np.ones(1000, dtype=np.float32), save)
    return cache, cache.path_for(key(0)), cache.path_for(key(1))


def test_swapped_files_are_detected_not_exchanged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cache, first, second = two_entries(tmp_path)
    swap = tmp_path / "swap"
    first.rename(swap)
    second.rename(first)
    swap.rename(second)
    with caplog.at_level(logging.WARNING):
        assert cache.load(key(0), load) is None
        assert cache.load(key(1), load) is None
    assert caplog.text.count("does not match its checksum") == 2
    assert not first.exists() and not second.exists()  # removed: encoded and written again
    assert cache.save(key(0), np.zeros(1000, dtype=np.float32), save)
    np.testing.assert_array_equal(cache.load(key(0), load), np.zeros(1000, dtype=np.float32))


def test_swapped_entries_with_their_checks_are_detected_by_the_key(tmp_path: Path) -> None:
    cache, first, second = two_entries(tmp_path)
    for suffix in (".safetensors", ".check.json"):
        a, b = first.with_name(first.stem + suffix), second.with_name(second.stem + suffix)
        a.rename(tmp_path / "swap")
        b.rename(a)
        (tmp_path / "swap").rename(b)
    assert cache.load(key(0), load) is None
    assert cache.load(key(1), load) is None


def test_a_zeroed_block_is_detected(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cache, _, second = two_entries(tmp_path)  # the second holds ones: zeros change it
    content = bytearray(second.read_bytes())
    middle = len(content) // 2
    content[middle : middle + 512] = bytes(512)
    second.write_bytes(bytes(content))
    assert load(second).sum() < 1000  # safetensors alone loads it silently, changed
    with caplog.at_level(logging.WARNING):
        assert cache.load(key(1), load) is None
    assert "does not match its checksum" in caplog.text
    np.testing.assert_array_equal(cache.load(key(0), load), np.zeros(1000, dtype=np.float32))


def test_an_entry_without_its_check_is_a_miss(tmp_path: Path) -> None:
    cache, first, _ = two_entries(tmp_path)
    first.with_name(first.stem + ".check.json").unlink()
    assert not cache.contains(key(0))
    assert cache.load(key(0), load) is None
    assert not first.exists()


KILLED_WRITER = """
import os, signal, sys
from pathlib import Path
import numpy as np
sys.path.insert(0, {tests!r})
from test_voices_disk_cache import key, save
from wyoming_pocket_tts.voices.disk_cache import DiskCache

cache = DiskCache(Path({directory!r}), max_bytes=1 << 20)
assert cache.save(key(0), np.arange(1000, dtype=np.float32), save)

def half_then_killed(value, path):
    save(value, path)
    with open(path, "r+b") as file:
        file.truncate(path.stat().st_size // 2)
    os.kill(os.getpid(), signal.SIGKILL)

cache.save(key(1), np.arange(1000, dtype=np.float32), half_then_killed)
"""


def test_a_write_killed_midway_leaves_the_completed_entries(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys

    directory = tmp_path / "cache"
    script = KILLED_WRITER.format(tests=str(Path(__file__).parent), directory=str(directory))
    result = subprocess.run([sys.executable, "-c", script], cwd=Path(__file__).parent.parent, timeout=120)
    assert result.returncode == -signal.SIGKILL
    assert list(directory.glob(".tmp-*"))  # the killed write's leftover

    restarted = DiskCache(directory, max_bytes=1 << 20)
    assert not list(directory.glob(".tmp-*"))  # its writer is dead: removed at start
    np.testing.assert_array_equal(restarted.load(key(0), load), np.arange(1000, dtype=np.float32))
    assert restarted.load(key(1), load) is None  # the partial one never got a real name


def test_a_live_writers_temporary_is_kept(tmp_path: Path) -> None:
    mine = tmp_path / f".tmp-{os.getpid()}-abc.safetensors"
    mine.write_bytes(b"being written")
    DiskCache(tmp_path, max_bytes=1 << 20)
    assert mine.exists()


def test_a_read_only_directory_turns_writing_off_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Tests run as root, where chmod does not stop writes: the write itself is made to fail
    # as a read-only file system fails it (see the next test for a real read-only mount).
    import errno

    cache, _, _ = two_entries(tmp_path)
    real_open = open

    def read_only_open(path, mode="r", *args, **kwargs):
        if any(flag in mode for flag in "wax+"):
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real_open(path, mode, *args, **kwargs)

    monkeypatch.setattr("builtins.open", read_only_open)
    with caplog.at_level(logging.WARNING):
        for n in range(2, 6):
            assert not cache.save(key(n), np.ones(10, dtype=np.float32), save)
    assert not cache.writable
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "kept in memory only" in warnings[0].getMessage()
    # What was cached still loads.
    np.testing.assert_array_equal(cache.load(key(1), load), np.ones(1000, dtype=np.float32))


def test_a_full_disk_turns_writing_off_too(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import errno

    def disk_full(value: object, path: Path) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    cache = DiskCache(tmp_path, max_bytes=1 << 20)
    with caplog.at_level(logging.WARNING):
        assert not cache.save(key(0), np.ones(1), disk_full)
        assert not cache.save(key(1), np.ones(1), save)  # not even tried
    assert caplog.text.count("kept in memory only") == 1
    assert not cache.contains(key(1))


def test_a_read_only_mount_with_a_complete_cache(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import subprocess

    directory = tmp_path / "cache"
    two_entries(directory)
    mounted = subprocess.run(["mount", "--bind", "-o", "ro", str(directory), str(directory)],
                             capture_output=True, text=True)  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip(f"cannot make a read-only bind mount here ({mounted.stderr.strip()}); "
                    "the mocked read-only test covers the behaviour")  # fmt: skip
    try:
        with pytest.raises(OSError):
            (directory / "probe").write_bytes(b"x")
        cache = DiskCache(directory, max_bytes=1 << 20)
        np.testing.assert_array_equal(cache.load(key(0), load), np.zeros(1000, dtype=np.float32))
        with caplog.at_level(logging.WARNING):
            assert not cache.save(key(5), np.ones(10, dtype=np.float32), save)
            assert not cache.save(key(6), np.ones(10, dtype=np.float32), save)
        assert caplog.text.count("kept in memory only") == 1
        np.testing.assert_array_equal(cache.load(key(1), load), np.ones(1000, dtype=np.float32))
    finally:
        subprocess.run(["umount", str(directory)], check=True)
