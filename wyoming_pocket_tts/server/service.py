"""What every connection shares: the models, the voices, the scheduler, the workers.

The server listens before the model exists: loading (importing torch, maybe downloading
weights) runs in a daemon thread started by `TtsService.start`, and requests that need the
model await `wait_ready()`. `describe` never needs it. The engine and the voices library are
only imported inside that thread, so `--help`, `--version` and the first `describe` do not
wait for torch. That is the default voice's model; a server with several models (see
`models.ModelPool`) loads the others when a request first needs one, and may unload them.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import threading
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field, replace
from typing import Any

from wyoming.info import Info

from ..core import GenerationOptions, ModelLike, VoiceInfo, VoiceSource, VoiceStateLike
from ..core.errors import HubUnavailableError
from ..settings import BY_NAME, Scope, check_fields, default
from .info import build_info
from .loading import error_text, load_failure, load_watched
from .models import ModelEntry, ModelPool
from .scheduler import Priority, SynthesisScheduler

_LOGGER = logging.getLogger(__name__)

# How long a describe waits for the voices files to be re-read; Home Assistant gives up at 1 s.
DESCRIBE_REFRESH_WAIT_S = 0.5
# The first preview is awaited longer: without it the info would have no voices.
FIRST_PREVIEW_WAIT_S = 5.0
# The first wait before the model's download is tried again (the hub unreachable); it
# doubles at each failure, up to TtsService.download_retry_max_s.
FIRST_DOWNLOAD_RETRY_S = 5.0


@dataclass(frozen=True)
class ReplyOptions:
    """How the server shapes a reply around the engine: text as words, speaking rate, pauses.

    The settings of scope "reply" (`wyoming_pocket_tts.settings`), server-wide or per voice.
    """

    length_scale: float = default("length_scale")
    sentence_silence: float = default("sentence_silence")
    # Rewrite numbers, units, markdown and emoji as words first (`wyoming_pocket_tts.text`).
    normalize: bool = default("normalize")

    def __post_init__(self) -> None:
        check_fields("reply", self)


@dataclass
class Backend:
    """The loaded model and its voice library."""

    model: ModelLike
    voices: VoiceSource
    options: GenerationOptions
    reply: ReplyOptions = ReplyOptions()
    # The voices' languages as the server announces them (--language, the catalog...).
    languages: tuple[str, ...] = ()

    def settings_for(self, voice_name: str) -> VoiceSettings:
        """What a request in this voice is spoken with (a name the voices do not hold: the server's).

        Reads the voice list once: the handler needs all three values for every request.
        """
        voice = next((voice for voice in self.voices.voices if voice.name == voice_name), None)
        generation = _own_settings(voice, "generation")
        reply = _own_settings(voice, "reply")
        if voice is not None and voice.languages:
            language = voice.languages[0]
        else:
            language = (self.languages or tuple(self.model.languages) or ("en",))[0]
        return VoiceSettings(
            options=replace(self.options, **generation) if generation else self.options,
            reply=replace(self.reply, **reply) if reply else self.reply,
            language=language,
        )


@dataclass(frozen=True)
class VoiceSettings:
    """The server's settings under one voice's own (voices file), and the voice's language."""

    options: GenerationOptions
    reply: ReplyOptions
    # The language the voice's text is read in: the voice's, else the model's, else en.
    language: str


def _own_settings(voice: VoiceInfo | None, scope: Scope) -> dict[str, Any]:
    """The voices file's settings of `voice` that belong to `scope`, by field."""
    if voice is None:
        return {}
    chosen = (BY_NAME[name] for name in voice.settings)
    return {s.field_name: voice.settings[s.name] for s in chosen if s.scope == scope}


def language_match(wanted: str, offered: str) -> int:
    """How well language `offered` serves a request for `wanted`: 2 the same ("de-de" for
    "de_DE"), 1 the same language ("de" for "de-AT"), 0 another."""
    wanted_tag, offered_tag = (code.strip().replace("_", "-").lower() for code in (wanted, offered))
    if not wanted_tag or not offered_tag:
        return 0
    if wanted_tag == offered_tag:
        return 2
    return 1 if wanted_tag.split("-")[0] == offered_tag.split("-")[0] else 0


Loader = Callable[[], Backend]
# Runs in a synthesis worker: (backend, default voice, cancel event) -> seconds of audio.
Warmup = Callable[[Backend, VoiceStateLike, threading.Event], float]


@dataclass
class TtsService:
    """Shared state of the server; all methods are called on the event loop."""

    model_name: str
    loader: Loader
    scheduler: SynthesisScheduler
    synth_executor: Executor
    voice_executor: Executor
    # Run once the model is ready, under a scheduler slot like a request: the first
    # synthesis after start pays one-off costs that should not fall on a user's request.
    # It runs at the lowest priority and a request pre-empts it (see `_warm_up`).
    warmup: Warmup | None = None
    # Lists the voices without the model (torch-free, no download; re-reads the voices
    # files when they changed), so that every `describe` while the model loads (or
    # downloads) lists the voices that will be served, with their languages.
    previewer: Callable[[], Sequence[VoiceInfo]] | None = None
    # The server's other models (`--model` given several times), loaded on first use, and
    # how many models may be resident at once (see `models.ModelPool`).
    more_models: Sequence[ModelEntry] = ()
    max_loaded_models: int = 1
    # How long a request waits for a resident model to be free (to load its voice's model
    # in its place); None: as long as it takes. The server gives --max-queue-wait.
    model_wait: float | None = None
    # Where long client text is parsed and cut into sentences, off the event loop (see
    # text_work); None: the loop's default executor.
    text_executor: Executor | None = None
    # The longest wait between two attempts to load the default voice's model while the
    # hub cannot be reached (HubUnavailableError); the server answers meanwhile.
    download_retry_max_s: float = default("download_retry_max")
    _pool: ModelPool | None = field(default=None, init=False)
    _first_loaded: bool = field(default=False, init=False)
    _preview_done: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    _preview_task: asyncio.Task[None] | None = field(default=None, init=False)
    # Resolved (with None: the pool holds the backend, so that unloading frees it) once
    # the default voice's model has loaded for the first time.
    _ready: asyncio.Future[None] | None = field(default=None, init=False)
    _loader_thread: threading.Thread | None = field(default=None, init=False)
    _stopping: threading.Event = field(default_factory=threading.Event, init=False)
    _warmup_task: asyncio.Task[None] | None = field(default=None, init=False)
    # The other models' warm-ups, one per load.
    _more_warmups: set[asyncio.Task[None]] = field(default_factory=set, init=False)
    _warmup_cancels: set[threading.Event] = field(default_factory=set, init=False)
    # Re-reads of the voices asked for by SIGHUP, while they run.
    _rescans: set[asyncio.Task[None]] = field(default_factory=set, init=False)
    # The task of every open connection, so that shutdown can wait for their cleanup.
    connections: set[asyncio.Task[None]] = field(default_factory=set, init=False)
    _request_ids: Iterator[int] = field(default_factory=lambda: itertools.count(1), init=False)

    def next_request_id(self) -> int:
        """Numbers requests in the log, across connections."""
        return next(self._request_ids)

    @property
    def pool(self) -> ModelPool:
        assert self._pool is not None, "start() was not called"
        return self._pool

    @property
    def program_name(self) -> str:
        """The model(s) named in `describe`'s program description."""
        if self._pool is None or not self._pool.several:
            return self.model_name
        return ", ".join(entry.label for entry in self._pool.entries)

    def start(self) -> asyncio.Future[None]:
        """Start loading in a background thread; the future fails with LoadFailed."""
        loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        ready = self._ready
        default_entry = ModelEntry(self.model_name, (), self.loader, self.previewer)
        self._pool = ModelPool([default_entry, *self.more_models], self.max_loaded_models, self._loaded,
                               room_wait=self.model_wait)  # fmt: skip
        pool = self._pool

        def deliver(backend: Backend | None, error: BaseException | None) -> None:
            if ready.done():
                return
            if error is not None:
                ready.set_exception(error)
                return
            assert backend is not None
            default_entry.trouble.report(None)  # a retried file that never arrived, yet it loaded
            pool.set_loaded(default_entry, backend)
            self._first_loaded = True
            ready.set_result(None)
            if self.warmup is not None:
                self._warmup_task = loop.create_task(self._warm_up(default_entry, backend), name="warm-up")

        # Why loading is failing right now (a download being retried): requests get it at once.
        report_trouble = default_entry.trouble.reporter(loop)

        def load() -> None:
            started = time.monotonic()
            try:
                backend = self._load_until_downloaded(report_trouble)
            except BaseException as err:  # noqa: BLE001 - reported to the user as one line
                _LOGGER.debug("Loading failed", exc_info=True)
                outcome: tuple[Backend | None, BaseException | None] = (None, load_failure(err))
            else:
                _LOGGER.info("Model %s ready in %.1f s", self.model_name, time.monotonic() - started)
                outcome = (backend, None)
            try:
                loop.call_soon_threadsafe(deliver, *outcome)
            except RuntimeError:
                pass  # the loop was closed while we loaded (shutdown)

        if self.previewer is not None or pool.several:
            # Its own thread, not the loader's: the first describe must not wait for torch.
            self._preview_task = loop.create_task(self._refresh_preview(), name="voice preview")
        else:
            self._preview_done.set()
        # A daemon thread: a download in progress must not keep a stopping server alive
        # (see `loading`: the caller then exits without waiting for it).
        self._loader_thread = threading.Thread(target=load, name="model-loader", daemon=True)
        self._loader_thread.start()
        return ready

    def _load_until_downloaded(self, report_trouble: Callable[[str | None], None]) -> Backend:
        """The loader's backend (in the loader thread). While the hub cannot be reached, the
        load is tried again after a wait that doubles up to `download_retry_max_s`, and
        `report_trouble` tells the waiting requests why: a hub outage at boot leaves a
        server that answers and starts speaking by itself once the hub is back, where it
        used to exit (and an add-on without a watchdog stayed stopped)."""
        delay = min(FIRST_DOWNLOAD_RETRY_S, self.download_retry_max_s)
        while True:
            try:
                return load_watched(self.loader, report_trouble)
            except HubUnavailableError as err:
                if self._stopping.is_set():
                    raise
                reason = f"the Hugging Face hub cannot be reached ({error_text(err)}); trying again in {delay:g} s"
                _LOGGER.warning("Model %s: %s", self.model_name, reason)
                report_trouble(reason)
                if self._stopping.wait(delay):
                    raise
                # A new attempt: requests wait for it, as at the first start, rather than be
                # told of the last failure while the hub may be back (the download's own
                # retries report a failure again at once).
                report_trouble(None)
                delay = min(delay * 2, self.download_retry_max_s)

    async def _refresh_preview(self) -> None:
        # Every model's list: the default's preview, the others' preview or library.
        try:
            await asyncio.to_thread(self.pool.refresh)
        except Exception:  # noqa: BLE001 -- loading the library reports the problem
            _LOGGER.debug("Voice preview failed", exc_info=True)
        finally:
            self._preview_done.set()

    def _loaded(self, entry: ModelEntry, backend: Backend) -> None:
        """A model other than at start was loaded: warm it up like the first (bounded,
        pre-empted by the request that is waiting for it, if any)."""
        if self.warmup is not None and not self._stopping.is_set():
            task = asyncio.get_running_loop().create_task(self._warm_up(entry, backend), name="warm-up")
            self._more_warmups.add(task)
            task.add_done_callback(self._more_warmups.discard)

    async def _warm_up(self, entry: ModelEntry, backend: Backend) -> None:
        """Run the warm-up unless a request came first; a request arriving during it
        pre-empts it (it stops within a frame), so it never delays anyone. It counts as a
        use of the model, which is not unloaded under it."""
        assert self.warmup is not None
        loop = asyncio.get_running_loop()
        cancel = threading.Event()
        self.pool.hold(entry)
        try:
            # The default voice first (it may be encoding), outside the slot like a request.
            _, voice = await self.get_voice(backend, None)
            stats = self.scheduler.stats
            if stats.running or stats.waiting or self._stopping.is_set():
                _LOGGER.debug("Warm-up skipped: a request already runs")
                return
            async with self.scheduler.slot(Priority.BACKGROUND, preempt=cancel.set):
                if self._stopping.is_set():
                    return
                self._warmup_cancels.add(cancel)  # set by stopping()
                await loop.run_in_executor(self.synth_executor, self.warmup, backend, voice, cancel)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - a failed warm-up only costs latency
            _LOGGER.warning("Warm-up failed", exc_info=True)
        finally:
            self._warmup_cancels.discard(cancel)
            self.pool.release(entry)

    @property
    def loading(self) -> bool:
        """True while the loader thread still runs (torch may be busy in it)."""
        return self._loader_thread is not None and self._loader_thread.is_alive()

    @property
    def backend(self) -> Backend | None:
        """The default voice's model, while it is loaded."""
        return self._pool.default.backend if self._pool is not None else None

    async def wait_ready(self) -> Backend:
        """The default voice's model, once loaded (loaded again if it was unloaded for
        another model). Raises LoadFailed like `wait_first_load`."""
        await self.wait_first_load()
        return await self._default_backend()

    async def wait_first_load(self) -> None:
        """Return once the default voice's model has loaded for the first time. Raises
        LoadFailed: at once while loading is failing (a download being retried), or when
        it failed."""
        if self._first_loaded:
            return
        assert self._ready is not None, "start() was not called"
        default_entry = self.pool.default
        await default_entry.trouble.wait(self._ready, default_entry.label if self.pool.several else None)

    async def _default_backend(self) -> Backend:
        entry = self.pool.default
        if entry.backend is not None:
            return entry.backend
        backend = await self.pool.acquire(entry)  # unloaded for another model: load it again
        self.pool.release(entry)
        return backend

    async def acquire_voice(self, name: str | None) -> tuple[Backend, str, VoiceStateLike]:
        """The model that speaks voice `name` (loaded first if needed), the voice's name in
        that model's library, and its state (maybe encoded first). Counts a use of the
        model, which is not unloaded until `release` is called with the backend."""
        # The default model's first load (its errors, its trouble), but not the default
        # model itself: with --max-loaded-models 1 it would be loaded again, only to be
        # unloaded for the voice's own model, at every request for another model's voice.
        await self.wait_first_load()
        route = self.pool.route(name)
        backend = await self.pool.acquire(route.entry)
        try:
            resolved, voice = await self.get_voice(backend, route.voice)
        except BaseException:
            self.pool.release(route.entry)
            raise
        return backend, resolved, voice

    def release(self, backend: Backend) -> None:
        """The synthesis of a backend from `acquire_voice` has ended."""
        entry = self.pool.entry_of(backend)
        if entry is not None:
            self.pool.release(entry)

    async def drain(self, timeout: float) -> None:
        """Let open connections finish (e.g. send their `error`), up to `timeout`."""
        await asyncio.sleep(0)  # the waiters have been woken: let them run first
        current = asyncio.current_task()
        pending = [task for task in self.connections if task is not current]
        if pending:
            await asyncio.wait(pending, timeout=timeout)

    async def describe(self) -> Info:
        """The `info` to send: every voice that will be served, from the first describe on.

        Before the model is ready, the preview (the same list, built without the model);
        after, the library's. Both re-read the voices file and folder if a file changed,
        in a thread, waited for at most DESCRIBE_REFRESH_WAIT_S (Home Assistant gives up
        after 1 s): a slower re-read shows at the next describe.
        """
        if not self._first_loaded:
            if not self._preview_done.is_set():
                # The very first describes: the preview is being built (a fraction of a
                # second); an info without voices would break Home Assistant's entity.
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._preview_done.wait(), FIRST_PREVIEW_WAIT_S)
            elif self.previewer is not None or self.pool.several:
                await self._bounded(self._refresh_preview())
            if not self._first_loaded:
                return build_info(self.program_name, self.pool.voices(), loading=True)
        await self._bounded(asyncio.to_thread(self.pool.refresh))
        return build_info(self.program_name, self.pool.voices(), warming_up=self.warming_up)

    def rescan(self) -> None:
        """Re-read every model's voices files now (SIGHUP), in a thread; on the loop."""
        if self._pool is None:
            return
        task = asyncio.get_running_loop().create_task(self._bounded(asyncio.to_thread(self.pool.refresh)),
                                                      name="voices rescan")  # fmt: skip
        self._rescans.add(task)
        task.add_done_callback(self._rescans.discard)

    @property
    def warming_up(self) -> bool:
        """The model is ready and serves requests, but its first synthesis is still to come
        (the default voice being loaded, or the warm-up running)."""
        return self._warmup_task is not None and not self._warmup_task.done()

    @staticmethod
    async def _bounded(work: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.ensure_future(work)
        done, _ = await asyncio.wait([task], timeout=DESCRIBE_REFRESH_WAIT_S)
        error = task.exception() if task in done else None
        if error is not None:
            _LOGGER.warning("Re-reading the voices failed: %s", error_text(error))

    def text_language(self, voice_name: str | None) -> str | None:
        """The language a voice's text is read in: its model's, known before it loads
        (None before the server has started)."""
        if self._pool is None:
            return None
        languages = self.pool.route(voice_name).entry.languages
        return languages[0] if languages else None

    def voice_for_language(self, language: str) -> str | None:
        """The voice a request that names only a language gets: the first offered voice
        (in describe's order: each model's default voice first, the default model first)
        that speaks it, "de-AT" before "de"; None if no voice does."""
        best: tuple[int, str | None] = (0, None)
        for voice in self.pool.voices() if self._pool is not None else ():
            rank = max((language_match(language, offered) for offered in voice.languages), default=0)
            if rank > best[0]:
                best = (rank, voice.name)
        return best[1]

    def voice_languages(self, name: str | None) -> tuple[str, ...]:
        """The languages of an offered voice (None: the default voice); () if not offered."""
        voices = self.pool.voices() if self._pool is not None else []
        if name is None:
            return voices[0].languages if voices else ()
        wanted = name.strip().lower()
        return next((voice.languages for voice in voices if voice.name.lower() == wanted), ())

    async def get_voice(self, backend: Backend, name: str | None) -> tuple[str, VoiceStateLike]:
        """The voice to use (the default for None or an unknown name); may encode it first."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.voice_executor, backend.voices.get, name)

    def stopping(self) -> None:
        """Shutdown has begun: background synthesis (the warm-up) stops within a frame."""
        self._stopping.set()
        for cancel in list(self._warmup_cancels):
            cancel.set()

    async def close(self) -> None:
        """Stop background work (warm-up, voice pre-encoding) and wait for it to end."""
        self._stopping.set()
        warmups = [task for task in (self._warmup_task, *self._more_warmups) if task is not None]
        if warmups:
            await asyncio.wait(warmups, timeout=5)
        if self._pool is not None:
            await self._pool.close()  # joins the pre-encoding threads, off the event loop
