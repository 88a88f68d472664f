"""Helpers for the server tests: a fake engine and voice library, an in-process server,
the real server as a subprocess, and Wyoming client helpers.

The fake engine implements the engine contract, `wyoming_pocket_tts.core.contract` (checked
by tests/test_contract.py, with mypy too), with the same frame size, but
produces a sine tone at a controlled pace, so the in-process tests can check timing,
cancellation and concurrency exactly. The subprocess tests use the real `--model demo`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.event import Event
from wyoming.info import Describe, Info
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeStopped,
    SynthesizeVoice,
)

from wyoming_pocket_tts.core import GenerationOptions, TextError, VoiceError, VoiceInfo
from wyoming_pocket_tts.server.app import ServerConfig, serve
from wyoming_pocket_tts.server.service import Backend
from wyoming_pocket_tts.voices import VoiceLibraryConfig

FRAME = 1920
RATE = 24000
REPO = Path(__file__).resolve().parents[1]

# --------------------------------------------------------------------------------------
# Fake engine and voices


@dataclass(frozen=True)
class FakeVoiceState:
    name: str
    model_id: str = "fake"
    prompt_length: int = 10
    nbytes: int = 1000


@dataclass
class EngineLog:
    """What the fake engine saw; shared with the test (thread-safe enough for counters)."""

    texts: list[str] = field(default_factory=list)
    voices: list[str] = field(default_factory=list)
    sessions: int = 0
    options: list[GenerationOptions] = field(default_factory=list)
    frames: int = 0
    running: int = 0
    max_running: int = 0
    cancelled: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class FakeModel:
    """Same surface as the engine's TTSModel; `frames_per_word` frames per word of text."""

    sample_rate: int = RATE
    frame_size: int = FRAME
    languages: tuple[str, ...] = ("en",)
    predefined_voices: tuple[str, ...] = ("alba", "marius")
    can_clone: bool = True
    name: str = "fake"
    model_id: str = "fake"
    precision: str = "float32"

    def __init__(self, frame_delay: float = 0.01, frames_per_word: int = 2, fail_on: str = "") -> None:
        self.frame_delay = frame_delay
        self.frames_per_word = frames_per_word
        self.fail_on = fail_on
        self.log = EngineLog()
        self._phase = 0

    def _frames(self, text: str, voice: FakeVoiceState, cancel: threading.Event | None) -> Iterator[np.ndarray]:
        if not any(ch.isalnum() for ch in text):
            raise TextError("nothing pronounceable in the text")
        log = self.log
        with log.lock:
            log.texts.append(text)
            log.voices.append(voice.name)
        count = self.frames_per_word * max(1, len(text.split()))
        with log.lock:
            log.running += 1
            log.max_running = max(log.max_running, log.running)
        try:
            for _ in range(count):
                if cancel is not None and cancel.is_set():
                    with log.lock:
                        log.cancelled += 1
                    return
                if self.fail_on and self.fail_on in text:
                    raise RuntimeError("simulated engine failure")
                time.sleep(self.frame_delay)
                t = (np.arange(FRAME) + self._phase) / RATE
                self._phase += FRAME
                with log.lock:
                    log.frames += 1
                yield (0.5 * np.sin(2 * math.pi * 220 * t)).astype(np.float32)
        finally:
            with log.lock:
                log.running -= 1

    def synthesize(self, text: str, voice: FakeVoiceState, options: GenerationOptions = GenerationOptions(),
                   cancel: threading.Event | None = None) -> Iterator[np.ndarray]:  # fmt: skip
        if not any(ch.isalnum() for ch in text):
            raise TextError("nothing pronounceable in the text")
        with self.log.lock:
            self.log.options.append(options)
        return self._frames(text, voice, cancel)

    def session(self, voice: FakeVoiceState, options: GenerationOptions = GenerationOptions(),
                cancel: threading.Event | None = None) -> FakeSession:  # fmt: skip
        with self.log.lock:
            self.log.sessions += 1
            self.log.options.append(options)
        return FakeSession(self, voice, cancel)

    # Voices: the server tests use FakeVoices, which makes its states itself.
    def voice_from_predefined(self, name: str) -> FakeVoiceState:
        return FakeVoiceState(name)

    def voice_from_recording(self, path: Path) -> FakeVoiceState:
        return FakeVoiceState(path.stem)

    def voice_from_audio(self, audio: np.ndarray) -> FakeVoiceState:
        return FakeVoiceState(f"prompt of {audio.size} samples")

    def voice_from_file(self, path: Path) -> FakeVoiceState:
        return FakeVoiceState(path.stem)

    def save_voice(self, state: FakeVoiceState, path: Path) -> None:
        path.write_text(state.name)


