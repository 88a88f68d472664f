"""VoiceLibrary: the household's voices, kept ready in bounded memory.

How a request for a voice is served (`get`):
1. the in-memory LRU (a hit returns the very same VoiceState object: nothing is copied);
2. an encoding of that voice already in flight: wait for it (single flight);
3. otherwise encode it here: a recording first looks up the disk cache, and is encoded
   by the engine (then saved to the disk cache) only on a miss.

Bad voices: problems visible without encoding are dropped when the library is built (see
catalog.py). A voice whose encoding fails is marked failed (ERROR in the log, once), leaves
`voices`, and requests for it raise VoiceError (the client gets an `error` event saying
why, not someone else's voice); it is tried again when its file changes or after
FAILED_RETRY_S. An unknown name gets the default voice, with a WARNING. A request without
a voice never fails while some voice works: if the default fails, the next working voice
in list order stands in for it.

`refresh` re-reads the voices file and folder when one of their files changed (the server
calls it on `describe`), so a recording added to the folder is offered without a restart.
One refresh runs at a time; a describe arriving meanwhile takes the last list. A
recording deleted while we run keeps serving what was encoded from it while in memory.

A recording is read once (its first 30 s, see `engine.recording`), loudness normalised
(`loudness.py`) and hashed: the disk cache key is the hash of the very samples encoded.

Which threads read files: `refresh` runs in the thread that calls it (the server: the
event loop's default executor, shared with model loads), and stats files only but for
the headers of new voices, never blocking on a special file; `get` (the server's voice
executor) and the background encoders (threads of their own) read recordings and voice
states through the regular-file checks of `core.files`.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass

from wyoming_pocket_tts.core import ModelLike, VoiceError, VoiceInfo, VoiceStateLike
from wyoming_pocket_tts.core.logsafe import clip, escape
from wyoming_pocket_tts.engine.voice import FORMAT as ENGINE_VOICE_FORMAT

from .catalog import Catalog, build_catalog, sources_signature, voice_info
from .config import VoiceConfigError, VoiceLibraryConfig, VoiceSpec
from .disk_cache import CacheKey, DiskCache
from .memory import MIB, SharedVoiceCache, VoiceCache
from .recording import PROMPT_VERSION, PreparedRecording, prepare_recording


_LOGGER = logging.getLogger(__name__)

FAILED_RETRY_S = 300.0
# A client may send any name; the log shows this much of an unknown one.
MAX_LOGGED_NAME = 60
# Part of every disk cache key: bumped when what this package stores changes meaning; the
# engine's voice-state format and the prompt's preparation (loudness) are in the key too,
# so a new layout never loads an old file. 2: keyed by the prompt's hash, not the file's.
CACHE_LAYOUT_VERSION = "2"


Signature = tuple[int, int] | None


@dataclass(frozen=True)
class _Listing:
    """The voices as last read, replaced as a whole by `refresh` (readers take it once)."""

    specs: dict[str, VoiceSpec]
    by_lower: dict[str, str]
    default: str
    infos: dict[str, VoiceInfo]


@dataclass(frozen=True)
class _Failure:
    message: str
    # The message without the server's paths (VoiceError.public).
    public: str | None
    signature: Signature
    at: float

    def still_applies(self, signature: Signature, now: float) -> bool:
        return signature == self.signature and now - self.at < FAILED_RETRY_S


class VoiceLibrary:
    """Thread-safe: `get` may be called from many executor threads at once."""

    def __init__(self, model: ModelLike, config: VoiceLibraryConfig,
                 languages: Sequence[str] | None = None, cache: VoiceCache | None = None) -> None:
        self._model = model
        self._config = config
        # The server may know the language better than the model (--language, a config's
        # paths); every voice is offered in these.
        self._languages = tuple(languages) if languages else tuple(model.languages)
        # Taken before the files are read: a change made while reading shows at the next refresh.
        self._sources = sources_signature(config)
        catalog = build_catalog(config, tuple(model.predefined_voices), model.name)
        self._listing = self._make_listing(catalog)

        self._lock = threading.Lock()
        # One refresh at a time (describes from several clients may arrive together).
        self._refresh_lock = threading.Lock()
        # The server's voices in memory, shared by its models' libraries (see memory.py);
        # a library on its own (tests, benchmarks) gets one of the configured size.
        self._cache = cache or SharedVoiceCache(config.cache_size, config.cache_mb).for_model(model.name)
        self._cache.pin(self._default)
        self._disk = DiskCache(config.disk_cache_dir, int(config.disk_cache_mb * MIB))
        # Encodings in progress, with the source's signature they started from.
        self._inflight: dict[str, tuple[Future[VoiceStateLike], Signature]] = {}
        self._failures: dict[str, _Failure] = {}
        self._format = f"{CACHE_LAYOUT_VERSION}/{ENGINE_VOICE_FORMAT}/{PROMPT_VERSION}"

        self._stop = threading.Event()
        # Background encoders: the start's pre-encoding, then one per refresh that adds voices.
        self._threads: list[threading.Thread] = []

        recordings = [spec.name for spec in catalog.voices if spec.kind == "recording"]
        if recordings and not model.can_clone:
            _LOGGER.warning(
                "model %s cannot clone voices (the weights with voice cloning are not available): "
                "recorded voices %s work only if already in the disk cache %s",
                model.name,
                escape(", ".join(recordings)),
                escape(self._disk.directory),
            )
        _LOGGER.info("voices: %s (default %s)", escape(", ".join(self._specs)), escape(self._default))

    @property
    def _specs(self) -> dict[str, VoiceSpec]:
        return self._listing.specs

    @property
    def _default(self) -> str:
        return self._listing.default

    def _make_listing(self, catalog: Catalog) -> _Listing:
        specs = {spec.name: spec for spec in catalog.voices}
        return _Listing(
            specs=specs,
            by_lower={name.lower(): name for name in specs},
            default=catalog.default,
            infos={spec.name: voice_info(spec, self._languages) for spec in catalog.voices},
        )

    # -- public API ---------------------------------------------------------------------

    @property
    def voices(self) -> list[VoiceInfo]:
        """Every available voice, default first; voices whose encoding failed are left out."""
        listing = self._listing
        with self._lock:
            failed = set(self._failures)
        default = self.default_name
        names = [default] + [name for name in listing.specs if name != default and name not in failed]
        return [listing.infos[name] for name in names if name in listing.infos]

    @property
    def default_name(self) -> str:
        """The default voice, or the voice standing in for it if it failed."""
        with self._lock:
            failed = set(self._failures)
        for name in self._default_candidates():
            if name not in failed:
                return name
        return self._default

    def get(self, name: str | None = None) -> tuple[str, VoiceStateLike]:
        """The voice `name` (None: the default) and its state. Blocking: run it in an executor."""
        if not name:  # clients send no voice, or an empty name, to mean "the default"
            return self._get_default()
        spec = self._lookup(name)
        if spec is None:
            _LOGGER.warning("unknown voice %s requested; using the default voice %s",
                            clip(repr(name), MAX_LOGGED_NAME), self.default_name)  # fmt: skip
            return self._get_default()
        if spec.name == self._default:
            return self._get_default()  # its own fallback chain if the default failed
        # A voice the user chose and that cannot be made is an error (VoiceError), not
        # silently someone else's voice: the client hears why.
        return spec.name, self._obtain(spec)

    def start_preencoding(self) -> None:
        """Encode the default voice, then every declared voice, in a background thread."""
        if self._threads:
            return
        listing = self._listing
        order = [listing.specs[listing.default]] + [
            spec for spec in listing.specs.values() if spec.declared and spec.name != listing.default
        ]
        self._start_encoding(order, "voice-preencoding")

    def wait_preencoding(self, timeout: float | None = None) -> bool:
        """Block until background encoding has finished (for tests and the benchmark)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in list(self._threads):
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return not any(thread.is_alive() for thread in self._threads)

    def refresh(self, wait: bool = False) -> bool:
        """Re-read the voices file and folder if one of their files changed (a stat of each,
        see `sources_signature`); returns True if the list of voices changed.

        Added voices are encoded in the background; removed ones leave the list and memory.
        A file that became unusable as a whole (bad YAML, no voice left) keeps the old list,
        with an ERROR. Blocking (it may read recording headers): run it off the event loop.
        While another refresh runs, returns False at once (the caller takes the last list),
        unless `wait`: then it waits for it and looks again (for a writer of the voices file
        or folder that must see its own change, such as the web page).
        """
        if not self._refresh_lock.acquire(blocking=wait):
            return False
        try:
            return self._refresh()
        finally:
            self._refresh_lock.release()

    def _refresh(self) -> bool:
        signature = sources_signature(self._config)
        if signature == self._sources:
            return False
        # Recorded first: a broken file is reported once, not at every describe.
        self._sources = signature
        try:
            catalog = build_catalog(self._config, tuple(self._model.predefined_voices), self._model.name)
        except VoiceConfigError as err:
            _LOGGER.error("voices changed but cannot be used (%s); keeping the previous voices", err)
            return False
        before = self._listing
        listing = self._make_listing(catalog)
        added = [spec for name, spec in listing.specs.items() if before.specs.get(name) != spec]
        removed = [name for name in before.specs if name not in listing.specs]
        with self._lock:
            self._listing = listing
            for name in removed:
                self._cache.remove(name)
                self._failures.pop(name, None)
            for spec in added:
                self._failures.pop(spec.name, None)
            self._cache.pin(listing.default)
        if not added and not removed and listing.default == before.default:
            return False
        _LOGGER.info(
            "voices re-read: %d voice(s), default %s; added %s; removed %s",
            len(listing.specs), escape(listing.default),
            escape(", ".join(spec.name for spec in added)) or "none", escape(", ".join(removed)) or "none",
        )  # fmt: skip
        wanted = [spec for spec in added if spec.declared or spec.name == listing.default]
        if wanted and not self._stop.is_set():
            self._start_encoding(wanted, "voice-encoding")
        return True

    def close(self) -> None:
        """Stop background work (the encoding in progress ends, the others are not started)
        and give back the memory of this library's voices (the model is being unloaded, or
        the server stops): from now on nothing encoded is kept in memory."""
        self._stop.set()
        for thread in self._threads:
            if thread is threading.current_thread():
                continue
            thread.join(timeout=30)
            if thread.is_alive():
                _LOGGER.warning("voice pre-encoding still running at shutdown")
        with self._lock:
            self._cache.clear()

    def encoding_state(self, name: str) -> tuple[str, str | None]:
        """How far voice `name` is, for the voices page: "ready" (in memory), "encoding",
        "failed" (and why), or "pending" (encoded, or loaded from the disk cache, at its
        first use or by the background encoding)."""
        with self._lock:
            if name in self._cache:
                return "ready", None
            if name in self._inflight:
                return "encoding", None
            failure = self._failures.get(name)
            if failure is not None:
                return "failed", failure.message
        return "pending", None

    def cached_names(self) -> list[str]:
        """Voices in memory, least recently used first (diagnostics, tests, benchmark)."""
        with self._lock:
            return self._cache.keys()

    def cached_bytes(self) -> int:
        with self._lock:
            return self._cache.total_bytes

    # -- lookup and fallback ------------------------------------------------------------

    def _lookup(self, name: str) -> VoiceSpec | None:
        listing = self._listing
        spec = listing.specs.get(name)
        if spec is None:
            # Names are unique ignoring case, so a case-insensitive match is unambiguous.
            real = listing.by_lower.get(name.strip().lower())
            spec = listing.specs.get(real) if real is not None else None
        return spec

    def _default_candidates(self) -> list[str]:
        listing = self._listing
        return [listing.default] + [name for name in listing.specs if name != listing.default]

    def _get_default(self) -> tuple[str, VoiceStateLike]:
        errors: list[VoiceError] = []
        listing = self._listing
        for name in self._default_candidates():
            spec = listing.specs.get(name)
            if spec is None:
                continue  # removed by a refresh meanwhile
            try:
                state = self._obtain(spec)
            except VoiceError as err:
                errors.append(err)
                continue
            if name != self._default:
                _LOGGER.warning(
                    "default voice %r is unavailable (%s); using %r instead", self._default, errors[0], name
                )
            return name, state
        first = errors[0] if errors else VoiceError("unknown")
        raise VoiceError(f"no voice can be made; default voice: {first}",
                         public=f"no voice can be made; default voice: {first.public or first}")  # fmt: skip

    # -- single-flight encoding -----------------------------------------------------------

    def _obtain(self, spec: VoiceSpec, *, evict: bool = True) -> VoiceStateLike:
        signature = _signature(spec)
        with self._lock:
            failure = self._failures.get(spec.name)
            if failure is not None:
                if failure.still_applies(signature, time.monotonic()):
                    raise VoiceError(failure.message, failure.public)
                del self._failures[spec.name]
            entry = self._cache.get(spec.name)
            if entry is not None:
                if entry.tag == signature or signature is None:
                    # Same file, or the file is gone (deleted while we run): what was
                    # encoded from it is still this voice.
                    return entry.value
                # The file changed since it was encoded: serve the new content.
                _LOGGER.info("voice %r: %s changed; encoding it again", spec.name, escape(spec.path))
                self._cache.remove(spec.name)
            inflight = self._inflight.get(spec.name)
            owner = inflight is None
            if inflight is None:
                inflight = (Future(), signature)
                self._inflight[spec.name] = inflight
        future, started_from = inflight
        if not owner:
            state = future.result()  # raises the owner's exception, e.g. VoiceError
            if evict:
                # The owner may be pre-encoding, which never evicts: a request does.
                with self._lock:
                    if spec.name not in self._cache and not self._stop.is_set():
                        self._cache.put(spec.name, state, state.nbytes, started_from)
            return state

        try:
            state = self._make(spec)
        except VoiceError as err:
            with self._lock:
                self._failures[spec.name] = _Failure(str(err), err.public, signature, time.monotonic())
                del self._inflight[spec.name]
            _LOGGER.error("%s", err)
            future.set_exception(err)
            raise
        except BaseException as err:
            # Not the voice's fault (a bug, memory): not remembered, the next request retries.
            with self._lock:
                del self._inflight[spec.name]
            future.set_exception(err)
            raise
        with self._lock:
            if not self._stop.is_set():  # closed: an encoding that ended late is not kept
                self._cache.put(spec.name, state, state.nbytes, signature, evict=evict)
            del self._inflight[spec.name]
        future.set_result(state)
        return state

    def _make(self, spec: VoiceSpec) -> VoiceStateLike:
        started = time.perf_counter()
        try:
            if spec.kind == "predefined":
                state = self._model.voice_from_predefined(spec.name)
                how = "loaded"
            elif spec.kind == "state":
                assert spec.path is not None
                state = self._model.voice_from_file(spec.path)
                how = "loaded"
            else:
                state, how = self._make_from_recording(spec)
        except VoiceError as err:
            raise VoiceError(f"{spec.where()}: {err}", public=_public_reason(spec, err)) from err
        _LOGGER.info(
            "voice %r %s in %.0f ms (%.1f MB)",
            spec.name,
            how,
            (time.perf_counter() - started) * 1000,
            state.nbytes / MIB,
        )
        return state

    def _make_from_recording(self, spec: VoiceSpec) -> tuple[VoiceStateLike, str]:
        # Read once: the key and the encoding are of the same samples, whatever happens
        # to the file meanwhile (replaced, rewritten, deleted).
        prompt = self._prepare(spec)
        key = self._key(prompt)
        state = self._disk.load(key, self._model.voice_from_file)
        if state is not None:
            return state, "loaded from the disk cache"
        state = self._model.voice_from_audio(prompt.samples)
        self._disk.save(key, state, self._model.save_voice)
        return state, f"encoded from the recording ({prompt.seconds:.1f} s read, {prompt.loudness.describe()})"

    def _prepare(self, spec: VoiceSpec) -> PreparedRecording:
        assert spec.path is not None
        return prepare_recording(spec.path, self._model.sample_rate)

    def _key(self, prompt: PreparedRecording) -> CacheKey:
        # The precision too: int8 encodes the same recording into a slightly other state.
        return CacheKey(self._model.model_id, prompt.sha256, f"{self._format}/{self._model.precision}")

    # -- background pre-encoding --------------------------------------------------------

    def _start_encoding(self, specs: list[VoiceSpec], thread_name: str) -> None:
        self._threads = [thread for thread in self._threads if thread.is_alive()]
        thread = threading.Thread(target=self._preencode, args=(specs,), name=thread_name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _preencode(self, order: list[VoiceSpec]) -> None:
        for spec in order:
            if self._stop.is_set():
                return
            try:
                self._preencode_one(spec)
            except VoiceError:
                pass  # logged by _obtain; the voice is marked failed
            except Exception:  # noqa: BLE001 - one voice's surprise must not stop the others
                _LOGGER.exception("pre-encoding %s failed", spec.where())
        _LOGGER.info("voice pre-encoding done; %d voice(s) in memory", len(self.cached_names()))

    def _preencode_one(self, spec: VoiceSpec) -> None:
        with self._lock:
            if spec.name in self._cache:
                return
            room = self._cache.has_room()
        if spec.name == self._default or room:
            # Warming must not push out voices already in use: evict=False.
            self._obtain(spec, evict=spec.name == self._default)
            return
        # Memory is full: only make sure a recording's encoding is on disk for later.
        if spec.kind == "recording" and self._disk.enabled:
            if not self._disk.contains(self._key(self._prepare(spec))):
                self._obtain(spec, evict=False)


def _public_reason(spec: VoiceSpec, err: VoiceError) -> str:
    """Why a voice cannot be made, for a client: its file by name only, not its path."""
    reason = str(err)
    if spec.path is not None:
        for shown in {escape(spec.path), str(spec.path)}:
            reason = reason.replace(shown, escape(spec.path.name))
    return f"voice {spec.name!r}: {reason}"


def _signature(spec: VoiceSpec) -> Signature:
    """Size and date of the voice's file, to notice it changed (None: no file or gone)."""
    if spec.path is None:
        return None
    try:
        stat = os.stat(spec.path)
    except OSError:
        return None
    return (stat.st_mtime_ns, stat.st_size)

