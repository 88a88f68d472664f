"""One client cannot take the real server from the others (issue 27, items 1, 2, 4, 6, 7).

Real server processes on the demo model, real sockets. The attacker connects from
127.0.0.1, the other clients from 127.0.0.2 (tests/attack_fixtures.py): during each attack
a `describe` on another connection is answered within DESCRIBE_WITHIN_S and another
client's request gets audio. What each attack did to the server before the fix (389a6f1;
bench/attacks.py replays them, /work/notes/attacks.txt):

* a 1 MiB data section of escaped quotes: the loop froze for hours (a regular
  expression backtracking), SIGTERM ignored;
* a 1 MB `synthesize-chunk`: the loop cut it into sentences, seconds without an answer;
* streams that never get text: the connection table full for as long as they liked;
* 12 MB of short sentences from a client that reads nothing: the server grew by
  hundreds of MB and kept them;
* a connection flood: two information lines per connection in the log;
* a failing voice: its `error` event named the server's file paths;
* with --max-loaded-models 1, a request for the other model's voice while a stream of the
  loaded one stayed open: no answer until the stream closed.

Bounds are stated where they are used; the server is given a short idle timeout and a
small connection table, so that the lockout attack needs 16 connections, not 64.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import soundfile
import yaml
from attack_fixtures import (
    attack_chunk_then_letters,
    attack_connection_flood,
    attack_huge_chunk,
    attack_json_bomb,
    attack_queue_flood,
    attack_wordless_streams,
    json_bomb,
    open_stream,
    send_and_wait_close,
    served,
    timed_describe,
    watched,
)
from server_fixtures import ServerProcess, ready_server_process, rss_mb, start_server_process, wait_voices
from voices_attack_fixtures import RATE, voice_samples

# What the issue asks (Home Assistant's client gives up soon after 1 s); the server takes
# tens of milliseconds. The old code took minutes, or never answered.
DESCRIBE_WITHIN_S = 1.0
IDLE_TIMEOUT_S = 3.0
MAX_CONNECTIONS = 16
# One address may hold half the table.
SHARE = MAX_CONNECTIONS // 2


def run(coro):
    return asyncio.run(coro)


def write_voice(path: Path, seconds: float = 3.0, gain: float = 1.0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    soundfile.write(str(path), voice_samples(seconds, gain=gain), RATE, subtype="PCM_16")
    return path


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("attacks")


@pytest.fixture(scope="module")
def server(folder: Path) -> Iterator[ServerProcess]:
    voices = folder / "voices"
    voices.mkdir()
    soundfile.write(str(voices / "silent.wav"), np.zeros(3 * RATE, dtype=np.float32), RATE)  # cannot be cloned
    with ready_server_process(folder, "--voices-dir", str(voices), "--idle-timeout", str(IDLE_TIMEOUT_S),
                              "--max-connections", str(MAX_CONNECTIONS)) as proc:  # fmt: skip
        # The model loaded and warmed up: its loading (torch's import) is not an attack.
        assert run(served(proc.port, timeout=120)) is None
        yield proc


def check_others_served(server: ServerProcess, watch) -> None:
    print(watch.summary())
    assert watch.describes and watch.worst_describe <= DESCRIBE_WITHIN_S, watch.summary()
    assert watch.served, watch.summary()
    assert server.proc.poll() is None, server.log()[-3000:]


# -- item 1: work on the event loop ---------------------------------------------------------


def test_a_megabyte_of_escaped_quotes_holds_up_no_one(server: ServerProcess) -> None:
    events = []

    async def attack() -> None:
        events.extend(await attack_json_bomb(server.port, timeout=60))

    check_others_served(server, run(watched(server.port, attack())))
    assert [event.type for event in events] == ["error"]
    assert events[0].data["text"] == "malformed event data: not valid JSON"


@pytest.mark.parametrize("attack", [attack_huge_chunk, attack_chunk_then_letters])
def test_a_megabyte_chunk_or_a_long_pending_text_holds_up_no_one(server: ServerProcess, attack) -> None:
    events = []

    async def go() -> None:
        events.extend(await attack(server.port, timeout=60))

    check_others_served(server, run(watched(server.port, go())))
    if attack is attack_huge_chunk:
        # Refused: pending without a sentence end, or (cut at 1,000 characters when no
        # sentence ends) queued faster than it is spoken.
        assert [event.type for event in events] == ["error"]
        assert any(reason in events[0].data["text"] for reason in (
            "no sentence end in 100000 characters", "arrives much faster than it is spoken"))  # fmt: skip
    else:  # every chunk was taken (the describe after them was answered; audio may come first)
        types = [event.type for event in events]
        assert types[-1] == "info" and "error" not in types, types


def test_sigterm_is_honoured_during_an_attack(tmp_path: Path) -> None:
    server = start_server_process(tmp_path)
    try:
        wait_voices(server, port_timeout=60)

        async def attack() -> None:
            sending = asyncio.ensure_future(send_and_wait_close(server.port, json_bomb(), timeout=30))
            await asyncio.sleep(0.5)
            server.proc.send_signal(signal.SIGTERM)
            await sending

        signalled = time.monotonic()
        run(attack())
        code = server.proc.wait(30)
        took = time.monotonic() - signalled
    finally:
        server.stop()
    print(f"exit {code} {took:.1f} s after SIGTERM")
    assert code == 0, server.log()[-3000:]
    assert took < 15


# -- item 2: open streams ---------------------------------------------------------------------


def test_streams_without_text_end_and_cannot_fill_the_table(server: ServerProcess) -> None:
    """All the table's connections from one address, each a stream that gets no text:
    half are refused (that address's share), the rest end with an error after the idle
    timeout; meanwhile the other address is served."""
    outcomes: list[str] = []

    async def attack() -> None:
        outcomes.extend(await attack_wordless_streams(server.port, MAX_CONNECTIONS, hold_s=3 * IDLE_TIMEOUT_S))

    started = time.monotonic()
    watch = run(watched(server.port, attack()))
    print(f"{time.monotonic() - started:.1f} s:", sorted(set(outcomes)))
    check_others_served(server, watch)
    refused = [o for o in outcomes if "too many connections from your address" in o]
    ended = [o for o in outcomes if f"got no text in {IDLE_TIMEOUT_S:g} s" in o]
    assert len(refused) == MAX_CONNECTIONS - SHARE, outcomes
    assert len(ended) == SHARE, outcomes


# -- item 4: queued text -----------------------------------------------------------------------

FLOOD_MB = 12.0
# Growth of the server's resident memory while the flood is queued, and after the client
# left. Measured: a few MB. Before: +180 MB for 12 MB of sentences, still there after.
MEMORY_GROWTH_BOUND_MB = 50.0


def test_queued_sentences_are_bounded_and_their_memory_goes(server: ServerProcess) -> None:
    run(served(server.port))  # the server's memory at rest, after a request
    before = rss_mb(server)
    during: list[float] = []
    events, sent_mb = run(attack_queue_flood(server.port, FLOOD_MB, lambda: during.append(rss_mb(server))))
    time.sleep(1.0)
    after = rss_mb(server)
    print(f"RSS before {before:.0f} MB, during {during[0]:.0f} MB, after {after:.0f} MB; "
          f"{sent_mb:.1f} MB sent; {[event.type for event in events]}")  # fmt: skip
    assert during[0] - before < MEMORY_GROWTH_BOUND_MB
    assert after - before < MEMORY_GROWTH_BOUND_MB
    # The stream was refused and no more of its text taken (what was sent went to the
    # kernel's buffers); the client may not get the error event: the audio it does not
    # read fills its buffer, and the server drops it.
    assert sent_mb < FLOOD_MB / 2
    errors = [event.data["text"] for event in events if event.type == "error"]
    assert all("arrives much faster than it is spoken" in error for error in errors), errors
    assert run(timed_describe(server.port)) <= DESCRIBE_WITHIN_S


# -- item 7: logs and errors ------------------------------------------------------------------

FLOOD_CONNECTIONS = 300
# Information lines are limited to 30 of a kind a minute; a flood writes two kinds.
# Before: two lines per connection (600).
FLOOD_LOG_LINES_BOUND = 100


def test_a_connection_flood_writes_a_bounded_log(server: ServerProcess) -> None:
    lines_before = len(server.log().splitlines())
    watch = run(watched(server.port, attack_connection_flood(server.port, FLOOD_CONNECTIONS)))
    time.sleep(0.5)
    added = server.log().splitlines()[lines_before:]
    print(f"{len(added)} log lines for {FLOOD_CONNECTIONS} connections; {watch.summary()}")
    assert len(added) < FLOOD_LOG_LINES_BOUND, "\n".join(added[-20:])
    check_others_served(server, watch)


def test_a_failing_voice_is_reported_without_the_servers_paths(server: ServerProcess, folder: Path) -> None:
    outcome = run(served(server.port, voice="silent"))
    print(outcome)
    assert outcome is not None and outcome.startswith("error: voice unavailable")
    assert "silent.wav" in outcome
    assert str(folder) not in outcome and "/" not in outcome
    assert str(folder / "voices" / "silent.wav") in server.log()  # the log says where


# -- item 6: two models, one resident ---------------------------------------------------------

QUEUE_WAIT_S = 3.0


def test_the_other_models_voice_gets_an_answer_while_a_stream_keeps_the_model(tmp_path: Path) -> None:
    from engine_fixtures import local_architecture

    household = tmp_path / "household"
    custom = local_architecture("english_7m_2026-10", household / "model")
    write_voice(household / "papa.wav")
    write_voice(household / "oma.wav")
    voices_file = household / "voices.yaml"
    voices_file.write_text(yaml.safe_dump({"voices": [
        {"name": "papa", "audio": "papa.wav"},
        {"name": "oma", "audio": "oma.wav", "model": str(custom.config_path)},
    ]}), encoding="utf-8")  # fmt: skip
    (tmp_path / "empty").mkdir()
    options = ["--model", "demo", "--model", str(custom.config_path), "--max-loaded-models", "1",
               "--max-queue-wait", str(QUEUE_WAIT_S), "--voices", str(voices_file),
               "--voices-dir", str(tmp_path / "empty")]  # fmt: skip
    with ready_server_process(tmp_path, *options) as server:

        async def go() -> tuple[str | None, float, float]:
            reader, writer = await open_stream(server.port, "papa")  # speaks, and stays open
            try:
                started = time.monotonic()
                outcome = await served(server.port, voice="oma", timeout=QUEUE_WAIT_S + 30)
                took = time.monotonic() - started
                return outcome, took, await timed_describe(server.port)
            finally:
                writer.close()

        outcome, took, describe_s = run(go())
        print(f"the other model's voice: {outcome or 'audio'} after {took:.1f} s")
        assert outcome is None or outcome.startswith("error: server busy: model"), outcome
        assert took < QUEUE_WAIT_S + 10
        assert describe_s <= DESCRIBE_WITHIN_S
        # Once the stream has closed, the other model loads for it.
        assert run(served(server.port, voice="oma", timeout=60)) is None
