"""Running the server: listen at once, load the model in the background, stop cleanly.

Order at start: bind the socket (a port in use fails here, in well under a second), then
start loading the model in a thread, then announce over zeroconf. The process lives until
SIGTERM/SIGINT (exit 0), the end of stdin for `stdio://` (exit 0), or a model that cannot
be loaded (exit 1, one line saying why). A misbehaving client never ends it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from urllib.parse import urlparse

from wyoming.event import async_get_stdin
from wyoming.server import AsyncServer

from ..core import GenerationOptions, VoiceInfo, VoiceStateLike
from ..settings import check_fields, default
from ..voices.config import VoiceLibraryConfig
from .handler import PocketTtsEventHandler
from .scheduler import SynthesisScheduler
from .service import Backend, Loader, ReplyOptions, TtsService
from .zeroconf import Announcement, announce

_LOGGER = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServerConfig:
    """Everything the command line decides (validated: see `wyoming_pocket_tts.settings`)."""

    uri: str
    model: str
    library: VoiceLibraryConfig
    generation: GenerationOptions = GenerationOptions()
    reply: ReplyOptions = ReplyOptions()
    hf_token: str | None = None
    quantize: bool = False
    threads: int | None = None
    # The language of the model's voices in `describe`; None: what the model says.
    language: str | None = None
    max_concurrent: int = default("max_concurrent")
    zeroconf_name: str | None = None

    def __post_init__(self) -> None:
        check_fields("server", self)

    @property
    def data_dir(self) -> Path:
        return self.library.data_dir


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


def preview_voice_entries(config: ServerConfig) -> list[VoiceInfo]:
    """The voices of a catalog model, listed without loading it (runs in the loader thread)."""
    from ..engine.catalog import catalog
    from ..voices import preview_voices

    entry = catalog().get(config.model)
    if entry is None:
        return []  # a custom config: its voices are known once it is loaded
    languages = [config.language] if config.language else [entry.language]
    return preview_voices(config.library, entry.name, entry.voices, languages)


def load_backend(config: ServerConfig) -> Backend:
    """Load the model and build the voice library (runs in the loader thread)."""
    from ..engine import load_model
    from ..voices import VoiceLibrary

    model = load_model(
        config.model,
        hf_token=config.hf_token,
        quantize=config.quantize,
        threads=config.threads,
        cache_dir=model_cache_dir(config.data_dir),
    )
    languages = [config.language] if config.language else None
    voices = VoiceLibrary(model, config.library, languages=languages)
    names = [voice.name for voice in voices.voices]
    _LOGGER.info("%d voice(s), default %s: %s", len(names), voices.default_name, ", ".join(names))
    voices.start_preencoding()
    if config.reply.normalize:
        from ..text import warm_up

        # Its libraries and patterns now, while the voices encode, not on the first reply.
        warm_up(config.language or (tuple(model.languages) or ("en",))[0])
    return Backend(model=model, voices=voices, options=config.generation, reply=config.reply)


# Long enough (a few seconds of speech) to measure the engine's speed, short enough to be cheap.
WARMUP_TEXT = "Hello, this is a quick test of the speech engine, made when the server starts."
SHUTDOWN_GRACE_S = 5.0


def warm_up(backend: Backend, voice: VoiceStateLike, cancel: threading.Event) -> float:
    """Speak a sentence with the default voice, throw it away, return its duration.

    The first synthesis after start can pay one-off costs (allocations, lazy init; up to
    ~1.3 s more time to first audio on the default architecture here), and a satellite
    gives up on a reply that has not started within ~2 s. `cancel` is set at shutdown.
    """
    started = time.monotonic()
    frames = sum(1 for _ in backend.model.synthesize(WARMUP_TEXT, voice, backend.options, cancel))
    audio_s = frames * backend.model.frame_size / backend.model.sample_rate
    elapsed = time.monotonic() - started
    _LOGGER.info("Warm-up: %.1f s of audio in %.1f s", audio_s, elapsed)
    return audio_s


async def _listen(uri: str, factory: partial[PocketTtsEventHandler]) -> AsyncServer:
    try:
        server = AsyncServer.from_uri(uri)
    except ValueError as err:
        raise StartError(f"bad --uri {uri!r}: {err}") from None
    try:
        await server.start(factory)
    except OSError as err:
        raise StartError(f"cannot listen on {uri}: {err.strerror or err}") from None
    _LOGGER.info("Listening on %s", uri)
    return server


async def _serve_stdio(factory: partial[PocketTtsEventHandler]) -> asyncio.Task[None]:
    """One handler on stdin/stdout (the wyoming class reads without limits, so not used)."""
    loop = asyncio.get_running_loop()
    reader = await async_get_stdin()
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, sys.stdout
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return asyncio.create_task(factory(reader, writer).run(), name="stdio handler")


async def serve(config: ServerConfig, loader: Loader | None = None) -> bool:
    """Run until stopped. Raises StartError before serving, LoadFailed if loading fails.

    Returns False if the model was still loading at the end: the loader thread may be in
    the middle of torch code, so the caller should leave with os._exit rather than wait.
    `loader` replaces the real model loading (tests run the server on a fake engine).
    """
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, stop.set)

    synth_executor = ThreadPoolExecutor(config.max_concurrent, thread_name_prefix="synth")
    # Encoding a voice is rare and slow; it gets its own workers so it never holds up frames.
    voice_executor = ThreadPoolExecutor(2, thread_name_prefix="voice")
    service = TtsService(
        model_name=config.model,
        loader=loader or partial(load_backend, config),
        previewer=None if loader else partial(preview_voice_entries, config),
        scheduler=SynthesisScheduler(config.max_concurrent),
        synth_executor=synth_executor,
        voice_executor=voice_executor,
        warmup=None if loader else warm_up,
    )
    factory = partial(PocketTtsEventHandler, service=service)

    server: AsyncServer | None = None
    stdio_task: asyncio.Task[None] | None = None
    announcement: Announcement | None = None
    stopped = asyncio.ensure_future(stop.wait())
    try:
        if urlparse(config.uri).scheme == "stdio":
            stdio_task = await _serve_stdio(factory)
        else:
            server = await _listen(config.uri, factory)
        _LOGGER.info("Loading model %s in the background", config.model)
        ready = service.start()
        if config.zeroconf_name and server is not None:
            announcement = await announce(config.uri, config.zeroconf_name)

        waits: set[asyncio.Future[object]] = {stopped, ready}
        if stdio_task is not None:
            waits.add(stdio_task)
        while True:
            done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            if done == {ready}:
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
        _LOGGER.info("Stopped")
    return not service.loading
