"""The real server process (`--model demo`) against clients that cost too much: one that
stops reading, a pipeline of 50 requests, more connections than the cap, and SIGTERM in
the middle of a synthesis. Bounds are generous: CI shares two cores with other work.
"""

from __future__ import annotations

import asyncio
import os
import resource
import signal
import subprocess
import sys
import time

import pytest
from attack_fixtures import connect
from limits_fixtures import event_bytes, stalled_request
from server_fixtures import (
    REPO,
    ServerProcess,
    check_audio_format,
    describe,
    free_port,
    long_answer,
    memory_kib,
    one_shot,
    raw_exchange,
    read_until,
    ready_server_process,
    start_server_process,
    wait_voices,
)
from wyoming.client import AsyncTcpClient
from wyoming.event import async_read_event, async_write_event
from wyoming.info import Describe
from wyoming.tts import Synthesize

from wyoming_pocket_tts.server.app import SHUTDOWN_GRACE_S
from wyoming_pocket_tts.server.connections import RESERVED_FILES

LONG_TEXT = long_answer(39)


def run(coro):
    return asyncio.run(coro)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One demo server, one synthesis at a time: a stalled reply must not block the next."""
    with ready_server_process(tmp_path_factory.mktemp("limits"), "--max-concurrent", "1") as proc:
        yield proc


def wait_paused(server: ServerProcess, timeout: float = 60.0) -> float:
    """Seconds until the server spends (almost) no CPU over one second."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        cpu = server.cpu_seconds()
        time.sleep(1.0)
        if server.cpu_seconds() - cpu < 0.05:
            return time.monotonic() - started
    raise AssertionError(f"the server kept computing for {timeout:g} s for a client that reads nothing")


def test_client_that_stops_reading_is_paused_and_others_are_served(server):
    async def go():
        reader, writer = await stalled_request(server.port, LONG_TEXT)  # ~4 minutes of speech
        await reader.readexactly(1)  # the synthesis has started; from now on we read nothing
        loop = asyncio.get_running_loop()
        paused_after = await loop.run_in_executor(None, wait_paused, server)
        rss_before = memory_kib(server, "VmRSS")
        cpu_before = server.cpu_seconds()
        await asyncio.sleep(2.0)
        paused_cpu = server.cpu_seconds() - cpu_before
        asked = time.monotonic()
        other = await one_shot(server.port, "Hello there, how are you?", timeout=60)
        other_s = time.monotonic() - asked
        await asyncio.sleep(1.0)
        rss_growth = memory_kib(server, "VmRSS") - rss_before
        writer.close()
        return paused_after, paused_cpu, other, other_s, rss_growth

    paused_after, paused_cpu, other, other_s, rss_growth_kib = run(go())
    print(f"paused after {paused_after:.1f} s; then {paused_cpu:.2f} CPU s in 2 s; "
          f"another client served in {other_s:.1f} s; RSS {rss_growth_kib:+d} KiB")  # fmt: skip
    assert paused_cpu < 0.2  # the reply stays paused: its worker waits on the hand-off
    check_audio_format(other)  # served on the only slot, which the stalled reply gave up
    assert other_s < 20.0
    assert rss_growth_kib < 50 * 1024


def accepted_requests(server: ServerProcess) -> int:
    return server.log().count(": one-shot, ")


def test_pipeline_of_fifty_then_close(server):
    before = accepted_requests(server)
    burst = b"".join(event_bytes(Synthesize(text=f"Request number {n}. {LONG_TEXT}").event()) for n in range(50))
    headers, closed = run(raw_exchange(server.port, burst, timeout=30))
    assert closed
    assert headers[-1]["type"] == "error"
    assert "too many requests queued" in headers[-1]["data"]["text"]
    # At most two were taken (the bound) and both were cancelled with the connection: the
    # next client is served on the only slot, and nothing of the burst runs meanwhile.
    assert accepted_requests(server) - before <= 2
    response = run(one_shot(server.port, "Still here.", timeout=30))
    check_audio_format(response)
    log = server.log()
    assert "Traceback" not in log


