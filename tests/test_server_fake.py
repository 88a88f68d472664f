"""The server's real code over TCP, in process, on a fake engine whose pace is controlled.

These pin down behaviour that depends on timing (first audio before synthesize-stop,
cancellation within a frame, concurrency bound, describe while loading) more exactly than
the real demo model allows; test_server_process.py repeats the essentials on the real one.
"""

from __future__ import annotations

import asyncio
import logging
import time

import numpy as np
from server_fixtures import (
    raw_exchange,
    FakeModel,
    Response,
    check_audio_format,
    describe,
    fake_loader,
    ha_stream,
    inprocess_server,
    one_shot,
    read_until,
)
from wyoming.client import AsyncTcpClient
from wyoming.event import Event
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop


def run(coro):
    return asyncio.run(coro)


def test_describe_before_and_after_loading(tmp_path):
    async def go():
        loader = fake_loader(FakeModel(), delay=1.5)
        async with inprocess_server(loader, tmp_path) as port:
            early, early_s = await describe(port)
            # A synthesis sent while loading waits for the model and then succeeds.
            pending = asyncio.create_task(one_shot(port, "Hello there."))
            await asyncio.sleep(1.8)
            late, _ = await describe(port)
            return early, early_s, late, await pending

    early, early_s, late, response = run(go())
    assert early_s < 10  # answered while loading (no voices yet), not after the 1.5 s load
    assert early.tts[0].installed and early.tts[0].supports_synthesize_streaming
    assert early.tts[0].voices == []
    assert [v.name for v in late.tts[0].voices] == ["alba", "marius", "grandma"]
    assert all(v.languages == ["en"] for v in late.tts[0].voices)
    check_audio_format(response)


def test_one_shot_one_cycle_one_chunk_per_frame(tmp_path):
    model = FakeModel()

    async def go():
        async with inprocess_server(fake_loader(model), tmp_path) as port:
            return await one_shot(port, "Hello there, how are you?")

    response = run(go())
    check_audio_format(response)
    assert response.types[-1] == "audio-stop"
    assert len(response.chunks) == 2 * 5  # 2 frames per word
    # The samples are the engine's, in order, as int16.
    samples = np.frombuffer(response.audio, "<i2")
    assert np.abs(samples).max() > 15000


def test_streaming_ha_sequence_first_audio_before_stop(tmp_path):
    model = FakeModel(frame_delay=0.005)
    deltas = ["Hello there", ", this is the ", "first sentence. And", " here is the second one.",
              " A third, short. Done"]  # fmt: skip

    async def go():
        async with inprocess_server(fake_loader(model), tmp_path) as port:
            return await ha_stream(port, deltas, pause=0.3)

    response, stop_sent_at = run(go())
    check_audio_format(response)
    assert response.types[-2:] == ["audio-stop", "synthesize-stopped"]
    assert response.first_audio_at < stop_sent_at
    # Split into sentences by sentence-stream, spoken through ONE session in order; the
    # compatibility `synthesize` was ignored (its text is not spoken a second time).
    assert model.log.texts == ["Hello there, this is the first sentence.", "And here is the second one.",
                               "A third, short.", "Done"]  # fmt: skip
    assert model.log.sessions == 1
    words = sum(len(t.split()) for t in model.log.texts)
    assert len(response.chunks) == 2 * words


def test_voice_selection(tmp_path, caplog):
    model = FakeModel(frame_delay=0.0)

    async def go():
        async with inprocess_server(fake_loader(model), tmp_path) as port:
            await one_shot(port, "One.", voice="marius")
            await one_shot(port, "Two.")
            await one_shot(port, "Three.", voice="nobody")
            await ha_stream(port, ["Four. ", "Five."], voice="grandma", pause=0)

    with caplog.at_level(logging.WARNING):
        run(go())
    assert model.log.voices == ["marius", "alba", "alba", "grandma", "grandma"]
    assert "nobody" in caplog.text