class FakeSession:
    def __init__(self, model: FakeModel, voice: FakeVoiceState, cancel: threading.Event | None) -> None:
        self._model = model
        self._voice = voice
        self._cancel = cancel

    def speak(self, text: str, voice: FakeVoiceState | None = None) -> Iterator[np.ndarray]:
        if not any(ch.isalnum() for ch in text):
            raise TextError("nothing pronounceable in the text")
        if voice is not None and voice.model_id != self._model.model_id:
            raise VoiceError(f"this voice was made for model {voice.model_id!r}")
        return self._model._frames(text, voice or self._voice, self._cancel)


class FakeVoices:
    """The voices library contract: default first, unknown names fall back with a warning."""

    def __init__(self, names: tuple[str, ...] = ("alba", "marius", "grandma"), encode_delay: float = 0.0,
                 settings: dict[str, dict[str, float]] | None = None) -> None:  # fmt: skip
        self._names = names
        self.encode_delay = encode_delay
        # Per-voice settings, as a voices file gives them: {voice: {"temperature": 0.9}}.
        self._settings = settings or {}
        self.closed = False

    @property
    def voices(self) -> list[VoiceInfo]:
        return [VoiceInfo(n, f"Voice {n}", ("en",), settings=self._settings.get(n, {})) for n in self._names]

    @property
    def default_name(self) -> str:
        return self._names[0]

    def start_preencoding(self) -> None:
        pass

    def refresh(self) -> bool:
        return False  # its list never changes

    def get(self, name: str | None = None) -> tuple[str, FakeVoiceState]:
        if name == "broken":
            raise VoiceError("voice broken: recording is unreadable")
        if name not in self._names:
            if name is not None:
                logging.getLogger("fake.voices").warning("Unknown voice %r, using default", name)
            name = self._names[0]
        time.sleep(self.encode_delay)
        return name, FakeVoiceState(name)

    def close(self) -> None:
        self.closed = True


def fake_loader(model: FakeModel, voices: FakeVoices | None = None, delay: float = 0.0) -> Callable[[], Backend]:
    def load() -> Backend:
        time.sleep(delay)
        return Backend(model=model, voices=voices or FakeVoices(), options=GenerationOptions())

    return load


def download_failing_after_retries(proceed: threading.Event, retries: int = 2) -> Callable[..., str]:
    """A stand-in for `huggingface_hub.hf_hub_download` that goes through the hub's own retry
    loop (the real one, `retries` retries against a closed port, quickly), then waits for
    `proceed` and fails as a download without network does."""

    def download(**kwargs: Any) -> str:
        from huggingface_hub.errors import LocalEntryNotFoundError
        from huggingface_hub.utils import _http

        try:
            _http.http_backoff("HEAD", "http://127.0.0.1:9/x", max_retries=retries, base_wait_time=0.01,
                               max_wait_time=0.01)  # fmt: skip
        except Exception:  # noqa: BLE001 - expected: nothing listens on port 9
            pass
        else:
            raise AssertionError("port 9 answered")
        proceed.wait(20)
        raise LocalEntryNotFoundError("no network")

    return download


