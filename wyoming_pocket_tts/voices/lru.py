"""A least-recently-used cache bounded by entry count and by bytes, with pinned keys.

Policy (documented in the README too): the bounds are totals, so the pinned entries (the
default voice of each loaded model) count towards them, which keeps them an honest bound
on memory; but a pinned entry is never evicted. An entry that cannot fit even after
evicting every unpinned one is not stored (the caller still has it for its request).

Not thread-safe: its one user, `memory.VoiceMemory`, calls it under a lock.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Generic, Hashable, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


@dataclass
class CacheEntry(Generic[V]):
    value: V
    nbytes: int
    # What the value was made from (e.g. a file's size and date): the caller compares it.
    tag: object = None


class BoundedLRU(Generic[K, V]):
    def __init__(self, max_count: int, max_bytes: int | None = None) -> None:
        if max_count < 1:
            raise ValueError("max_count must be at least 1")
        self._max_count = max_count
        self._max_bytes = max_bytes
        self._entries: OrderedDict[K, CacheEntry[V]] = OrderedDict()
        self._bytes = 0
        self._pinned: set[K] = set()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    @property
    def total_bytes(self) -> int:
        return self._bytes

    @property
    def pinned(self) -> frozenset[K]:
        return frozenset(self._pinned)

    def nbytes_of(self, key: K) -> int:
        """The size of a stored entry (0 if absent), without making it recently used."""
        entry = self._entries.get(key)
        return entry.nbytes if entry is not None else 0

    def keys(self) -> list[K]:
        """Keys from least to most recently used."""
        return list(self._entries)

    def pin(self, key: K) -> None:
        """Protect `key` from eviction (it need not be stored yet)."""
        self._pinned.add(key)

    def unpin(self, key: K) -> None:
        self._pinned.discard(key)

    def get(self, key: K) -> CacheEntry[V] | None:
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
        return entry

    def remove(self, key: K) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._bytes -= entry.nbytes

    def has_room(self) -> bool:
        """Whether one more entry could be stored now without evicting anything."""
        if len(self._entries) >= self._max_count:
            return False
        return self._max_bytes is None or self._bytes < self._max_bytes

    def put(self, key: K, value: V, nbytes: int, tag: object = None, *, evict: bool = True) -> bool:
        """Store `value` as most recently used; True if it was stored.

        With evict=False (background pre-encoding) nothing already cached is pushed out:
        warming the cache must not throw away voices that requests are using.
        """
        self.remove(key)
        if key not in self._pinned:
            if not self._make_room(key, nbytes, evict):
                return False
        self._entries[key] = CacheEntry(value=value, nbytes=nbytes, tag=tag)
        self._bytes += nbytes
        if key in self._pinned:
            # The pinned entry is stored whatever its size; others make way for it.
            self._make_room(key, 0, evict=True, adding=False)
        return True

    def _fits(self, nbytes: int, adding: bool) -> bool:
        count = len(self._entries) + (1 if adding else 0)
        if count > self._max_count:
            return False
        return self._max_bytes is None or self._bytes + nbytes <= self._max_bytes

    def _make_room(self, key: K, nbytes: int, evict: bool, adding: bool = True) -> bool:
        if self._fits(nbytes, adding):
            return True
        if not evict:
            return False
        victims = [k for k in self._entries if k not in self._pinned and k != key]
        kept = [entry for k, entry in self._entries.items() if k in self._pinned and k != key]
        pinned_bytes = sum(entry.nbytes for entry in kept)
        pinned_count = len(kept)
        # Refuse before evicting anything if even an otherwise empty cache could not hold it.
        if adding:
            if pinned_count + 1 > self._max_count:
                return False
            if self._max_bytes is not None and pinned_bytes + nbytes > self._max_bytes:
                return False
        for victim in victims:  # least recently used first
            self.remove(victim)
            if self._fits(nbytes, adding):
                return True
        return self._fits(nbytes, adding)
