"""What every connection shares: the model once loaded, the voices, the scheduler, the workers.

The server listens before the model exists: loading (importing torch, maybe downloading
weights) runs in a daemon thread started by `TtsService.start`, and requests that need the
model await `wait_ready()`. `describe` never needs it. The engine and the voices library are
only imported inside that thread, so `--help`, `--version` and the first `describe` do not
wait for torch.
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
from .info import build_info
from .scheduler import Priority, SynthesisScheduler

_LOGGER = logging.getLogger(__name__)

# How long a describe waits for the voices files to be re-read; Home Assistant gives up at 1 s.
DESCRIBE_REFRESH_WAIT_S = 0.5
# The first preview is awaited longer: without it the info would have no voices.
FIRST_PREVIEW_WAIT_S = 5.0


@dataclass
class Backend:
    """The loaded model and its voice library."""

    model: ModelLike
    voices: VoiceSource
    options: GenerationOptions

    def options_for(self, voice_name: str) -> GenerationOptions:
        """The server's options, under the voice's own settings from the voices file."""
        for voice in self.voices.voices:
            if voice.name == voice_name and voice.settings:
                return replace(self.options, **voice.settings)
        return self.options


class LoadFailed(Exception):
    """Loading the model or the voices failed; the message is one line for the user."""


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
    _preview: tuple[VoiceInfo, ...] = field(default=(), init=False)
    _preview_done: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    _preview_task: asyncio.Task[None] | None = field(default=None, init=False)
    # Why loading is failing right now (a download being retried); requests get it at once.
    _trouble: str | None = field(default=None, init=False)
    _trouble_seen: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    _ready: asyncio.Future[Backend] | None = field(default=None, init=False)
    _backend: Backend | None = field(default=None, init=False)
    _loader_thread: threading.Thread | None = field(default=None, init=False)
    _stopping: threading.Event = field(default_factory=threading.Event, init=False)
    _warmup_task: asyncio.Task[None] | None = field(default=None, init=False)
    _warmup_cancel: threading.Event | None = field(default=None, init=False)
    # The task of every open connection, so that shutdown can wait for their cleanup.
    connections: set[asyncio.Task[None]] = field(default_factory=set, init=False)
    _request_ids: Iterator[int] = field(default_factory=lambda: itertools.count(1), init=False)

    def next_request_id(self) -> int:
        """Numbers requests in the log, across connections."""
        return next(self._request_ids)

    def start(self) -> asyncio.Future[Backend]:
        """Start loading in a background thread; the future fails with LoadFailed."""
        loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        ready = self._ready

        def deliver(backend: Backend | None, error: BaseException | None) -> None:
            if ready.done():
                return
            if error is not None:
                ready.set_exception(error)
                return
            assert backend is not None
            self._backend = backend
            ready.set_result(backend)
            if self.warmup is not None:
                self._warmup_task = loop.create_task(self._warm_up(backend), name="warm-up")

        def report_trouble(reason: str | None) -> None:
            # From the loader thread (the hub's retries): hand it to the event loop.
            with contextlib.suppress(RuntimeError):  # the loop was closed (shutdown)
                loop.call_soon_threadsafe(self._set_trouble, reason)

        def load() -> None:
            from ..engine.hub import watch_downloads

            started = time.monotonic()
            try:
                with watch_downloads(report_trouble):
                    backend = self.loader()
            except BaseException as err:  # noqa: BLE001 - reported to the user as one line
                _LOGGER.debug("Loading failed", exc_info=True)
                failure = err if isinstance(err, LoadFailed) else LoadFailed(str(err) or type(err).__name__)
                outcome: tuple[Backend | None, BaseException | None] = (None, failure)
            else:
                _LOGGER.info("Model %s ready in %.1f s", self.model_name, time.monotonic() - started)
                outcome = (backend, None)
            try:
                loop.call_soon_threadsafe(deliver, *outcome)
            except RuntimeError:
                pass  # the loop was closed while we loaded (shutdown)

        if self.previewer is not None:
            # Its own thread, not the loader's: the first describe must not wait for torch.
            self._preview_task = loop.create_task(self._refresh_preview(), name="voice preview")
        else:
            self._preview_done.set()
        # A daemon thread: a download in progress must not keep a stopping server alive
        # (see `loading`: the caller then exits without waiting for it).
        self._loader_thread = threading.Thread(target=load, name="model-loader", daemon=True)
        self._loader_thread.start()
        return ready

    def _set_trouble(self, reason: str | None) -> None:
        self._trouble = reason
        if reason is not None:
            self._trouble_seen.set()
            self._trouble_seen = asyncio.Event()  # the next waiters wait for the next one

    async def _refresh_preview(self) -> None:
        assert self.previewer is not None
        try:
            self._preview = tuple(await asyncio.to_thread(self.previewer))
        except Exception:  # noqa: BLE001 -- loading the library reports the problem
            _LOGGER.debug("Voice preview failed", exc_info=True)
        finally:
            self._preview_done.set()

    async def _warm_up(self, backend: Backend) -> None:
        """Run the warm-up unless a request came first; a request arriving during it
        pre-empts it (it stops within a frame), so it never delays anyone."""
        assert self.warmup is not None
        loop = asyncio.get_running_loop()
        cancel = threading.Event()
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
                self._warmup_cancel = cancel  # set by stopping()
                await loop.run_in_executor(self.synth_executor, self.warmup, backend, voice, cancel)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - a failed warm-up only costs latency
            _LOGGER.warning("Warm-up failed", exc_info=True)

    @property
    def loading(self) -> bool:
        """True while the loader thread still runs (torch may be busy in it)."""
        return self._loader_thread is not None and self._loader_thread.is_alive()

    @property
    def backend(self) -> Backend | None:
        return self._backend

    async def wait_ready(self) -> Backend:
        """The backend, once loaded. Raises LoadFailed: at once while loading is failing
        (a download being retried), or when it failed."""
        if self._backend is not None:
            return self._backend
        assert self._ready is not None, "start() was not called"
        if self._trouble is not None:
            raise LoadFailed(f"still loading, and {self._trouble}")
        # shield: a cancelled request must not cancel the loading shared by everyone.
        ready = asyncio.shield(self._ready)
        trouble = asyncio.ensure_future(self._trouble_seen.wait())
        waits: set[asyncio.Future[Any]] = {ready, trouble}
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            trouble.cancel()
            if not ready.done():
                ready.cancel()  # only the shield: the loading goes on
        if ready.done() and not ready.cancelled():
            return ready.result()
        raise LoadFailed(f"still loading, and {self._trouble or 'a download failed'}")

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
        backend = self._backend
        if backend is None:
            if not self._preview_done.is_set():
                # The very first describes: the preview is being built (a fraction of a
                # second); an info without voices would break Home Assistant's entity.
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._preview_done.wait(), FIRST_PREVIEW_WAIT_S)
            elif self.previewer is not None:
                await self._bounded(self._refresh_preview())
            backend = self._backend
            if backend is None:
                return build_info(self.model_name, self._preview, loading=True)
        await self._bounded(asyncio.to_thread(backend.voices.refresh))
        return build_info(self.model_name, backend.voices.voices, warming_up=self.warming_up)

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

    async def get_voice(self, backend: Backend, name: str | None) -> tuple[str, VoiceStateLike]:
        """The voice to use (the default for None or an unknown name); may encode it first."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.voice_executor, backend.voices.get, name)

    def stopping(self) -> None:
        """Shutdown has begun: background synthesis (the warm-up) stops within a frame."""
        self._stopping.set()
        if self._warmup_cancel is not None:
            self._warmup_cancel.set()

    async def close(self) -> None:
        """Stop background work (warm-up, voice pre-encoding) and wait for it to end."""
        self._stopping.set()
        if self._warmup_task is not None:
            await asyncio.wait([self._warmup_task], timeout=5)
        backend = self._backend
        if backend is not None:
            loop = asyncio.get_running_loop()
            try:
                # Blocking (it joins the pre-encoding thread): off the event loop.
                await loop.run_in_executor(None, backend.voices.close)
            except Exception:  # noqa: BLE001
                _LOGGER.debug("Closing the voice library failed", exc_info=True)


def error_text(err: BaseException) -> str:
    """A one-line message for an `error` event; engine errors are already worded for users."""
    text = " ".join(str(err).split())
    return text or type(err).__name__