def test_streaming_skips_unpronounceable_sentence(tmp_path):
    model = FakeModel(frame_delay=0.0)

    async def go():
        async with inprocess_server(fake_loader(model), tmp_path) as port:
            return await ha_stream(port, ["Hi there.\n\n", "--- \n\n", "Bye now."], pause=0)

    response, _ = run(go())
    check_audio_format(response)
    assert response.types[-1] == "synthesize-stopped"
    assert model.log.texts == ["Hi there.", "Bye now."]


def test_errors_close_only_that_connection(tmp_path):
    model = FakeModel(frame_delay=0.0, fail_on="EXPLODE")

    async def go():
        async with inprocess_server(fake_loader(model), tmp_path) as port:
            sends = {
                "bad json": b"{oops\n",
                "no type": b'{"data": {}}\n',
                "huge": b'{"type": "synthesize", "data_length": 50000000}\n',
                "empty": b'{"type": "synthesize", "data": {"text": "  "}}\n',
                "text type": b'{"type": "synthesize", "data": {"text": 5}}\n',
                "chunk first": b'{"type": "synthesize-chunk", "data": {"text": "a"}}\n',
                "stop first": b'{"type": "synthesize-stop"}\n',
                "unpronounceable": b'{"type": "synthesize", "data": {"text": "!!!"}}\n',
                "engine fails": b'{"type": "synthesize", "data": {"text": "EXPLODE now"}}\n',
                "bad voice": b'{"type": "synthesize", "data": {"text": "Hi", "voice": {"name": "broken"}}}\n',
                "empty stream": b'{"type": "synthesize-start"}\n{"type": "synthesize-stop"}\n',
            }
            results = {name: await raw_exchange(port, raw) for name, raw in sends.items()}
            # After all that, a good request on a new connection is served.
            good = await one_shot(port, "Still alive?")
            return results, good

    results, good = run(go())
    expected = {
        "bad json": "not a JSON object",
        "no type": 'missing "type"',
        "huge": "too large",
        "empty": "empty text",
        "text type": '"text" must be a string',
        "chunk first": "without synthesize-start",
        "stop first": "without synthesize-start",
        "unpronounceable": "cannot speak this text",
        "engine fails": "synthesis failed",
        "bad voice": "voice broken",
        "empty stream": "empty text",
    }
    for name, (headers, closed) in results.items():
        assert closed, name
        errors = [h for h in headers if h["type"] == "error"]
        assert len(errors) == 1, (name, headers)
        assert expected[name] in errors[0]["data"]["text"], (name, errors[0])
        assert headers[-1]["type"] == "error", name
    check_audio_format(good)


async def disconnect_after_first_audio(port: int, events: list[Event]) -> Response:
    """Send `events`, read until the first audio, then drop the connection."""
    client = AsyncTcpClient("127.0.0.1", port)
    await client.connect()
    for event in events:
        await client.write_event(event)
    response = await read_until(client, {"audio-chunk"})
    await client.disconnect()
    return response


def test_disconnect_cancels_within_a_frame(tmp_path):
    model = FakeModel(frame_delay=0.02, frames_per_word=50)

    async def go():
        async with inprocess_server(fake_loader(model), tmp_path) as port:
            response = await disconnect_after_first_audio(port, [Synthesize(text="A long text to read out loud.").event()])
            assert response.chunks
            disconnected = time.monotonic()
            while model.log.running and time.monotonic() - disconnected < 10:
                await asyncio.sleep(0.005)
            running = model.log.running
            frames = model.log.frames
            await asyncio.sleep(0.2)
            return running, frames, model.log.frames

    running, frames, later = run(go())
    # The synthesis stopped (by the cancel event or by its iterator being closed): nothing
    # runs, no frame comes after, and far fewer frames were made than the text has.
    assert running == 0
    assert later == frames
    assert frames < 50 * 7


