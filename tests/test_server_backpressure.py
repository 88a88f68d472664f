"""What one connection may cost, on the real server code over TCP with a paced fake engine:
a client that stops reading, a request that would wait too long for a slot, pipelines,
idle connections. The handler's bounds are made small here through its constructor (the
command line does not expose them yet); every timing bound is generous on purpose.
"""

from __future__ import annotations

import asyncio
import time

from limits_fixtures import event_bytes, parse_events, read_all, stalled_request
from server_fixtures import (
    FakeModel,
    check_audio_format,
    fake_loader,
    ha_stream,
    inprocess_server,
    one_shot,
    raw_exchange,
)
from wyoming.tts import Synthesize

from wyoming_pocket_tts.server.synthesis import DEFAULT_HANDOFF_FRAMES

LONG_TEXT = "A long text that would take minutes to read out loud to anyone."  # 13 words


def run(coro):
    return asyncio.run(coro)


def test_client_that_stops_reading_is_paused_gives_up_its_slot_and_is_dropped(tmp_path):
    # 13 words x 300 frames x 80 ms: over five minutes of audio, made 16x faster than real time.
    model = FakeModel(frame_delay=0.005, frames_per_word=300)

    async def go():
        async with inprocess_server(fake_loader(model), tmp_path, max_concurrent=1, stall_timeout=3.0) as port:
            reader, writer = await stalled_request(port, LONG_TEXT)
            await asyncio.sleep(1.5)
            paused_at = model.log.frames
            await asyncio.sleep(1.0)
            still_at = model.log.frames
            # With one slot and the stalled reply holding none, another client is served.
            asked = time.monotonic()
            other = await one_shot(port, "Hi.", timeout=10)
            other_s = time.monotonic() - asked
            # The stalled client is dropped after its timeout (3 s, +2 s for the error).
            await asyncio.sleep(3.0 + 2.0 + 1.0)
            running = model.log.running
            received, closed = await read_all(reader, timeout=20)
            writer.close()
            await asyncio.sleep(0.2)
            return paused_at, still_at, other, other_s, running, received, closed

    paused_at, still_at, other, other_s, running, received, closed = run(go())
    # Paused: the engine made a few seconds of audio (buffers + hand-off), then nothing more.
    assert 0 < paused_at < 100, paused_at  # 100 frames = 8 s of audio, of 312 s asked for
    assert still_at - paused_at <= DEFAULT_HANDOFF_FRAMES  # at most the hand-off after the first look
    check_audio_format(other)
    assert other_s < 5.0
    assert closed, "the stalled client was not disconnected"
    assert running == 0  # its synthesis ended when it was dropped
    assert model.log.frames - len(other.chunks) < 100
    assert len(received) < 100 * 3900  # what the dropped client could still read


def test_reader_that_resumes_gets_the_whole_reply(tmp_path):
    model = FakeModel(frame_delay=0.002, frames_per_word=40)

    async def go():
        async with inprocess_server(fake_loader(model), tmp_path, max_concurrent=1, stall_timeout=10.0) as port:
            reader, writer = await stalled_request(port, LONG_TEXT)
            await asyncio.sleep(1.0)  # stalled: the reply waits without its slot
            paused_at = model.log.frames
            other = await one_shot(port, "Meanwhile.", timeout=10)
            received, _ = await read_all(reader, timeout=3.0)  # reads again, at last
            writer.close()
            return paused_at, other, received

    paused_at, other, received = run(go())
    assert paused_at < 13 * 40
    assert "audio-stop" in other.types
    types = [h["type"] for h in parse_events(received)]
    assert types[0] == "audio-start" and types[-1] == "audio-stop", types[-3:]
    assert types.count("audio-chunk") == 13 * 40
    assert "error" not in types


def test_busy_error_when_the_wait_for_a_slot_exceeds_the_bound(tmp_path):
    model = FakeModel(frame_delay=0.01, frames_per_word=40)  # the long text: ~5 s

    async def go():
        async with inprocess_server(fake_loader(model), tmp_path, max_concurrent=1, max_queue_wait=0.5) as port:
            first = asyncio.create_task(one_shot(port, LONG_TEXT, timeout=30))
            await asyncio.sleep(0.3)
            asked = time.monotonic()
            refused = await one_shot(port, "Am I next?", timeout=10)
            refused_s = time.monotonic() - asked
            return await first, refused, refused_s

    first, refused, refused_s = run(go())
    check_audio_format(first)
    assert refused.error is not None and "server busy" in refused.error, refused.types
    assert refused.types == ["error"]
    assert 0.4 < refused_s < 5.0
    assert model.log.texts == [LONG_TEXT]  # the refused text never reached the engine