def test_more_connections_than_the_cap(tmp_path):
    """With an open-file limit of 128 the cap is 128 - RESERVED_FILES; the rest are refused."""
    file_limit = 128
    cap = file_limit - RESERVED_FILES
    port = free_port()
    log_path = tmp_path / "server.log"
    cmd = [sys.executable, "-m", "wyoming_pocket_tts", "--model", "demo", "--uri", f"tcp://127.0.0.1:{port}",
           "--data-dir", str(tmp_path / "data")]  # fmt: skip

    def limit_files() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (file_limit, file_limit))

    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, preexec_fn=limit_files,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})  # fmt: skip
    server = ServerProcess(proc, port, log_path)

    async def go():
        # From four addresses, so that none holds more than its share (half the cap).
        clients = []
        for index in range(cap + 10):
            clients.append(await connect(port, f"127.0.0.{1 + index % 4}"))
        await asyncio.sleep(0.5)  # the refused ones have been told and closed

        async def ask(client: tuple[asyncio.StreamReader, asyncio.StreamWriter]) -> str:
            reader, writer = client
            try:
                await async_write_event(Describe().event(), writer)
                event = await asyncio.wait_for(async_read_event(reader), 10)
            except (ConnectionError, OSError):
                return "closed"
            if event is None:
                return "closed"
            return event.type if event.type != "error" else "error: " + event.data["text"]

        answers = await asyncio.gather(*(ask(client) for client in clients))
        for _, writer in clients:
            writer.close()
        await asyncio.sleep(0.5)
        after, _ = await describe(port)  # the places are free again
        return answers, after

    try:
        wait_voices(server)
        answers, after = run(go())
    finally:
        code = server.stop()
    log = server.log()
    served = [a for a in answers if a == "info"]
    refused = [a for a in answers if a.startswith("error")]
    assert len(served) == cap, (answers, log[-2000:])
    assert len(refused) == 10, answers
    assert all("too many connections" in a and f"limit {cap}" in a for a in refused)
    assert after.tts[0].voices
    assert f"up to {cap} connections" in log
    assert "Traceback" not in log
    assert code == 0


def test_sigterm_during_synthesis_exits_zero(tmp_path):
    server = start_server_process(tmp_path, "--max-concurrent", "2")
    try:
        wait_voices(server)

        async def start_long() -> AsyncTcpClient:
            client = AsyncTcpClient("127.0.0.1", server.port)
            await client.connect()
            await client.write_event(Synthesize(text=LONG_TEXT).event())
            await read_until(client, {"audio-chunk"}, timeout=60)
            return client

        async def go() -> None:
            client = await start_long()
            # And one that reads nothing: its paused reply must not hold up the exit.
            await stalled_request(server.port, LONG_TEXT)
            await asyncio.sleep(1.0)
            nonlocal signalled
            signalled = time.monotonic()  # from the signal: not the model's load before it
            server.proc.send_signal(signal.SIGTERM)
            # The client sees the connection end (no hang), audio or not before it.
            await read_until(client, {"audio-stop"}, timeout=SHUTDOWN_GRACE_S + 10)

        signalled = 0.0
        run(go())
        code = server.proc.wait(SHUTDOWN_GRACE_S + 10)
        exit_s = time.monotonic() - signalled
    finally:
        server.stop()
    log = server.log()
    assert code == 0, log[-2000:]
    assert exit_s < SHUTDOWN_GRACE_S + 10
    assert "Stopped" in log
    assert "Traceback" not in log and "terminate called" not in log
    # Nothing half-written is left behind in the data directory.
    leftovers = [p for p in (tmp_path / "data").rglob("*") if p.is_file() and ".tmp" in p.name]
    assert leftovers == []
