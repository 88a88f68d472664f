"""VoiceLibrary: the household's voices, kept ready in bounded memory.

How a request for a voice is served (`get`):
1. the in-memory LRU (a hit returns the very same VoiceState object: nothing is copied);
2. an encoding of that voice already in flight: wait for it (single flight);
3. otherwise encode it here: a recording first looks up the disk cache, and is encoded
   by the engine (then saved to the disk cache) only on a miss.

Bad voices: problems visible without encoding are dropped when the library is built (see
catalog.py). A voice whose encoding fails is marked failed (ERROR in the log, once), leaves
`voices`, and requests for it get the default voice with a WARNING; it is tried again when
its file changes or after FAILED_RETRY_S. If the default itself fails, the next working
voice in list order stands in for it; VoiceError only when no voice can be made at all.
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
from wyoming_pocket_tts.engine.voice import FORMAT as ENGINE_VOICE_FORMAT
from wyoming_pocket_tts.server.logsafe import clip

from .catalog import build_catalog
from .config import VoiceLibraryConfig, VoiceSpec
from .disk_cache import CacheKey, DiskCache
from .lru import BoundedLRU
from .recording import check_recording, file_sha256


_LOGGER = logging.getLogger(__name__)

FAILED_RETRY_S = 300.0
# Part of every disk cache key: bumped when what this package stores changes meaning; the
# engine's voice-state format is in the key too, so a new layout never loads an old file.
CACHE_LAYOUT_VERSION = "1"
_MB = 1024 * 1024
_PREDEFINED_ATTRIBUTION = ("Kyutai", "https://huggingface.co/kyutai/tts-voices")


Signature = tuple[int, int] | None


@dataclass(frozen=True)
class _Failure:
    message: str
    signature: Signature
    at: float

    def still_applies(self, signature: Signature, now: float) -> bool:
        return signature == self.signature and now - self.at < FAILED_RETRY_S


class VoiceLibrary:
    """Thread-safe: `get` may be called from many executor threads at once."""

    def __init__(self, model: ModelLike, config: VoiceLibraryConfig,
                 languages: Sequence[str] | None = None) -> None:  # fmt: skip
        """`languages`: those advertised for every voice; None: the model's."""
        self._model = model
        self._languages = tuple(languages) if languages is not None else tuple(model.languages)
        catalog = build_catalog(config, tuple(model.predefined_voices), model.name)
        self._specs: dict[str, VoiceSpec] = {spec.name: spec for spec in catalog.voices}
        self._by_lower = {name.lower(): name for name in self._specs}
        self._default = catalog.default
        self._infos = {spec.name: self._info(spec) for spec in catalog.voices}

        self._lock = threading.Lock()
        max_bytes = int(config.cache_mb * _MB) if config.cache_mb is not None else None
        self._cache: BoundedLRU[str, VoiceStateLike] = BoundedLRU(config.cache_size, max_bytes)
        self._cache.pin(self._default)
        self._disk = DiskCache(config.disk_cache_dir, int(config.disk_cache_mb * _MB))
        # Encodings in progress, with the source's signature they started from.
        self._inflight: dict[str, tuple[Future[VoiceStateLike], Signature]] = {}
        self._failures: dict[str, _Failure] = {}
        self._format = f"{CACHE_LAYOUT_VERSION}/{ENGINE_VOICE_FORMAT}"

        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

        recordings = [spec.name for spec in catalog.voices if spec.kind == "recording"]
        if recordings and not model.can_clone:
            _LOGGER.warning(
                "model %s cannot clone voices (the weights with voice cloning are not available): "
                "recorded voices %s work only if already in the disk cache %s",
                model.name,
                ", ".join(recordings),
                self._disk.directory,
            )
        _LOGGER.info("voices: %s (default %s)", ", ".join(self._specs), self._default)

    # -- public API ---------------------------------------------------------------------

    @property
    def voices(self) -> list[VoiceInfo]:
        """Every available voice, default first; voices whose encoding failed are left out."""
        with self._lock:
            failed = set(self._failures)
        default = self.default_name
        names = [default] + [name for name in self._specs if name != default and name not in failed]
        return [self._infos[name] for name in names]

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
            _LOGGER.warning("unknown voice %s requested; using the default voice", clip(repr(name)))
            return self._get_default()
        if spec.name == self._default:
            return self._get_default()  # its own fallback chain if the default failed
        try:
            return spec.name, self._obtain(spec)
        except VoiceError as err:
            _LOGGER.warning("voice %r is unavailable (%s); using the default voice", spec.name, err)
            return self._get_default()

    def start_preencoding(self) -> None:
        """Encode the default voice, then every declared voice, in a background thread."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._preencode, name="voice-preencoding", daemon=True)
        self._thread.start()

    def wait_preencoding(self, timeout: float | None = None) -> bool:
        """Block until pre-encoding has finished (for tests and the benchmark)."""
        if self._thread is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def close(self) -> None:
        """Stop background work: the encoding in progress ends, the others are not started."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=30)
            if self._thread.is_alive():
                _LOGGER.warning("voice pre-encoding still running at shutdown")

    def cached_names(self) -> list[str]:
        """Voices in memory, least recently used first (diagnostics, tests, benchmark)."""
        with self._lock:
            return self._cache.keys()

    def cached_bytes(self) -> int:
        with self._lock:
            return self._cache.total_bytes

    # -- lookup and fallback ------------------------------------------------------------

    def _lookup(self, name: str) -> VoiceSpec | None:
        spec = self._specs.get(name)
        if spec is None:
            # Names are unique ignoring case, so a case-insensitive match is unambiguous.
            real = self._by_lower.get(name.strip().lower())
            spec = self._specs.get(real) if real is not None else None
        return spec

    def _default_candidates(self) -> list[str]:
        return [self._default] + [name for name in self._specs if name != self._default]

    def _get_default(self) -> tuple[str, VoiceStateLike]:
        errors: list[str] = []
        for name in self._default_candidates():
            try:
                state = self._obtain(self._specs[name])
            except VoiceError as err:
                errors.append(str(err))
                continue
            if name != self._default:
                _LOGGER.warning(
                    "default voice %r is unavailable (%s); using %r instead", self._default, errors[0], name
                )
            return name, state
        raise VoiceError(f"no voice can be made; default voice: {errors[0] if errors else 'unknown'}")

    # -- single-flight encoding -----------------------------------------------------------

    def _obtain(self, spec: VoiceSpec, *, evict: bool = True) -> VoiceStateLike:
        signature = _signature(spec)
        with self._lock:
            failure = self._failures.get(spec.name)
            if failure is not None:
                if failure.still_applies(signature, time.monotonic()):
                    raise VoiceError(failure.message)
                del self._failures[spec.name]
            entry = self._cache.get(spec.name)
            if entry is not None:
                if entry.tag == signature:
                    return entry.value
                # The file changed since it was encoded: serve the new content.
                _LOGGER.info("voice %r: %s changed; encoding it again", spec.name, spec.path)
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
                    if spec.name not in self._cache:
                        self._cache.put(spec.name, state, state.nbytes, started_from)
            return state

        try:
            state = self._make(spec)
        except VoiceError as err:
            with self._lock:
                self._failures[spec.name] = _Failure(str(err), signature, time.monotonic())
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
            raise VoiceError(f"{spec.where()}: {err}") from err
        _LOGGER.info(
            "voice %r %s in %.0f ms (%.1f MB)",
            spec.name,
            how,
            (time.perf_counter() - started) * 1000,
            state.nbytes / _MB,
        )
        return state

    def _make_from_recording(self, spec: VoiceSpec) -> tuple[VoiceStateLike, str]:
        assert spec.path is not None
        key = CacheKey(self._model.model_id, file_sha256(spec.path), self._format)
        state = self._disk.load(key, self._model.voice_from_file)
        if state is not None:
            return state, "loaded from the disk cache"
        check_recording(spec.path)
        state = self._model.voice_from_recording(spec.path)
        self._disk.save(key, state, self._model.save_voice)
        return state, "encoded from the recording"

    # -- background pre-encoding --------------------------------------------------------

    def _preencode(self) -> None:
        order = [self._specs[self._default]] + [
            spec for spec in self._specs.values() if spec.declared and spec.name != self._default
        ]
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
            assert spec.path is not None
            key = CacheKey(self._model.model_id, file_sha256(spec.path), self._format)
            if not self._disk.contains(key):
                self._obtain(spec, evict=False)

    def _info(self, spec: VoiceSpec) -> VoiceInfo:
        return voice_info(spec, self._languages)


