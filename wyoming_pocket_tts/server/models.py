"""The models of one server (`--model` given once or several times), and which are resident.

Home Assistant never tells a TTS server the language of a request: it offers the voices
grouped by their languages and sends the voice's name. So the voice name routes a request
to its model, and one server can speak every language its models do.

`ModelPool` owns one `ModelEntry` per configured model (its facts, loader, voice preview,
loaded backend or None, how many syntheses use it, when it was last used) and the memory
policy: at most `max_loaded` models are resident; loading one more first unloads the least
recently used model that no synthesis is using (waiting for one to be released if all are
busy, at most `room_wait` seconds: a streamed reply may keep its model for as long as its
client writes, and a request for another model's voice then gets a "server busy" error
within the same wait as for a synthesis slot, `ModelBusy`), and unloading hands the
memory back to the system (`release_memory`).

Voice names are unique across the server by one rule (`advertise`): the first model's voices
keep their names, and a later model's voice whose name (ignoring case) is already taken is
offered as `name (label)`, its model's short label in brackets, e.g. `juergen (german_24l)`.
Except that a predefined voice on a model of another language than the one it was recorded
in gives way: every model offers all 27 predefined voices, and with `--model english
--model german` the German model's own `juergen` is `juergen`, the English model's
`juergen (english)` (and `alba (german)` the German model's alba). The same names are what
requests and the voices file's `default:` use.

Imports no torch; all methods run on the event loop except the blocking ones named so.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import PurePath
from typing import TYPE_CHECKING

from ..core import VoiceInfo, names_config_file
from ..engine.catalog import native_language
from .loading import LoadTrouble, load_failure, load_watched
from .scheduler import SlotBusy

if TYPE_CHECKING:
    from .service import Backend

_LOGGER = logging.getLogger(__name__)


def model_label(name: str) -> str:
    """A model's short name: a catalog name or `demo` as is, a config's file stem."""
    if name.startswith("hf://"):
        name = name.split("@", 1)[0]
    if names_config_file(name):
        return PurePath(name).stem
    return name


@dataclass(eq=False)
class ModelEntry:
    """One configured model and its residency."""

    name: str
    languages: tuple[str, ...]
    loader: Callable[[], Backend]
    # The voices without the model (torch-free, re-reads the voices files when they changed).
    preview: Callable[[], Sequence[VoiceInfo]] | None = None
    backend: Backend | None = None
    users: int = 0
    last_used: float = 0.0
    loading: asyncio.Future[Backend] | None = field(default=None, repr=False)
    # Why its load is failing right now (a download being retried): waiting requests are told at once.
    trouble: LoadTrouble = field(default_factory=LoadTrouble, repr=False)
    # Being unloaded: its memory is not back yet, so it still counts against the bound.
    unloading: bool = False
    # The last list from `preview`, for routing without touching files on the event loop.
    previewed: tuple[VoiceInfo, ...] = ()

    @property
    def label(self) -> str:
        return model_label(self.name)

    @property
    def voices(self) -> Sequence[VoiceInfo]:
        """The voices as its library lists them once loaded, else the last preview."""
        return self.backend.voices.voices if self.backend is not None else self.previewed

    def refresh(self) -> None:
        """Re-read its voices (blocking: stats the voices files; run it off the loop)."""
        if self.backend is not None:
            refresh = getattr(self.backend.voices, "refresh", None)
            if refresh is not None:
                refresh()
        elif self.preview is not None:
            self.previewed = tuple(self.preview())


class ModelBusy(SlotBusy):
    """Every resident model stayed in use for the wait's bound: the model a request needs
    cannot be loaded now. A SlotBusy: the client is told the server is busy."""


@dataclass(frozen=True)
class Route:
    """Where a requested voice is spoken: its model, and its name in that model's library
    (None: the library's default voice, for a request without a voice or an unknown one)."""

    entry: ModelEntry
    voice: str | None


def advertise(entries: Sequence[ModelEntry]) -> tuple[list[VoiceInfo], dict[str, Route]]:
    """Every model's voices under server-unique names (see the module docstring), in model
    order (so the default voice stays first), and the route of each name, keyed lower-case."""
    listed = [(entry, voice) for entry in entries for voice in entry.voices]
    # Who keeps a name several voices have: the first that does not give way (model order).
    owners: dict[str, int] = {}
    for index in sorted(range(len(listed)), key=lambda index: _gives_way(listed[index][1])):
        owners.setdefault(listed[index][1].name.lower(), index)
    advertised: list[VoiceInfo] = []
    routes: dict[str, Route] = {}
    for index, (entry, voice) in enumerate(listed):
        name = voice.name
        if owners[name.lower()] != index:
            name = f"{voice.name} ({entry.label})"
            if name.lower() in routes or name.lower() in owners:
                continue  # the same model listed twice is refused by the command line
        routes[name.lower()] = Route(entry, voice.name)
        if name != voice.name:
            # Home Assistant's voice picker shows the description, not the name: without
            # the label, two models of one language would show the same voice twice.
            voice = replace(voice, name=name, description=f"{voice.description or voice.name} ({entry.label})")
        advertised.append(voice)
    return advertised, routes


def _gives_way(voice: VoiceInfo) -> bool:
    """A predefined voice spoken by a model of another language than its recording's."""
    native = native_language(voice.name)
    return voice.kind == "predefined" and native is not None and native not in voice.languages


def release_memory() -> None:
    """Give freed memory back to the system after a model is unloaded.

    The tensors are freed by reference counting, but glibc keeps large freed heaps mapped
    for reuse, so the process's resident size would not fall without `malloc_trim`; other C
    libraries (musl) return it by themselves or lack the call, which is then skipped.
    """
    gc.collect()
    path = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(path)
        trim = libc.malloc_trim
    except (OSError, AttributeError, TypeError):
        return
    trim.argtypes = [ctypes.c_size_t]
    trim(0)


class ModelPool:
    """The server's models, at most `max_loaded` resident. Methods run on the event loop."""

    def __init__(self, entries: Sequence[ModelEntry], max_loaded: int,
                 on_loaded: Callable[[ModelEntry, Backend], None] | None = None,
                 room_wait: float | None = None) -> None:  # fmt: skip
        if not entries:
            raise ValueError("a server needs at least one model")
        self.entries = list(entries)
        self.max_loaded = max(1, max_loaded)
        # How long a load waits for a resident model to be released (None: as long as it takes).
        self.room_wait = room_wait
        # Called on the loop after each load (the service starts that model's warm-up).
        self._on_loaded = on_loaded
        # Set (and replaced) whenever a model is released or unloaded: loads waiting for room retry.
        self._changed = asyncio.Event()

    @property
    def default(self) -> ModelEntry:
        return self.entries[0]

    @property
    def several(self) -> bool:
        return len(self.entries) > 1

    def loaded(self) -> list[ModelEntry]:
        return [entry for entry in self.entries if entry.backend is not None]

    def refresh(self) -> None:
        """Re-read every model's voices (blocking; see ModelEntry.refresh)."""
        for entry in self.entries:
            try:
                entry.refresh()
            except Exception as err:  # noqa: BLE001 - one model's voices must not hide the others'
                _LOGGER.warning("Re-reading the voices of model %s failed: %s", entry.name, err)

    def voices(self) -> list[VoiceInfo]:
        return advertise(self.entries)[0]

    def route(self, name: str | None) -> Route:
        """The model and library name of an advertised voice; the default model for None
        or a name no model offers (its library logs it and uses its default voice)."""
        if name:
            found = advertise(self.entries)[1].get(name.strip().lower())
            if found is not None:
                return found
        return Route(self.default, name)

    def set_loaded(self, entry: ModelEntry, backend: Backend) -> None:
        """Record a model loaded outside `acquire` (the default model at start)."""
        entry.backend = backend
        entry.last_used = time.monotonic()
        entry.previewed = ()

    def hold(self, entry: ModelEntry) -> None:
        """Count a use of an already loaded model (see `release`)."""
        entry.users += 1
        entry.last_used = time.monotonic()

    async def acquire(self, entry: ModelEntry) -> Backend:
        """The entry's backend, loading it first if needed (the caller waits; unloading the
        least recently used idle model when the bound is reached). Counts a use: call
        `release` when its synthesis has ended."""
        self.hold(entry)
        deadline = None if self.room_wait is None else time.monotonic() + self.room_wait
        try:
            while entry.backend is None:
                if entry.loading is None:
                    if self._resident() >= self.max_loaded:
                        # Then look again: another request may have loaded it meanwhile.
                        await self._free_one(entry, deadline)
                        continue
                    # No await between the check and this: the bound holds for concurrent loads.
                    entry.loading = asyncio.ensure_future(self._load(entry))
                    entry.loading.add_done_callback(_retrieve_failure)
                # Shielded: a request cancelled while waiting, or told of the load's trouble
                # (LoadFailed at once), leaves the shared load running for the next ones.
                await entry.trouble.wait(entry.loading, entry.label)
        except BaseException:
            self.release(entry)
            raise
        entry.last_used = time.monotonic()
        return entry.backend

    def release(self, entry: ModelEntry) -> None:
        entry.users = max(0, entry.users - 1)
        entry.last_used = time.monotonic()
        self._notify()

    def entry_of(self, backend: Backend) -> ModelEntry | None:
        return next((entry for entry in self.entries if entry.backend is backend), None)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def _resident(self) -> int:
        return sum(1 for entry in self.entries
                   if entry.backend is not None or entry.loading is not None or entry.unloading)  # fmt: skip

    async def _free_one(self, wanted: ModelEntry, deadline: float | None = None) -> None:
        """Unload the least recently used idle model, or wait for a change (a release, an
        unload) while every resident model is in use: none is unloaded during its synthesis.
        ModelBusy if `deadline` (time.monotonic) passes first."""
        idle = [entry for entry in self.loaded() if entry.users == 0 and entry is not wanted]
        if not idle:
            changed = self._changed
            _LOGGER.info("Model %s waits for a loaded model to finish its synthesis (at most %d loaded)",
                         wanted.name, self.max_loaded)  # fmt: skip
            left = None if deadline is None else deadline - time.monotonic()
            try:
                await asyncio.wait_for(changed.wait(), left)
            except asyncio.TimeoutError:
                busy = ", ".join(entry.label for entry in self.loaded() if entry is not wanted) or "another model"
                raise ModelBusy(f"model {wanted.label} cannot be loaded now: at most {self.max_loaded} "
                                f"loaded, and {busy} kept speaking for {self.room_wait:g} s") from None  # fmt: skip
            return
        await self._unload(min(idle, key=lambda entry: entry.last_used))

    async def _unload(self, entry: ModelEntry) -> None:
        backend = entry.backend
        if backend is None:
            return
        entry.backend = None
        entry.unloading = True
        started = time.monotonic()
        try:
            # The voice list while unloaded: what the library listed (re-read at the next describe).
            entry.previewed = tuple(backend.voices.voices)
            await asyncio.to_thread(_close_backend, backend)
            del backend  # the last reference: the model's tensors are freed here
            await asyncio.to_thread(release_memory)
        finally:
            entry.unloading = False
            self._notify()
        _LOGGER.info("Model %s unloaded in %.1f s (at most %d loaded)", entry.name,
                     time.monotonic() - started, self.max_loaded)  # fmt: skip

    async def _load(self, entry: ModelEntry) -> Backend:
        started = time.monotonic()
        _LOGGER.info("Loading model %s for a request (its first use, or unloaded since)", entry.name)
        # The hub's retries are reported through a context variable that watch_downloads
        # sets in the worker thread (to_thread runs it in a copy of this context).
        report = entry.trouble.reporter(asyncio.get_running_loop())
        try:
            backend = await asyncio.to_thread(load_watched, entry.loader, report)
        except Exception as err:
            _LOGGER.debug("Loading model %s failed", entry.name, exc_info=True)
            failure = load_failure(err, entry.label)
            # Once, not per request: its waiters may have left at the first retry. Its text,
            # not the exception: a kept record (pytest's) would keep its traceback alive.
            _LOGGER.warning("%s (the next request for it tries again)", str(failure))
            raise failure from err
        finally:
            entry.loading = None
            # Reports from the thread were queued before its result: none comes after this.
            entry.trouble.report(None)
            self._notify()  # a load waiting for room may take it now
        entry.backend = backend
        entry.previewed = ()
        _LOGGER.info("Model %s ready in %.1f s", entry.name, time.monotonic() - started)
        if self._on_loaded is not None:
            self._on_loaded(entry, backend)
        return backend

    async def close(self) -> None:
        """Stop every loaded model's background work (voice pre-encoding)."""
        for entry in self.entries:
            if entry.backend is not None:
                try:
                    await asyncio.to_thread(_close_backend, entry.backend)
                except Exception:  # noqa: BLE001
                    _LOGGER.debug("Closing the voices of model %s failed", entry.name, exc_info=True)


def _retrieve_failure(load: asyncio.Future[Backend]) -> None:
    """Mark a failed load's error as seen: `_load` logged it, and its waiters may all have
    left at a download's retry (asyncio would log it again, as never retrieved)."""
    if not load.cancelled():
        load.exception()


def _close_backend(backend: Backend) -> None:
    backend.voices.close()
