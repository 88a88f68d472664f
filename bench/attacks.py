"""One client against everyone else (issue 27, items 1, 2, 4, 6, 7), two code trees side by side.

    git worktree add --detach /tmp/base-hard 389a6f1       # the commit before the fixes
    python bench/attacks.py /tmp/base-hard .               # the previous commit, then this tree
    python bench/attacks.py . --attacks json-bomb,flood    # one tree, some attacks

Each attack runs against a fresh real server (`python -m wyoming_pocket_tts --model demo`,
run from each tree in turn; --idle-timeout 3, --max-connections 16, a voices folder
holding one silent recording), loaded and warmed up by one request first. The attacker
connects from 127.0.0.1, the other clients from 127.0.0.2 (tests/attack_fixtures.py):
while the attack runs, a describe every 0.25 s (each on a new connection; no answer
within 5 s counts as 5 s) and one-shot requests one after the other. Reported per
attack and tree: the worst describe latency, how many of the other client's requests got
audio, a figure of the attack's own (below), and whether SIGTERM, sent when the attack
is over (or has run for its time), ended the server within 10 s.

  json-bomb    a synthesize whose 1 MiB data section is one string of escaped quotes
  huge-chunk   a stream whose one chunk is 1 MB of words without a sentence end
  letters      a stream of 40,000 characters without a sentence end, then 3,000
               one-letter chunks and a describe on the same connection
  wordless     16 connections (the whole table) from one address, each a stream that
               never gets text, held 10 s: how they ended
  queue-flood  12 MB of short sentences from a client that reads nothing: the server's
               RSS before, when all is sent, and 1 s after the client left
  conn-flood   300 connections one after the other, each opening a stream and closing:
               the log lines they added
  voice-error  a request for the silent recording: whether its error names a path
  two-models   --max-loaded-models 1, a stream of the demo's voice left open, then a
               request for the second model's (a random-weight 7M config) voice: what it
               got, and when (--max-queue-wait 3)
  sighup       SIGHUP: whether the server still answers

Prints a Markdown table. Loopback only; takes several minutes (the old tree's frozen
servers are waited for, then killed).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import numpy as np
import soundfile
import yaml
from wyoming.event import Event

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "tests")]

from attack_fixtures import (  # noqa: E402 -- the tests' attacks
    DESCRIBE_TIMEOUT_S,
    Watch,
    attack_chunk_then_letters,
    attack_connection_flood,
    attack_huge_chunk,
    attack_json_bomb,
    attack_queue_flood,
    attack_wordless_streams,
    open_stream,
    served,
    timed_describe,
    watched,
)
from server_fixtures import ServerProcess, rss_mb  # noqa: E402
from voices_folder_bench import ready, start, write_voice  # noqa: E402 -- a server from a tree

SIGTERM_WITHIN_S = 10.0
RATE = 24000

# What one attack reports besides the watch: (watch or None, figure).
Outcome = tuple[Watch | None, str]


def options(work: Path) -> list[str]:
    voices = work / "voices"
    voices.mkdir(exist_ok=True)
    soundfile.write(str(voices / "silent.wav"), np.zeros(3 * RATE, dtype=np.float32), RATE)
    return ["--voices-dir", str(voices), "--idle-timeout", "3", "--max-connections", "16"]


def watch_of(server: ServerProcess, attack) -> Watch:
    return asyncio.run(watched(server.port, attack))


def answered(attack: Callable[..., Awaitable[list[Event]]]) -> Callable[[ServerProcess, Path], Outcome]:
    """An attack whose figure is what the attacker was answered (within 45 s)."""

    def run(server: ServerProcess, work: Path) -> Outcome:
        events: list[Event] = []

        async def go() -> None:
            events.extend(await attack(server.port, timeout=45))

        watch = watch_of(server, go())
        return watch, "; ".join(f"{e.type}: {e.data.get('text', '')}"[:60] for e in events) or "no answer in 45 s"

    return run


def letters(server: ServerProcess, work: Path) -> Outcome:
    events: list = []
    started = time.monotonic()

    async def attack() -> None:
        events.extend(await attack_chunk_then_letters(server.port, timeout=45))

    watch = watch_of(server, attack())
    taken = [e for e in events if e.type == "info"]
    return watch, f"all taken in {time.monotonic() - started:.1f} s" if taken else "not taken in 45 s"


def wordless(server: ServerProcess, work: Path) -> Outcome:
    outcomes: list[str] = []

    async def attack() -> None:
        outcomes.extend(await attack_wordless_streams(server.port, 16, hold_s=10))

    watch = watch_of(server, attack())
    kinds: dict[str, int] = {}
    for outcome in outcomes:
        kind = ("refused (address share)" if "from your address" in outcome
                else "ended: no text" if "got no text" in outcome else outcome[:40])  # fmt: skip
        kinds[kind] = kinds.get(kind, 0) + 1
    return watch, ", ".join(f"{count} {kind}" for kind, count in sorted(kinds.items()))


def queue_flood(server: ServerProcess, work: Path) -> Outcome:
    before = rss_mb(server)
    during: list[float] = []
    _, sent = asyncio.run(attack_queue_flood(server.port, 12.0, lambda: during.append(rss_mb(server)), timeout=60))
    time.sleep(1.0)
    after = rss_mb(server)
    return None, f"RSS {before:.0f} / {during[0]:.0f} / {after:.0f} MB; {sent:.1f} MB sent"


def conn_flood(server: ServerProcess, work: Path) -> Outcome:
    lines = len(server.log().splitlines())
    watch = watch_of(server, attack_connection_flood(server.port, 300))
    time.sleep(0.5)
    return watch, f"{len(server.log().splitlines()) - lines} log lines"


def voice_error(server: ServerProcess, work: Path) -> Outcome:
    outcome = asyncio.run(served(server.port, voice="silent")) or "audio"
    return None, ("names a path: " if str(work) in outcome else "no path: ") + outcome[:90]


def sighup(server: ServerProcess, work: Path) -> Outcome:
    server.proc.send_signal(signal.SIGHUP)
    time.sleep(1.0)
    alive = server.proc.poll() is None
    answered = alive and asyncio.run(timed_describe(server.port)) < DESCRIBE_TIMEOUT_S
    return None, "answers" if answered else f"died (exit {server.proc.poll()})"


def two_models(tree: Path, work: Path, custom_config: Path) -> tuple[ServerProcess, Outcome]:
    household = work / "household"
    household.mkdir()
    write_voice(household / "papa.wav", 3.0)
    write_voice(household / "oma.wav", 3.0)
    voices_file = household / "voices.yaml"
    voices_file.write_text(yaml.safe_dump({"voices": [
        {"name": "papa", "audio": "papa.wav"},
        {"name": "oma", "audio": "oma.wav", "model": str(custom_config)},
    ]}), encoding="utf-8")  # fmt: skip
    (work / "empty").mkdir()
    server = start(tree, work, "--model", "demo", "--model", str(custom_config), "--max-loaded-models", "1",
                   "--max-queue-wait", "3", "--voices", str(voices_file),
                   "--voices-dir", str(work / "empty"))  # fmt: skip
    ready(server)
    result: list[str] = []

    async def attack() -> None:
        reader, writer = await open_stream(server.port, "papa")
        try:
            started = time.monotonic()
            outcome = await served(server.port, voice="oma", timeout=30)
            result.append(f"{(outcome or 'audio')[:70]} after {time.monotonic() - started:.1f} s")
        finally:
            writer.close()

    watch = asyncio.run(watched(server.port, attack(), request=False))
    return server, (watch, result[0] if result else "-")


ATTACKS: dict[str, Callable[[ServerProcess, Path], Outcome]] = {
    "json-bomb": answered(attack_json_bomb), "huge-chunk": answered(attack_huge_chunk), "letters": letters,
    "wordless": wordless,
    "queue-flood": queue_flood, "conn-flood": conn_flood, "voice-error": voice_error, "sighup": sighup,
}  # fmt: skip


def stop(server: ServerProcess) -> str:
    """SIGTERM; whether the server ended within SIGTERM_WITHIN_S (else it is killed)."""
    if server.proc.poll() is not None:
        return f"already gone (exit {server.proc.returncode})"
    started = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    try:
        code = server.proc.wait(SIGTERM_WITHIN_S)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        server.proc.wait()
        return f"ignored ({SIGTERM_WITHIN_S:g} s), killed"
    return f"exit {code} in {time.monotonic() - started:.1f} s"


def run_one(name: str, tree: Path, work: Path, custom_config: Path | None) -> list[str]:
    if name == "two-models":
        assert custom_config is not None
        server, (watch, figure) = two_models(tree, work, custom_config)
    else:
        server = start(tree, work, "--model", "demo", *options(work))
        ready(server)
        asyncio.run(served(server.port, timeout=120))  # loaded and warmed up
        watch, figure = ATTACKS[name](server, work)
    ended = stop(server)
    if watch is None:
        worst = "-"
    elif watch.worst_describe < DESCRIBE_TIMEOUT_S:
        worst = f"{watch.worst_describe * 1000:.0f} ms"
    else:
        worst = f"no answer in {DESCRIBE_TIMEOUT_S:g} s"
    others = "-" if watch is None or not watch.requests else f"{watch.requests.count(None)}/{len(watch.requests)}"
    return [name, str(tree), worst, others, figure.replace("|", "/"), ended]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="+", type=Path, help="code trees to compare (each holds wyoming_pocket_tts/)")
    parser.add_argument("--attacks", default=",".join([*ATTACKS, "two-models"]),
                        help="which to run, comma-separated (default: all)")  # fmt: skip
    args = parser.parse_args()
    trees = [tree.resolve() for tree in args.trees]
    wanted = args.attacks.split(",")
    rows = []
    with tempfile.TemporaryDirectory(prefix="attacks-bench-") as scratch:
        root = Path(scratch)
        custom_config = None
        if "two-models" in wanted:
            from engine_fixtures import local_architecture

            custom_config = local_architecture("english_7m_2026-10", root / "model").config_path
        for name in wanted:
            for index, tree in enumerate(trees):
                work = root / f"{name}-{index}"
                work.mkdir()
                row = run_one(name, tree, work, custom_config)
                print(" | ".join(row), file=sys.stderr, flush=True)
                rows.append(row)
    print("| attack | tree | worst describe | other client served | the attack's figure | SIGTERM after |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
