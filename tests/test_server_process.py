"""The real server, started as `python -m wyoming_pocket_tts --model demo ...`, over TCP.

One server process serves the module (starting it costs a torch import); tests that need a
fresh process (describe while loading, unix://, stdio://) start their own briefly. Timing
bounds are loose on purpose: CI shares two cores with whatever else runs.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from engine_fixtures import write_voice_recording
from server_fixtures import (
    raw_exchange,
    REPO,
    ServerProcess,
    check_audio_format,
    describe,
    ha_stream,
    long_answer,
    one_shot,
    read_until,
    start_server_process,
    stop_cleanly,
    wait_port,
    wait_voices,
)
from wyoming.client import AsyncClient, AsyncTcpClient
from wyoming.info import Describe, Info
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart

LONG_TEXT = long_answer(29)


def run(coro):
    return asyncio.run(coro)


def wait_idle(server: ServerProcess, quiet_s: float = 0.5, limit: float = 0.05, timeout: float = 60) -> float:
    """Wait until the server used < `limit` CPU seconds over `quiet_s`; return that CPU."""
    deadline = time.monotonic() + timeout
    while True:
        before = server.cpu_seconds()
        time.sleep(quiet_s)
        used = server.cpu_seconds() - before
        if used < limit or time.monotonic() > deadline:
            return used


@pytest.fixture(scope="module")
def voices_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("voices")
    write_voice_recording(folder / "speaker.wav", seed=0)
    write_voice_recording(folder / "other.wav", seed=1)
    return folder


@pytest.fixture(scope="module")
def server(tmp_path_factory, voices_dir):
    """The demo server, ready (voices listed) and idle (voices pre-encoded)."""
    tmp = tmp_path_factory.mktemp("server")
    proc = start_server_process(tmp, "--voices-dir", str(voices_dir), "--voice", "speaker",
                                "--max-concurrent", "2")  # fmt: skip
    try:
        run(wait_port(proc.port, timeout=30))
        # The first describe, answered while the model still loads in the background.
        first_info, first_latency = run(describe(proc.port))
        wait_voices(proc)
        wait_idle(proc)
        proc.first_describe = (first_info, first_latency)  # type: ignore[attr-defined]
        yield proc
    finally:
        stop_cleanly(proc)


def test_describe_while_loading_and_ready(server):
    early, early_latency = server.first_describe
    assert early_latency < 10  # generous: a busy machine; the point is it does not wait for torch
    assert early.tts and early.tts[0].installed
    info, latency = run(describe(server.port))
    assert latency < 10
    program = info.tts[0]
    assert program.name == "pocket-tts" and program.installed
    assert program.supports_synthesize_streaming
    assert program.version
    # default first, then the household voices, then the model's built-in (predefined) one
    assert [v.name for v in program.voices] == ["speaker", "other", "demo"]
    for voice in program.voices:
        assert voice.languages == ["en"]
        assert voice.installed and voice.attribution.name and voice.description


def test_one_shot(server):
    response = run(one_shot(server.port, "Hello there, how are you?"))
    assert response.error is None, response.error
    check_audio_format(response)
    assert response.types[0] == "audio-start" and response.types[-1] == "audio-stop"


def test_home_assistant_streaming_sequence(server):
    deltas = ["Hello there", ". This is", " the second sentence", ". And a", " third one."]
    response, stop_sent_at = run(ha_stream(server.port, deltas, pause=0.4))
    assert response.error is None, response.error
    check_audio_format(response)
    assert response.types[-2:] == ["audio-stop", "synthesize-stopped"]
    # The first sentence was spoken while the rest of the text was still being written.
    assert response.first_audio_at < stop_sent_at


def test_voice_selection(server):
    run(one_shot(server.port, "Other voice.", voice="other"))
    run(one_shot(server.port, "Unknown voice.", voice="nobody"))
    time.sleep(0.2)
    log = server.log()
    assert "voice other," in log
    assert "nobody" in log and "WARNING" in log


def test_describe_stays_fast_during_long_synthesis(server):
    async def go():
        # Eight times the long text (~20 s of the demo's audio each): on a quiet machine the
        # demo speaks one in under a second, too fast to overlap five describes.
        long = asyncio.create_task(one_shot(server.port, " ".join([LONG_TEXT] * 8), timeout=300))
        await asyncio.sleep(0.5)
        latencies = []
        for _ in range(5):
            latencies.append((await describe(server.port))[1])
            await asyncio.sleep(0.1)
        done = long.done()
        long.cancel()
        return latencies, done

    latencies, done = run(go())
    assert not done, "the long synthesis ended too early to prove anything"
    assert max(latencies) < 10, latencies  # answered while it ran; generous for a busy machine
    wait_idle(server)


@pytest.mark.parametrize(
    "mode",
    ["streamed", "one-shot"],
)
def test_disconnect_cancels_synthesis_and_cpu_goes_idle(server, mode):
    async def go():
        client = AsyncTcpClient("127.0.0.1", server.port)
        await client.connect()
        if mode == "one-shot":
            await client.write_event(Synthesize(text=LONG_TEXT).event())
        else:
            await client.write_event(SynthesizeStart().event())
            await client.write_event(SynthesizeChunk(text=LONG_TEXT + " The end").event())
        # Audio is flowing: the synthesis runs (LONG_TEXT takes far longer than this test).
        await read_until(client, {"audio-chunk"}, timeout=60)
        # Keep reading until we disconnect: a client that reads nothing pauses its synthesis.
        reading = asyncio.create_task(read_until(client, {"audio-stop"}, timeout=60))
        await asyncio.sleep(1.0)
        reading.cancel()
        await client.disconnect()

    run(go())
    # The synthesis stops: the server goes idle (polled, up to 30 s, so that a busy machine
    # only slows this down). A synthesis left running would keep it busy for its whole text.
    idle = wait_idle(server, quiet_s=0.5, limit=0.05, timeout=30)
    assert idle < 0.05, f"server still busy ({idle:.2f} s CPU per 0.5 s) long after the client left"
    assert "disconnected: cancelling" in server.log()


def test_two_concurrent_clients_both_receive_audio(server):
    async def go():
        return await asyncio.gather(
            one_shot(server.port, " ".join(["The first client asks for this to be read."] * 8)),
            ha_stream(server.port, ["The second client streams. "] * 6 + ["The end."], pause=0.01),
        )

    # The limit in force when both arrive: the last one the scheduler logged (it adapts to
    # the measured speed, so an earlier "up to 1" may have been raised again since).
    limits = re.findall(r"up to (\d+) at once", server.log())
    limit = int(limits[-1]) if limits else 2
    first, (second, _) = run(go())
    check_audio_format(first)
    check_audio_format(second)
    if limit == 1:
        # The scheduler measured the engine too slow for two real-time streams here.
        assert max(first.first_audio_at, second.first_audio_at) >= min(first.finished_at, second.finished_at) - 0.1
    else:
        # Both were served at the same time: each got audio before the other finished.
        assert first.first_audio_at < second.finished_at
        assert second.first_audio_at < first.finished_at


async def _raw(port: int, data: bytes) -> tuple[list[dict], bool]:
    return await raw_exchange(port, data, timeout=30)


@pytest.mark.parametrize(
    "raw, expected",
    [
        (b"this is not json\n", "not a JSON object"),
        (b'{"type": "synthesize", "data_length": 999999999}\n', "too large"),
        (b'{"type": "synthesize", "payload_length": 999999999}\n', "too large"),
        (b'{"type": "synthesize", "data": {"text": ""}}\n', "empty text"),
        (b'{"type": "synthesize-start"}\n{"type": "synthesize-stop"}\n', "empty text"),
        (b'{"type": "synthesize-chunk", "data": {"text": "Hi"}}\n', "without synthesize-start"),
        (b'{"type": "synthesize", "data": {"text": "%%%"}}\n', "cannot speak this text"),
    ],
)
def test_bad_input_gets_error_and_close_and_server_carries_on(server, raw, expected):
    headers, closed = run(_raw(server.port, raw))
    assert closed
    assert [h["type"] for h in headers] == ["error"], headers
    assert expected in headers[0]["data"]["text"]
    response = run(one_shot(server.port, "Still here."))
    check_audio_format(response)
    assert server.proc.poll() is None


def test_wyoming_bench_runs_clean(server):
    bench = Path(sys.executable).with_name("wyoming-bench")
    if not bench.exists():
        pytest.skip("wyoming-bench is not installed (pip install wyoming-bench)")
    result = subprocess.run(
        [str(bench), "tts", f"127.0.0.1:{server.port}", "--mode", "both", "--no-unique",
         "--rounds", "1", "--warmup", "0", "--texts", "Hello there. How are you today?"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "error" not in (result.stdout + result.stderr).lower(), result.stdout + result.stderr


def test_unix_socket_and_stdio(tmp_path, voices_dir):
    socket_path = tmp_path / "tts.sock"
    cmd = [sys.executable, "-m", "wyoming_pocket_tts", "--model", "demo", "--data-dir", str(tmp_path),
           "--voices-dir", str(voices_dir)]  # fmt: skip
    unix = subprocess.Popen([*cmd, "--uri", f"unix://{socket_path}"], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:

        async def ask_unix() -> Info:
            deadline = time.monotonic() + 30
            while not socket_path.exists():
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            async with AsyncClient.from_uri(f"unix://{socket_path}") as client:
                await client.write_event(Describe().event())
                event = await asyncio.wait_for(client.read_event(), 5)
                return Info.from_event(event)

        assert run(ask_unix()).tts[0].name == "pocket-tts"
    finally:
        unix.terminate()
        assert unix.wait(10) == 0

    stdio = subprocess.run([*cmd, "--uri", "stdio://"], cwd=REPO, input=b'{"type": "describe"}\n',
                           capture_output=True, timeout=60)  # fmt: skip
    assert stdio.returncode == 0, stdio.stderr
    header = json.loads(stdio.stdout.splitlines()[0])
    assert header["type"] == "info"
    assert b"pocket-tts" in stdio.stdout