def test_disconnect_mid_stream_cancels(tmp_path):
    model = FakeModel(frame_delay=0.02, frames_per_word=50)

    async def go():
        async with inprocess_server(fake_loader(model), tmp_path) as port:
            await disconnect_after_first_audio(
                port, [SynthesizeStart().event(), SynthesizeChunk(text="First sentence here. Second").event()]
            )
            await asyncio.sleep(0.15)
            frames = model.log.frames
            await asyncio.sleep(0.1)
            return model.log.running, frames, model.log.frames

    running, frames, later = run(go())
    assert running == 0
    assert frames == later < 50 * 3


async def later(delay: float, coro):
    await asyncio.sleep(delay)
    return await coro


def test_two_clients_both_receive_audio_and_third_waits(tmp_path):
    model = FakeModel(frame_delay=0.01, frames_per_word=10)

    async def go():
        async with inprocess_server(fake_loader(model), tmp_path, max_concurrent=2) as port:
            started = time.monotonic()
            results = await asyncio.gather(
                one_shot(port, "Client one speaks now."),
                ha_stream(port, ["Client two streams. ", "And goes on."], pause=0.01),
                later(0.1, one_shot(port, "Client three waits.")),
            )
            return started, results

    started, (first, (second, _), third) = run(go())
    for response in (first, second, third):
        check_audio_format(response)
    assert model.log.max_running == 2
    # The first two overlap (each started before the other finished); the third waited.
    assert first.first_audio_at < second.finished_at and second.first_audio_at < first.finished_at
    # Client three's audio started only once one of the others had finished.
    assert third.first_audio_at >= min(first.finished_at, second.finished_at) - 0.05


def test_describe_is_fast_during_synthesis(tmp_path):
    model = FakeModel(frame_delay=0.02, frames_per_word=20)

    async def go():
        async with inprocess_server(fake_loader(model), tmp_path) as port:
            long = asyncio.create_task(one_shot(port, "A rather long sentence to keep the engine busy."))
            await asyncio.sleep(0.2)
            latencies = []
            for _ in range(5):
                _, seconds = await describe(port)
                latencies.append((seconds, long.done()))
                await asyncio.sleep(0.05)
            await long
            return latencies

    latencies = run(go())
    # Answered while the synthesis still ran, within a generous bound (a busy machine).
    assert not any(done for _, done in latencies)
    assert max(seconds for seconds, _ in latencies) < 5


def test_pipelined_requests_on_one_connection_stay_in_order(tmp_path):
    model = FakeModel(frame_delay=0.0)

    async def go():
        async with inprocess_server(fake_loader(model), tmp_path) as port:
            async with AsyncTcpClient("127.0.0.1", port) as client:
                await client.write_event(Synthesize(text="First one.").event())
                await client.write_event(Synthesize(text="Second one here.").event())
                await client.write_event(Event(type="ping", data={"text": "x"}))
                response = Response()
                await read_until(client, {"audio-stop"}, response)
                await read_until(client, {"audio-stop"}, response)
                return response

    response = run(go())
    # The pong is answered by the read loop at once, audio follows in request order.
    types = [t for t in response.types if t != "pong"]
    assert types.count("audio-start") == 2 and types.count("audio-stop") == 2
    assert model.log.texts == ["First one.", "Second one here."]


def test_stream_then_one_shot_on_same_connection(tmp_path):
    model = FakeModel(frame_delay=0.0)

    async def go():
        async with inprocess_server(fake_loader(model), tmp_path) as port:
            async with AsyncTcpClient("127.0.0.1", port) as client:
                await client.write_event(SynthesizeStart().event())
                await client.write_event(SynthesizeChunk(text="Streamed words.").event())
                await client.write_event(SynthesizeStop().event())
                first = await read_until(client, {"synthesize-stopped"})
                await client.write_event(Synthesize(text="Then one shot.").event())
                second = await read_until(client, {"audio-stop"})
                return first, second

    first, second = run(go())
    check_audio_format(first)
    check_audio_format(second)