def voice_info(spec: VoiceSpec, languages: Sequence[str]) -> VoiceInfo:
    """How a voice is presented to clients."""
    if spec.kind == "predefined":
        description = spec.description or spec.name.replace("_", " ").title()
        attribution_name, attribution_url = _PREDEFINED_ATTRIBUTION
    else:
        description = spec.description or spec.name
        attribution_name = attribution_url = None
    return VoiceInfo(
        name=spec.name,
        description=description,
        languages=tuple(languages),
        kind=spec.kind,
        attribution_name=attribution_name,
        attribution_url=attribution_url,
        settings=spec.settings,
    )


def preview_voices(config: VoiceLibraryConfig, model_name: str, predefined: tuple[str, ...],
                   languages: Sequence[str]) -> list[VoiceInfo]:
    """The voices a library will offer, known before the model is loaded (or downloaded):
    lets `describe` list them while the weights are still on their way."""
    return [voice_info(spec, languages) for spec in build_catalog(config, predefined, model_name).voices]


def _signature(spec: VoiceSpec) -> Signature:
    """Size and date of the voice's file, to notice it changed (None: no file or gone)."""
    if spec.path is None:
        return None
    try:
        stat = os.stat(spec.path)
    except OSError:
        return None
    return (stat.st_mtime_ns, stat.st_size)