# --------------------------------------------------------------------------------------
# Servers


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.asynccontextmanager
async def inprocess_server(loader, tmp_path: Path, max_concurrent: int = 2,
                           **server_options: Any) -> AsyncIterator[int]:  # fmt: skip
    """The real server code on a fake backend, in this event loop; yields the port.
    `server_options`: other fields of ServerConfig (e.g. stall_timeout)."""
    port = free_port()
    config = ServerConfig(uri=f"tcp://127.0.0.1:{port}", model="fake", library=VoiceLibraryConfig(tmp_path),
                          max_concurrent=max_concurrent, **server_options)  # fmt: skip
    task = asyncio.create_task(serve(config, loader=loader))
    try:
        await wait_port(port, task)
        yield port
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def wait_port(port: int, task: asyncio.Future | None = None, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if task is not None and task.done():
            task.result()
            raise RuntimeError("server task ended")
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.02)
            continue
        writer.close()
        return
    raise TimeoutError(f"nothing listens on port {port}")


@dataclass
class ServerProcess:
    proc: subprocess.Popen
    port: int
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def cpu_seconds(self) -> float:
        """utime + stime of the server process (all its threads)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        return (int(fields[11]) + int(fields[12])) / ticks

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def start_server_process(tmp_path: Path, *extra: str, port: int | None = None) -> ServerProcess:
    port = port or free_port()
    log_path = tmp_path / f"server-{port}.log"
    # The demo unless the test names its model(s): a second --model adds a model (issue 16).
    model = [] if "--model" in extra else ["--model", "demo"]
    cmd = [sys.executable, "-m", "wyoming_pocket_tts", *model,
           "--uri", f"tcp://127.0.0.1:{port}", "--data-dir", str(tmp_path / "data"), *extra]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env=env)
    return ServerProcess(proc, port, log_path)


def stop_cleanly(proc: ServerProcess, log_tail: int = 3000) -> None:
    """Stop a server process at the end of its tests: it must exit 0. The end of its log is
    printed, so that pytest shows it with any failure."""
    code = proc.stop()
    print(proc.log()[-log_tail:])
    assert code == 0, f"server exited with {code}"


@contextlib.contextmanager
def ready_server_process(tmp_path: Path, *extra: str) -> Iterator[ServerProcess]:
    """A server process with its voices listed; stopped after, and it must exit 0."""
    proc = start_server_process(tmp_path, *extra)
    try:
        wait_voices(proc, port_timeout=60)
        yield proc
    finally:
        stop_cleanly(proc)


def memory_kib(proc: ServerProcess, field: str) -> int:
    """A memory figure of the server process from /proc/PID/status ("VmRSS", "VmHWM"), in KiB."""
    for line in Path(f"/proc/{proc.proc.pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/PID/status")


def rss_mb(proc: ServerProcess) -> float:
    """The server's resident memory now (VmRSS), in MB."""
    return memory_kib(proc, "VmRSS") / 1024


def peak_rss_mb(proc: ServerProcess) -> float:
    """The server's peak resident memory so far (VmHWM), in MB."""
    return memory_kib(proc, "VmHWM") / 1024


# --------------------------------------------------------------------------------------
# Client side


def long_answer(sentences: int) -> str:
    """A text that keeps the engine busy: `sentences` numbered sentences, none the same."""
    return " ".join(f"This is sentence number {n} of a long answer that keeps the engine busy for a while."
                    for n in range(1, sentences + 1))  # fmt: skip


@dataclass
class Response:
    """Everything a client received for one request."""

    events: list[Event] = field(default_factory=list)
    first_audio_at: float | None = None
    finished_at: float | None = None
    closed: bool = False

    @property
    def types(self) -> list[str]:
        return [e.type for e in self.events]

    @property
    def chunks(self) -> list[AudioChunk]:
        return [AudioChunk.from_event(e) for e in self.events if AudioChunk.is_type(e.type)]

    @property
    def audio(self) -> bytes:
        return b"".join(c.audio for c in self.chunks)

    @property
    def error(self) -> str | None:
        for e in self.events:
            if e.type == "error":
                return e.data.get("text")
        return None


async def read_until(client: AsyncTcpClient, stop_types: set[str], response: Response | None = None,
                     timeout: float = 30.0) -> Response:  # fmt: skip
    response = response or Response()
    while True:
        event = await asyncio.wait_for(client.read_event(), timeout)
        if event is None:
            response.closed = True
            response.finished_at = time.monotonic()
            return response
        if AudioChunk.is_type(event.type) and response.first_audio_at is None:
            response.first_audio_at = time.monotonic()
        response.events.append(event)
        if event.type in stop_types:
            response.finished_at = time.monotonic()
            return response


