"""The server's encoded voices in memory: one bounded LRU shared by every model's library.

`--voice-cache-size` and `--voice-cache-mb` bound the whole server, however many models
are loaded (issue 16): a server with an English and a German model keeps at most that many
voices, of both. Each model's library sees its own share (`VoiceCache`, keyed by the
voice's name within that model), so a voice of one model never answers for another model's
voice of the same name, and one model's request may push out another model's idle voices,
least recently used first. Each model's default voice is pinned: never evicted, but counted.
When a model is unloaded its library drops its share (`VoiceCache.clear`), which also
unpins its default voice; the disk cache keeps what was encoded from recordings.

Thread-safe: the libraries of several models call it from their own threads. Lock order:
a library's own lock, then this one (this class never calls back into a library).
"""

from __future__ import annotations

import threading

from wyoming_pocket_tts.core import VoiceStateLike

from .lru import BoundedLRU, CacheEntry

# The unit of --voice-cache-mb and --disk-cache-mb (MiB).
MIB = 1024 * 1024

# (model, voice name): the model is the name it was given on the command line.
_Key = tuple[str, str]


class SharedVoiceCache:
    """The voice states of every loaded model, bounded together."""

    def __init__(self, max_count: int, max_mb: float | None = None) -> None:
        max_bytes = int(max_mb * MIB) if max_mb is not None else None
        self._lru: BoundedLRU[_Key, VoiceStateLike] = BoundedLRU(max_count, max_bytes)
        self._lock = threading.Lock()

    def for_model(self, model: str) -> VoiceCache:
        """The share of the model named `model`: one per loaded model (its library's)."""
        return VoiceCache(self._lru, self._lock, model)

    def keys(self) -> list[_Key]:
        """Every model's voices in memory, least recently used first."""
        with self._lock:
            return self._lru.keys()

    @property
    def total_bytes(self) -> int:
        with self._lock:
            return self._lru.total_bytes


class VoiceCache:
    """One model's share of a `SharedVoiceCache`: the calls a `VoiceLibrary` makes, keyed
    by voice name."""

    def __init__(self, lru: BoundedLRU[_Key, VoiceStateLike], lock: threading.Lock, model: str) -> None:
        self._lru = lru
        self._lock = lock
        self._model = model
        self._pinned: str | None = None

    def _key(self, name: str) -> _Key:
        return (self._model, name)

    def __contains__(self, name: str) -> bool:
        with self._lock:
            return self._key(name) in self._lru

    def get(self, name: str) -> CacheEntry[VoiceStateLike] | None:
        with self._lock:
            return self._lru.get(self._key(name))

    def put(self, name: str, value: VoiceStateLike, nbytes: int, tag: object = None, *,
            evict: bool = True) -> bool:  # fmt: skip
        with self._lock:
            return self._lru.put(self._key(name), value, nbytes, tag, evict=evict)

    def remove(self, name: str) -> None:
        with self._lock:
            self._lru.remove(self._key(name))

    def has_room(self) -> bool:
        with self._lock:
            return self._lru.has_room()

    def pin(self, name: str) -> None:
        """Make `name` this model's pinned voice (its default), unpinning the previous one."""
        with self._lock:
            if self._pinned is not None:
                self._lru.unpin(self._key(self._pinned))
            self._pinned = name
            self._lru.pin(self._key(name))

    def keys(self) -> list[str]:
        """This model's voices in memory, least recently used first."""
        with self._lock:
            return [name for model, name in self._lru.keys() if model == self._model]

    @property
    def total_bytes(self) -> int:
        with self._lock:
            return sum(self._lru.nbytes_of(key) for key in self._lru.keys() if key[0] == self._model)

    def clear(self) -> None:
        """Drop this model's voices and unpin its default (the model is being unloaded)."""
        with self._lock:
            if self._pinned is not None:
                self._lru.unpin(self._key(self._pinned))
                self._pinned = None
            for key in self._lru.keys():
                if key[0] == self._model:
                    self._lru.remove(key)
