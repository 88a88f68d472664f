"""Running the server: listen at once, load the model in the background, stop cleanly.

Order at start: bind the socket (a port in use fails here, in well under a second), then
start loading the model in a thread, then start the voices page if asked (--http; see
wyoming_pocket_tts.web), then announce over zeroconf. The process lives until
SIGTERM/SIGINT (exit 0), the end of stdin for `stdio://` (exit 0), or a model that cannot
be loaded (exit 1, one line saying why). A model the Hugging Face hub cannot deliver for
now (no network, an outage) is not such a model: its download is tried again, with waits
growing to --download-retry-max, and requests are told why meanwhile (see TtsService). A
misbehaving client never ends it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from wyoming.event import async_get_stdin
from wyoming.server import AsyncServer

from ..core import GenerationOptions, VoiceInfo, VoiceStateLike
from ..core.logsafe import escape
from ..settings import check_fields, default
from ..voices.config import ModelScope, VoiceConfigError, VoiceLibraryConfig
from ..voices.memory import SharedVoiceCache
from ..web.config import WebConfig
from .connections import (
    ConnectionGate,
    connection_cap,
    install_accept_error_log,
    raise_open_file_limit,
)
from .handler import PocketTtsEventHandler
from .model_facts import ModelFacts, is_custom_config, model_facts
from .models import ModelEntry, model_label
from .precision import PrecisionChooser
from .scheduler import SynthesisScheduler
from .service import Backend, Loader, ReplyOptions, TtsService
from .signals import StopSignals
from .zeroconf import Announcement, announce

if TYPE_CHECKING:
    from ..web.app import RunningPage

_LOGGER = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServerConfig:
    """Everything the command line decides (validated: see `wyoming_pocket_tts.settings`)."""

    uri: str
    # The default voice's model; `more_models` are the others (--model given several times).
    model: str
    library: VoiceLibraryConfig
    generation: GenerationOptions = GenerationOptions()
    reply: ReplyOptions = ReplyOptions()
    hf_token: str | None = None
    # --quantize: "auto" (measured, see server/precision.py), "int8" or "float32".
    precision: str = default("quantize")
    threads: int | None = None
    # The language of the model's voices in `describe`; None: known or inferred (model_facts).
    language: str | None = None
    max_concurrent: int = default("max_concurrent")
    # Bounds on what one client can hold: see the settings of the same names.
    max_queue_wait: float = default("max_queue_wait")
    stall_timeout: float = default("stall_timeout")
    max_queued_requests: int = default("max_queued_requests")
    idle_timeout: float = default("idle_timeout")
    max_connections: int = default("max_connections")
    download_retry_max: float = default("download_retry_max")
    zeroconf_name: str | None = None
    more_models: tuple[str, ...] = ()
    max_loaded_models: int = default("max_loaded_models")
    # The voices page (--http); None: off.
    web: WebConfig | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "more_models", tuple(self.more_models))
        check_fields("server", self)

    @property
    def data_dir(self) -> Path:
        return self.library.data_dir

    @property
    def models(self) -> tuple[str, ...]:
        return (self.model, *self.more_models)

    def facts(self) -> list[ModelFacts]:
        """Every model's facts, in command-line order. With several models, --language
        applies only to those whose language cannot be known (custom configs): a catalog
        model or the demo says its own, and one code for all would be wrong."""
        if not self.more_models:
            return [model_facts(self.model, self.language)]
        return [model_facts(name, self.language if is_custom_config(name) else None) for name in self.models]

    def library_for(self, index: int) -> VoiceLibraryConfig:
        """The voice library of model `index`: the voices-file entries naming it (`model:`),
        and for the first model also the unnamed ones, the voices folder and the default
        voice (see voices.config.ModelScope). An entry naming no model of ours is skipped."""
        names = [frozenset({name, model_label(name)}) for name in self.models]
        others = frozenset().union(*(names[:index] + names[index + 1:]))
        return replace(self.library, scope=ModelScope(names=names[index], first=index == 0, others=others))


class StartError(Exception):
    """The server cannot start; the message is one line for the user."""


def model_cache_dir(data_dir: Path) -> Path | None:
    """Where downloads go: Hugging Face's own cache if the user set it up, else the data dir.

    The data dir is what the add-on persists, so weights are not fetched again after an
    update; HF_HOME / HF_HUB_CACHE still win for people who share one cache between tools.
    """
    if os.environ.get("HF_HUB_CACHE") or os.environ.get("HF_HOME"):
        return None
    return data_dir / "huggingface"


def voice_previewer(config: ServerConfig, facts: ModelFacts, index: int = 0) -> Callable[[], list[VoiceInfo]]:
    """Lists the voices of model `index` without the model (torch-free, no download), for
    every model kind: `describe` answers with them while the model loads. Each call
    re-reads the voices file and folder only if one of their files changed."""
    from ..voices.catalog import VoicePreview

    preview = VoicePreview(config.library_for(index), facts.name, facts.predefined_voices, facts.languages)
    return preview.voices


def load_backend(config: ServerConfig, languages: tuple[str, ...] = (), index: int = 0,
                 voice_cache: SharedVoiceCache | None = None,
                 precision: PrecisionChooser | None = None) -> Backend:  # fmt: skip
    """Load model `index` (0: the default voice's) and build its voice library (runs in a
    loader thread).

    `languages` (from `model_facts`, which applies --language) are the voices' languages
    when given: the preview announced them, so the loaded list must say the same.
    `voice_cache` holds the voices in memory of every model of the server, bounded together
    (None: this library's own); `precision` decides each model's precision (None: one for
    this call)."""
    from ..engine import load_model, measure_precisions, quantize_model, runtime_identity
    from ..voices import VoiceLibrary

    # In float32 first: --quantize auto times it before deciding (see server/precision.py).
    model = load_model(
        config.models[index],
        hf_token=config.hf_token,
        threads=config.threads,
        cache_dir=model_cache_dir(config.data_dir),
    )
    chooser = precision or PrecisionChooser(config.precision, config.data_dir)
    if chooser.precision_for(model_label(config.models[index]), model.model_id, runtime_identity(),
                             partial(measure_precisions, model)) == "int8":  # fmt: skip
        quantize_model(model)
    cache = voice_cache.for_model(config.models[index]) if voice_cache is not None else None
    voices = VoiceLibrary(model, config.library_for(index), languages=languages or None, cache=cache)
    names = [voice.name for voice in voices.voices]
    # Names come from file names, which may hold a newline or escape codes: one log line.
    _LOGGER.info("Model %s: %d voice(s), default %s: %s", config.models[index], len(names),
                 escape(voices.default_name), escape(", ".join(names)))  # fmt: skip
    voices.start_preencoding()
    if config.reply.normalize:
        from ..text import warm_up

        # Its libraries and patterns now, while the voices encode, not on the first reply.
        warm_up((languages or tuple(model.languages) or ("en",))[0])
    return Backend(model=model, voices=voices, options=config.generation, reply=config.reply,
                   languages=languages or tuple(model.languages))  # fmt: skip


def more_model_entries(config: ServerConfig, facts: list[ModelFacts], voice_cache: SharedVoiceCache,
                       precision: PrecisionChooser) -> list[ModelEntry]:  # fmt: skip
    """The models after the first, loaded when a request first needs one."""
    return [
        ModelEntry(name, facts[index].languages,
                   partial(load_backend, config, facts[index].languages, index, voice_cache, precision),
                   voice_previewer(config, facts[index], index))
        for index, name in enumerate(config.models) if index > 0
    ]  # fmt: skip


# A short sentence: the warm-up speaks only its first WARMUP_FRAMES frames anyway.
WARMUP_TEXT = "Hello, this is a quick test of the speech engine, made when the server starts."
# ~1 s of audio at 12.5 frames per second: enough to run every step of a synthesis once
# (voice prompt, text prefill, decoding, the audio decoder), bounded whatever EOS does.
WARMUP_FRAMES = 12
SHUTDOWN_GRACE_S = 5.0
# How long a failed load waits for the connections to tell their clients before exiting.
FAILURE_GRACE_S = 2.0


def warm_up(backend: Backend, voice: VoiceStateLike, cancel: threading.Event) -> float:
    """Speak the first WARMUP_FRAMES frames of a sentence, throw them away, return their
    duration in seconds.

    The first synthesis after start pays one-off costs (allocations, lazy init; up to
    ~1.3 s more time to first audio on the default architecture here), and a satellite
    gives up on a reply that has not started within ~2 s. `cancel` is set at shutdown and
    when a real request arrives (it goes first: see TtsService._warm_up).
    """
    started = time.monotonic()
    frames = 0
    stream = backend.model.synthesize(WARMUP_TEXT, voice, backend.options, cancel)
    try:
        for _ in stream:
            frames += 1
            if frames >= WARMUP_FRAMES:
                break
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()  # ends the engine's generator (and its inference context) here
    audio_s = frames * backend.model.frame_size / backend.model.sample_rate
    elapsed = time.monotonic() - started
    _LOGGER.info("Warm-up: %.2f s of audio in %.2f s%s", audio_s, elapsed,
                 " (cut short)" if cancel.is_set() else "")  # fmt: skip
    return audio_s


async def _listen(
    uri: str,
    factory: partial[PocketTtsEventHandler],
    max_connections: int = default("max_connections"),
) -> AsyncServer:
    try:
        server = AsyncServer.from_uri(uri)
    except ValueError as err:
        raise StartError(f"bad --uri {uri!r}: {err}") from None
    # A cap under the open-file limit, so clients cannot make accept() fail (see connections).
    cap = connection_cap(max_connections, raise_open_file_limit())
    install_accept_error_log(asyncio.get_running_loop())
    try:
        await server.start(ConnectionGate(factory, cap))
    except OSError as err:
        raise StartError(f"cannot listen on {uri}: {err.strerror or err}") from None
    _LOGGER.info("Listening on %s (up to %d connections)", uri, cap)
    return server


async def _serve_stdio(factory: partial[PocketTtsEventHandler]) -> asyncio.Task[None]:
    """One handler on stdin/stdout (the wyoming class reads without limits, so not used)."""
    loop = asyncio.get_running_loop()
    reader = await async_get_stdin()
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, sys.stdout
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    # No idle timeout: a parent process may keep the pipe open and quiet for as long as it likes.
    return asyncio.create_task(factory(reader, writer, idle_timeout=None).run(), name="stdio handler")


def _with_page_voices_file(config: ServerConfig) -> ServerConfig:
    from .web_link import with_page_voices_file

    try:
        return replace(config, library=with_page_voices_file(config.library))
    except VoiceConfigError as err:
        raise StartError(str(err)) from None


def _page_starter(config: ServerConfig) -> Callable[[TtsService], Awaitable[RunningPage]]:
    """What starts the voices page. Its modules (aiohttp) are imported here, before the
    model's loader thread starts: imported next to torch's import, they could wait for it."""
    from ..web.app import start_page
    from .web_link import ServiceLink

    web = config.web
    assert web is not None

    async def start(service: TtsService) -> RunningPage:
        try:
            return await start_page(web, ServiceLink(config, service))
        except OSError as err:
            raise StartError(f"cannot serve the voices page on {web.listen}: {err.strerror or err}") from None

    return start


async def serve(config: ServerConfig, loader: Loader | None = None, own_signals: bool = False) -> bool:
    """Run until stopped. Raises StartError before serving, LoadFailed if loading fails.

    Returns False if the model was still loading at the end: the loader thread may be in
    the middle of torch code, so the caller should leave with os._exit rather than wait.
    `loader` replaces the real model loading (tests run the server on a fake engine).
    `own_signals`: the process is the server's own (the command line): a stop signal ends
    it even if the event loop does not respond (see signals.py).
    """
    loop = asyncio.get_running_loop()
    if config.web is not None:
        config = _with_page_voices_file(config)
    stop = asyncio.Event()

    # The scheduler bounds how many syntheses compute; the pool only has to hold them. A reply
    # whose client stopped reading keeps its worker blocked on the hand-off without a slot,
    # so there is room for one such worker per connection besides the running ones (threads
    # are started only when needed).
    synth_executor = ThreadPoolExecutor(
        config.max_concurrent + config.max_connections, thread_name_prefix="synth"
    )
    # Encoding a voice is rare and slow; it gets its own workers so it never holds up frames.
    voice_executor = ThreadPoolExecutor(2, thread_name_prefix="voice")
    # A client's long text (a megabyte event, a long chunk) is parsed and cut here, one at
    # a time: off the event loop, and never more than one core's worth of the interpreter.
    text_executor = ThreadPoolExecutor(1, thread_name_prefix="text")
    all_facts = config.facts() if loader is None else None
    facts = all_facts[0] if all_facts else None
    # One bound on the voices in memory for the whole server, whichever models are loaded.
    voice_cache = SharedVoiceCache(config.library.cache_size, config.library.cache_mb)
    precision = PrecisionChooser(config.precision, config.data_dir)
    service = TtsService(
        model_name=config.model,
        loader=loader or partial(load_backend, config, facts.languages if facts else (), 0, voice_cache, precision),
        previewer=None if facts is None else voice_previewer(config, facts),
        more_models=more_model_entries(config, all_facts, voice_cache, precision) if all_facts else (),
        max_loaded_models=config.max_loaded_models,
        model_wait=config.max_queue_wait,
        scheduler=SynthesisScheduler(config.max_concurrent),
        synth_executor=synth_executor,
        voice_executor=voice_executor,
        text_executor=text_executor,
        warmup=None if loader else warm_up,
        download_retry_max_s=config.download_retry_max,
    )
    with contextlib.suppress(NotImplementedError, RuntimeError):  # not on Windows, nor off the main thread
        StopSignals(loop, stop.set, service.rescan).install(own_process=own_signals)
    factory = partial(
        PocketTtsEventHandler,
        service=service,
        stall_timeout=config.stall_timeout,
        slot_wait=config.max_queue_wait,
        max_queued=config.max_queued_requests,
        idle_timeout=config.idle_timeout,
    )

    server: AsyncServer | None = None
    stdio_task: asyncio.Task[None] | None = None
    announcement: Announcement | None = None
    page: RunningPage | None = None
    stopped = asyncio.ensure_future(stop.wait())
    try:
        if urlparse(config.uri).scheme == "stdio":
            stdio_task = await _serve_stdio(factory)
        else:
            server = await _listen(config.uri, factory, config.max_connections)
        _LOGGER.info("Loading model %s in the background%s", config.model,
                     f" (and {', '.join(config.more_models)} on first use)" if config.more_models else "")  # fmt: skip
        start_page = _page_starter(config) if config.web is not None else None
        ready = service.start()
        if start_page is not None:
            page = await start_page(service)
        if config.zeroconf_name and server is not None:
            announcement = await announce(config.uri, config.zeroconf_name)

        waits: set[asyncio.Future[object]] = {stopped, ready}
        if stdio_task is not None:
            waits.add(stdio_task)
        while True:
            done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            if done == {ready}:
                if ready.exception() is not None:
                    # Requests waiting for the model get their `error` event before we stop.
                    await service.drain(FAILURE_GRACE_S)
                ready.result()  # raises LoadFailed: the caller reports it in one line
                waits.discard(ready)
                continue
            break
    finally:
        _LOGGER.info("Stopping")
        stopped.cancel()
        if announcement is not None:
            with contextlib.suppress(Exception):
                await announcement.close()
        service.stopping()
        if page is not None:
            await page.stop()
        if server is not None:
            await server.stop()
        if stdio_task is not None and not stdio_task.done():
            stdio_task.cancel()
        # Let the handlers finish: each sets its request's cancel event and waits for its
        # worker, which stops within a frame. Exiting with torch still running in a worker
        # thread aborts the interpreter ("terminate called without an active exception").
        if service.connections:
            await asyncio.wait(list(service.connections), timeout=SHUTDOWN_GRACE_S)
        _LOGGER.debug("Connections closed")
        await service.close()
        synth_executor.shutdown(wait=False, cancel_futures=True)
        voice_executor.shutdown(wait=False, cancel_futures=True)
        text_executor.shutdown(wait=False, cancel_futures=True)
        _LOGGER.info("Stopped")
    return not service.loading