def test_waiter_whose_client_left_is_dropped_from_the_queue(tmp_path):
    model = FakeModel(frame_delay=0.01, frames_per_word=10)

    async def go():
        async with inprocess_server(fake_loader(model), tmp_path, max_concurrent=1, max_queue_wait=30.0) as port:
            first = asyncio.create_task(one_shot(port, LONG_TEXT, timeout=30))
            await asyncio.sleep(0.3)
            # Queued behind the first, then gone.
            _, gone = await asyncio.open_connection("127.0.0.1", port)
            gone.write(event_bytes(Synthesize(text="Nobody will hear this.").event()))
            await gone.drain()
            await asyncio.sleep(0.2)
            gone.close()
            await asyncio.sleep(0.2)
            third = await one_shot(port, "Third in line.", timeout=30)
            return await first, third

    first, third = run(go())
    check_audio_format(first)
    check_audio_format(third)
    assert model.log.texts == [LONG_TEXT, "Third in line."]


def test_pipeline_over_the_bound_gets_an_error_and_every_request_is_cancelled(tmp_path):
    model = FakeModel(frame_delay=0.01, frames_per_word=50)

    async def go():
        async with inprocess_server(fake_loader(model), tmp_path) as port:
            burst = b"".join(event_bytes(Synthesize(text=f"{LONG_TEXT} {n}").event()) for n in range(50))
            headers, closed = await raw_exchange(port, burst, timeout=10)
            deadline = time.monotonic() + 5
            while model.log.running and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            frames = model.log.frames
            await asyncio.sleep(0.5)
            return headers, closed, frames

    headers, closed, frames = run(go())
    assert closed
    errors = [h["data"]["text"] for h in headers if h["type"] == "error"]
    assert len(errors) == 1 and "too many requests queued" in errors[0], headers[-2:]
    assert headers[-1]["type"] == "error"
    assert model.log.running == 0
    assert model.log.frames == frames  # nothing computed after the connection closed
    assert len(model.log.texts) <= 2  # the default bound: one answered, one waiting


def test_close_cancels_every_queued_request_not_only_the_last(tmp_path):
    model = FakeModel(frame_delay=0.01, frames_per_word=50)

    async def go():
        async with inprocess_server(fake_loader(model), tmp_path) as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(event_bytes(Synthesize(text=LONG_TEXT).event()))
            writer.write(event_bytes(Synthesize(text="The second, queued.").event()))
            await writer.drain()
            await reader.readline()  # audio-start of the first: it runs
            writer.close()
            deadline = time.monotonic() + 5
            while model.log.running and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            frames = model.log.frames
            await asyncio.sleep(0.8)
            return frames

    frames = run(go())
    assert model.log.running == 0
    assert model.log.frames == frames
    assert model.log.texts == [LONG_TEXT]  # the queued one never started
    assert frames < 13 * 50


def test_idle_connection_and_unfinished_header_are_closed(tmp_path):

    async def go():
        async with inprocess_server(fake_loader(FakeModel()), tmp_path, idle_timeout=0.5) as port:
            silent = await raw_exchange(port, b"", timeout=5)
            unfinished = await raw_exchange(port, b'{"type": "synthe', timeout=5)
            return silent, unfinished

    for headers, closed in run(go()):
        assert closed
        assert [h["type"] for h in headers] == ["error"]
        assert "idle" in headers[0]["data"]["text"]


def test_streamed_request_may_pause_longer_than_the_idle_timeout(tmp_path):
    model = FakeModel(frame_delay=0.0)

    async def go():
        async with inprocess_server(fake_loader(model), tmp_path, idle_timeout=0.3) as port:
            # An LLM that thinks for a second between its words, the stream open meanwhile.
            return await ha_stream(port, ["First sentence here. ", "And a ", "slow second one."], pause=1.0)

    response, _ = run(go())
    check_audio_format(response)
    assert response.types[-1] == "synthesize-stopped"
    assert model.log.texts == ["First sentence here.", "And a slow second one."]