async def describe(port: int, timeout: float = 5.0) -> tuple[Info, float]:
    async with AsyncTcpClient("127.0.0.1", port) as client:
        started = time.monotonic()
        await client.write_event(Describe().event())
        while True:
            event = await asyncio.wait_for(client.read_event(), timeout)
            assert event is not None, "connection closed before info"
            if Info.is_type(event.type):
                return Info.from_event(event), time.monotonic() - started


def wait_voices(server: ServerProcess, timeout: float = 120.0, port_timeout: float = 30.0) -> None:
    """Until a server process listens and lists its voices (its model is loaded)."""
    asyncio.run(wait_port(server.port, timeout=port_timeout))
    deadline = time.monotonic() + timeout
    while True:
        try:
            if asyncio.run(describe(server.port))[0].tts[0].voices:
                return
        except asyncio.TimeoutError:
            pass  # a loaded machine: the first describe waits up to 5 s for the voice list
        assert server.proc.poll() is None, server.log()
        assert time.monotonic() < deadline, server.log()
        time.sleep(0.2)


async def one_shot(port: int, text: str, voice: str | None = None, timeout: float = 30.0) -> Response:
    async with AsyncTcpClient("127.0.0.1", port) as client:
        synth_voice = SynthesizeVoice(name=voice) if voice else None
        await client.write_event(Synthesize(text=text, voice=synth_voice).event())
        return await read_until(client, {AudioStop().event().type, "error"}, timeout=timeout)


async def ha_stream(port: int, deltas: list[str], voice: str | None = None, pause: float = 0.05,
                    timeout: float = 60.0) -> tuple[Response, float]:  # fmt: skip
    """Home Assistant's exact streaming sequence; returns the response and when stop was sent."""
    async with AsyncTcpClient("127.0.0.1", port) as client:
        synth_voice = SynthesizeVoice(name=voice) if voice else None
        stop_sent_at = 0.0

        async def writer() -> None:
            nonlocal stop_sent_at
            await client.write_event(SynthesizeStart(voice=synth_voice).event())
            for delta in deltas:
                await client.write_event(SynthesizeChunk(text=delta).event())
                await asyncio.sleep(pause)
            await client.write_event(Synthesize(text="".join(deltas), voice=synth_voice).event())
            await client.write_event(SynthesizeStop().event())
            stop_sent_at = time.monotonic()

        write_task = asyncio.create_task(writer())
        response = await read_until(client, {SynthesizeStopped().event().type, "error"}, timeout=timeout)
        await write_task
        return response, stop_sent_at


def check_audio_format(response: Response) -> None:
    """One audio-start; every chunk 24 kHz, 16-bit, mono, exactly one 1920-sample frame."""
    starts = [AudioStart.from_event(e) for e in response.events if AudioStart.is_type(e.type)]
    assert len(starts) == 1, response.types
    assert (starts[0].rate, starts[0].width, starts[0].channels) == (RATE, 2, 1)
    assert response.chunks, "no audio"
    for chunk in response.chunks:
        assert (chunk.rate, chunk.width, chunk.channels) == (RATE, 2, 1)
        assert len(chunk.audio) == FRAME * 2
    assert response.types.count("audio-stop") == 1
    assert response.types.index("audio-start") < response.types.index("audio-chunk")
    assert response.types[-1] in ("audio-stop", "synthesize-stopped")


async def raw_exchange(port: int, data: bytes, timeout: float = 5.0) -> tuple[list[dict], bool]:
    """Send raw bytes; return the JSON headers received and whether the server closed."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    headers = []
    closed = False
    try:
        while True:
            line = await asyncio.wait_for(reader.readline(), timeout)
            if not line:
                closed = True
                break
            header = json.loads(line)
            if header.get("data_length"):
                header["data"] = json.loads(await reader.readexactly(header["data_length"]))
            if header.get("payload_length"):
                await reader.readexactly(header["payload_length"])
            headers.append(header)
    except asyncio.TimeoutError:
        pass
    writer.close()
    return headers, closed
