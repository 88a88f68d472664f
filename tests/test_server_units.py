"""Unit tests of the server's parts: event reading with limits, the scheduler, the thread
bridge, and the Info event."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from contextlib import aclosing
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from wyoming_pocket_tts.core import VoiceInfo
from wyoming_pocket_tts.server.info import build_info
from wyoming_pocket_tts.server.protocol import Limits, ProtocolError, read_event
from wyoming_pocket_tts.server.scheduler import Priority, SynthesisScheduler
from wyoming_pocket_tts.server.synthesis import stream_pcm, to_pcm16


def _reader(data: bytes) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    reader.feed_eof()
    return reader


def _read(data: bytes, limits: Limits | None = None):
    async def go():
        return await read_event(_reader(data), limits)

    return asyncio.run(go())


# -- protocol -------------------------------------------------------------------------------


def test_reads_event_with_data_and_payload():
    data = json.dumps({"text": "hi"}).encode()
    header = json.dumps({"type": "synthesize", "data": {"a": 1}, "data_length": len(data),
                         "payload_length": 3}).encode()  # fmt: skip
    event = _read(header + b"\n" + data + b"xyz")
    assert event.type == "synthesize"
    assert event.data == {"a": 1, "text": "hi"}
    assert event.payload == b"xyz"


def test_clean_eof_is_none_and_blank_lines_are_skipped():
    assert _read(b"") is None
    assert _read(b"\n\n") is None
    assert _read(b'\n\n{"type": "describe"}\n').type == "describe"


@pytest.mark.parametrize(
    "raw, message",
    [
        (b"{not json\n", "not a JSON object"),
        (b"[1, 2]\n", "not a JSON object"),
        (b'{"data": {}}\n', 'missing "type"'),
        (b'{"type": "x", "data": [1]}\n', '"data" must be a JSON object'),
        (b'{"type": "x", "data_length": -1}\n', "non-negative integer"),
        (b'{"type": "x", "data_length": "5"}\n', "non-negative integer"),
        (b'{"type": "x", "data_length": 99999999999}\n', "event too large"),
        (b'{"type": "x", "payload_length": 99999999999}\n', "event too large"),
        (b'{"type": "x", "data_length": 5}\nab', "closed in the middle"),
        (b'{"type": "x", "data_length": 3}\n[1]', "not a JSON object"),
        (b'{"type": "x", "data_length": 3}\n{{{', "not valid JSON"),
        (b'{"type": "x"', "closed in the middle of an event header"),
    ],
)
def test_bad_events_raise_protocol_error(raw, message):
    with pytest.raises(ProtocolError, match=message):
        _read(raw)


def test_header_line_limit():
    line = b'{"type": "x", "pad": "' + b"a" * 200 + b'"}\n'
    with pytest.raises(ProtocolError, match="longer than"):
        _read(line, Limits(header_bytes=100))

    async def huge_line():
        reader = asyncio.StreamReader(limit=1024)
        reader.feed_data(b"a" * 5000)
        return await read_event(reader)

    with pytest.raises(ProtocolError, match="too long"):
        asyncio.run(huge_line())


# -- scheduler ------------------------------------------------------------------------------


def test_scheduler_bounds_concurrency_and_serves_fifo():
    async def go():
        scheduler = SynthesisScheduler(2)
        running, peak, order = 0, 0, []

        async def job(name: str, delay: float):
            nonlocal running, peak
            async with scheduler.slot():
                running += 1
                peak = max(peak, running)
                order.append(name)
                await asyncio.sleep(delay)
                running -= 1

        tasks = []
        for i in range(6):
            tasks.append(asyncio.create_task(job(f"j{i}", 0.02)))
            await asyncio.sleep(0)  # arrive in order
        await asyncio.gather(*tasks)
        return peak, order, scheduler.stats

    peak, order, stats = asyncio.run(go())
    assert peak == 2
    assert order == [f"j{i}" for i in range(6)]
    assert (stats.running, stats.waiting) == (0, 0)


def test_scheduler_prefers_continuations_and_drops_cancelled_waiters():
    async def go():
        scheduler = SynthesisScheduler(1)
        order = []
        gate = asyncio.Event()

        async def holder():
            async with scheduler.slot():
                await gate.wait()

        async def job(name, priority):
            async with scheduler.slot(priority):
                order.append(name)

        hold = asyncio.create_task(holder())
        await asyncio.sleep(0)
        new1 = asyncio.create_task(job("new1", Priority.NEW))
        await asyncio.sleep(0)
        gone = asyncio.create_task(job("gone", Priority.NEW))
        await asyncio.sleep(0)
        cont = asyncio.create_task(job("cont", Priority.CONTINUATION))
        await asyncio.sleep(0)
        assert scheduler.stats.waiting == 3
        gone.cancel()
        await asyncio.sleep(0)
        assert scheduler.stats.waiting == 2
        gate.set()
        await asyncio.gather(hold, new1, cont)
        return order, scheduler.stats

    order, stats = asyncio.run(go())
    assert order == ["cont", "new1"]
    assert (stats.running, stats.waiting) == (0, 0)


def test_scheduler_rejects_zero():
    with pytest.raises(ValueError):
        SynthesisScheduler(0)


# -- thread bridge --------------------------------------------------------------------------


def test_to_pcm16_clips_and_scales():
    pcm = np.frombuffer(to_pcm16(np.array([0.0, 0.5, 1.0, 2.0, -3.0], np.float32)), "<i2")
    assert pcm.tolist() == [0, 16384, 32767, 32767, -32767]


def _frames(count: int, cancel: threading.Event, log: list, delay: float = 0.01):
    for i in range(count):
        if cancel.is_set():
            log.append("cancelled")
            return
        time.sleep(delay)
        log.append(i)
        yield np.full(1920, 0.25, np.float32)


def test_stream_pcm_yields_frames_from_a_worker_thread():
    async def go():
        cancel = threading.Event()
        log: list = []
        threads = set()

        def make():
            threads.add(threading.current_thread().name)
            return _frames(5, cancel, log)

        with ThreadPoolExecutor(1, thread_name_prefix="w") as pool:
            out = [pcm async for pcm in stream_pcm(make, cancel, pool)]
        return out, threads, cancel.is_set()

    out, threads, cancelled = asyncio.run(go())
    assert len(out) == 5 and all(len(p) == 3840 for p in out)
    assert all(name.startswith("w") for name in threads)
    assert not cancelled


def test_stream_pcm_early_exit_cancels_and_waits_for_worker():
    async def go():
        cancel = threading.Event()
        log: list = []
        with ThreadPoolExecutor(1) as pool:
            async with aclosing(stream_pcm(lambda: _frames(1000, cancel, log, 0.005), cancel, pool)) as frames:
                async for _ in frames:
                    break
            # The worker has finished by the time the generator is closed.
            produced = len(log)
            await asyncio.sleep(0.05)
            return cancel.is_set(), produced, len(log)

    cancelled, produced, later = asyncio.run(go())
    assert cancelled
    assert produced == later  # nothing ran after the close
    assert produced < 10


def test_stream_pcm_reraises_engine_errors():
    def boom():
        raise ValueError("bad text")

    async def go():
        with ThreadPoolExecutor(1) as pool:
            return [p async for p in stream_pcm(boom, threading.Event(), pool)]

    with pytest.raises(ValueError, match="bad text"):
        asyncio.run(go())


# -- info -----------------------------------------------------------------------------------


def test_info_lists_program_and_voices():
    info = build_info("english", [VoiceInfo("alba", "Alba", ("en",)),
                                  VoiceInfo("grandma", "Grandma", ("en",), "recording", "Family", "https://x")])  # fmt: skip
    assert len(info.tts) == 1
    program = info.tts[0]
    assert program.installed and program.supports_synthesize_streaming
    assert program.version
    assert [v.name for v in program.voices] == ["alba", "grandma"]
    assert program.voices[0].languages == ["en"]
    assert program.voices[0].attribution.name == "Kyutai"
    assert program.voices[1].attribution.url == "https://x"
    # Survives the Wyoming round trip.
    event = info.event()
    assert event.data["tts"][0]["voices"][1]["name"] == "grandma"

    loading = build_info("english", [], loading=True)
    assert loading.tts[0].installed and loading.tts[0].voices == []


def test_voices_are_listed_before_a_catalog_model_is_loaded(tmp_path):
    """Home Assistant may connect during a long first download: it must see the voices."""
    from engine_fixtures import write_voice_recording
    from wyoming_pocket_tts.server.app import ServerConfig, voice_previewer
    from wyoming_pocket_tts.server.model_facts import model_facts
    from wyoming_pocket_tts.server.loading import LoadFailed
    from wyoming_pocket_tts.server.service import TtsService
    from wyoming_pocket_tts.voices import VoiceLibraryConfig

    write_voice_recording(tmp_path / "voices" / "grandma.wav")
    config = ServerConfig(uri="tcp://127.0.0.1:0", model="english",
                          library=VoiceLibraryConfig(tmp_path, voices_dir=tmp_path / "voices", default_voice="grandma"))
    previewer = voice_previewer(config, model_facts(config.model))
    entries = previewer()
    names = [entry.name for entry in entries]
    assert names[0] == "grandma" and "alba" in names and "marius" in names
    assert all(entry.languages == ("en",) for entry in entries)

    loaded = threading.Event()

    def slow_loader():
        loaded.wait(5)
        raise RuntimeError("no network")

    async def go():
        service = TtsService(
            model_name="english", loader=slow_loader, scheduler=SynthesisScheduler(1),
            synth_executor=ThreadPoolExecutor(1), voice_executor=ThreadPoolExecutor(1),
            previewer=previewer,
        )
        ready = service.start()
        # The very first describe already has them: no polling.
        listed = [voice.name for voice in (await service.describe()).tts[0].voices]
        loaded.set()
        with pytest.raises(LoadFailed, match="no network"):
            await ready
        return listed

    assert asyncio.run(go()) == names


def test_a_reply_on_a_closing_connection_ends_as_if_the_client_left():
    """At shutdown the server closes every connection while replies still run. A chunk
    written after the connection has sent its buffer and closed ends the reply with a
    ConnectionError (the handler's "client went away"), not asyncio's fatal write error."""
    from wyoming.audio import AudioChunk

    from wyoming_pocket_tts.server.handler import PocketTtsEventHandler

    async def go() -> tuple[type[BaseException] | None, list[dict]]:
        loop = asyncio.get_running_loop()
        fatal: list[dict] = []
        loop.set_exception_handler(lambda _loop, context: fatal.append(context))
        outcome: asyncio.Future[type[BaseException] | None] = loop.create_future()
        chunk = AudioChunk(rate=24000, width=2, channels=1, audio=bytes(4_000_000)).event()

        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            handler = PocketTtsEventHandler(reader, writer, service=None)  # type: ignore[arg-type]
            writer.write(b"x" * 4_000_000)  # more than the socket takes at once: buffered
            writer.close()  # as the server's stop does
            await writer.wait_closed()  # the buffer was sent, the socket closed
            try:
                await handler.write_event(chunk)
            except Exception as err:  # noqa: BLE001 - the kind of error is what is checked
                outcome.set_result(type(err))
            else:
                outcome.set_result(None)

        server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
        reader, writer = await asyncio.open_connection("127.0.0.1", server.sockets[0].getsockname()[1])
        while await reader.read(1 << 20):
            pass
        writer.close()
        raised = await asyncio.wait_for(outcome, 10)
        server.close()
        return raised, fatal

    raised, fatal = asyncio.run(go())
    assert raised is not None and issubclass(raised, ConnectionError)
    assert fatal == []
