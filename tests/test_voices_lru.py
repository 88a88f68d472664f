"""The bounded LRU: hits, misses, eviction order, the pinned key, the byte bound."""

from __future__ import annotations

import pytest

from wyoming_pocket_tts.voices.lru import BoundedLRU


def test_hit_returns_same_object_and_miss_returns_none() -> None:
    lru: BoundedLRU[str, object] = BoundedLRU(max_count=2)
    value = object()
    assert lru.put("a", value, 10)
    entry = lru.get("a")
    assert entry is not None and entry.value is value
    assert lru.get("b") is None


def test_eviction_order_is_least_recently_used() -> None:
    lru: BoundedLRU[str, str] = BoundedLRU(max_count=3)
    for key in "abc":
        lru.put(key, key, 1)
    lru.get("a")  # a is now the most recent; b the least
    lru.put("d", "d", 1)
    assert lru.keys() == ["c", "a", "d"]
    lru.put("e", "e", 1)
    assert lru.keys() == ["a", "d", "e"]


def test_pinned_is_never_evicted_but_counts() -> None:
    lru: BoundedLRU[str, str] = BoundedLRU(max_count=2)
    lru.pin("default")
    lru.put("default", "d", 1)
    for key in "abcdef":
        assert lru.put(key, key, 1)
    # The pinned key is the least recently used, yet it stays; it takes one of the 2 slots.
    assert lru.keys() == ["default", "f"]


def test_count_one_with_pinned_stores_nothing_else() -> None:
    lru: BoundedLRU[str, str] = BoundedLRU(max_count=1)
    lru.pin("default")
    lru.put("default", "d", 1)
    assert not lru.put("a", "a", 1)
    assert lru.keys() == ["default"]


def test_byte_bound_evicts_until_it_fits() -> None:
    lru: BoundedLRU[str, str] = BoundedLRU(max_count=10, max_bytes=100)
    lru.put("a", "a", 40)
    lru.put("b", "b", 40)
    lru.put("c", "c", 40)  # 120 > 100: a goes
    assert lru.keys() == ["b", "c"] and lru.total_bytes == 80
    lru.put("d", "d", 90)  # needs both b and c out
    assert lru.keys() == ["d"] and lru.total_bytes == 90


def test_too_big_entry_is_not_stored_and_evicts_nothing() -> None:
    lru: BoundedLRU[str, str] = BoundedLRU(max_count=10, max_bytes=100)
    lru.pin("p")
    lru.put("p", "p", 30)
    lru.put("a", "a", 30)
    assert not lru.put("huge", "h", 80)  # 30 pinned + 80 > 100 even with a evicted
    assert lru.keys() == ["p", "a"] and lru.total_bytes == 60


def test_pinned_is_stored_even_over_the_bound() -> None:
    lru: BoundedLRU[str, str] = BoundedLRU(max_count=10, max_bytes=100)
    lru.put("a", "a", 50)
    lru.pin("p")
    assert lru.put("p", "p", 150)
    assert lru.keys() == ["p"]  # the others made way for it
    assert not lru.put("b", "b", 1)


def test_replacing_a_key_updates_bytes() -> None:
    lru: BoundedLRU[str, str] = BoundedLRU(max_count=2, max_bytes=100)
    lru.put("a", "a1", 60)
    lru.put("a", "a2", 30)
    assert len(lru) == 1 and lru.total_bytes == 30
    entry = lru.get("a")
    assert entry is not None and entry.value == "a2"
    lru.remove("a")
    assert lru.total_bytes == 0 and lru.get("a") is None


def test_put_without_evict_only_fills_free_room() -> None:
    lru: BoundedLRU[str, str] = BoundedLRU(max_count=2)
    assert lru.has_room()
    assert lru.put("a", "a", 1, evict=False)
    assert lru.put("b", "b", 1, evict=False)
    assert not lru.has_room()
    assert not lru.put("c", "c", 1, evict=False)
    assert lru.keys() == ["a", "b"]


def test_tag_is_kept() -> None:
    lru: BoundedLRU[str, str] = BoundedLRU(max_count=2)
    lru.put("a", "a", 1, tag=(1, 2))
    entry = lru.get("a")
    assert entry is not None and entry.tag == (1, 2)


def test_invalid_count() -> None:
    with pytest.raises(ValueError):
        BoundedLRU(max_count=0)


def test_several_pinned_keys_are_all_kept_and_all_count() -> None:
    lru: BoundedLRU[str, str] = BoundedLRU(max_count=3)
    lru.pin("english default")
    lru.pin("german default")
    lru.put("english default", "e", 1)
    lru.put("german default", "g", 1)
    for key in "abcd":
        assert lru.put(key, key, 1)
    assert lru.keys() == ["english default", "german default", "d"]
    lru.unpin("english default")
    lru.put("e", "e", 1)  # the unpinned key is now the least recently used: it goes
    assert lru.keys() == ["german default", "d", "e"]
    assert lru.pinned == frozenset({"german default"})


def test_pinned_keys_alone_over_the_bound_refuse_others() -> None:
    lru: BoundedLRU[str, str] = BoundedLRU(max_count=10, max_bytes=100)
    lru.pin("p")
    lru.pin("q")
    lru.put("p", "p", 60)
    lru.put("q", "q", 60)  # pinned: stored over the bound
    assert lru.keys() == ["p", "q"] and lru.total_bytes == 120
    assert not lru.put("a", "a", 1)
    assert lru.nbytes_of("p") == 60 and lru.nbytes_of("absent") == 0
