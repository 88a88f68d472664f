"""Latency of the Wyoming server as a client sees it.

    python bench/server_latency.py 127.0.0.1:10200            # a running server
    python bench/server_latency.py --start --model demo --server-args "--voices-dir DIR"
    python bench/server_latency.py --start --compare "--length-scale 1.25"
    python bench/server_latency.py --start --compare=--no-normalize --written

Measures, over TCP with the `wyoming` client:
  * time to first audio (TTFA) of a one-shot `synthesize` of one sentence;
  * TTFA of Home Assistant's streamed sequence (synthesize-start, one synthesize-chunk per
    LLM-sized delta, the compatibility synthesize, synthesize-stop), from synthesize-start;
  * speed of a 4-sentence streamed reply: seconds of audio per second of wall time
    ("x real time"; above 1 means the audio is made faster than it plays), and its
    real-time factor RTF = wall time / audio time;
  * the same reply requested by two clients at once (how the two cores are shared);
  * with `--starts N` (and `--start`): N fresh servers one after the other, each sent the
    one-shot sentence the instant its `describe` stops saying "(loading)" (or "(warming
    up)"), then
    `--rounds` more: first audio of that first request after start against the later
    ones (the start-up warm-up must not make the first one slower), in wall time and in
    the server's CPU time over each request.
With `--compare ARGS` it starts two servers, the second with ARGS added to its options,
and measures only first audio (one-shot, and streamed with LLM deltas), alternating the two
request by request so that both see the same load: the ratio is the cost of ARGS (e.g. a
length scale, or text normalisation off) to first audio.
Prints a Markdown table. Only loopback addresses are used; every loop is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import shlex
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from wyoming.audio import AudioChunk
from wyoming.client import AsyncTcpClient
from wyoming.info import Describe, Info
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop

_LOGGER = logging.getLogger("server_latency")

ONE_SENTENCE = "The living room lights are now switched off."
REPLY = (
    "Sure, I turned off the lights in the living room. The kitchen lights are still on. "
    "It is twenty one degrees inside and the front door is locked. Is there anything else?"
)
# --written: what Home Assistant and LLM agents write (numbers, units, markdown, emoji).
WRITTEN_SENTENCE = "It is 19.5 °C in the living room, the heating is set to 21 °C."
WRITTEN_REPLY = (
    "**Done!** 👍 I turned off 3 lights at 4:10 PM:\n1. Kitchen, 12 W\n2. Hall, 7.5 W\n"
    "Outside it is -2 °C with 87 % humidity. Is there anything else?"
)


@dataclass
class Run:
    first_audio_s: float = 0.0
    total_s: float = 0.0
    audio_s: float = 0.0
    events: list[str] = field(default_factory=list)


def llm_deltas(text: str, size: int = 12) -> list[str]:
    """Cut like an LLM stream: small pieces that keep their spaces."""
    return [text[i : i + size] for i in range(0, len(text), size)]


async def _read(client: AsyncTcpClient, run: Run, started: float, until: str) -> None:
    while True:
        event = await asyncio.wait_for(client.read_event(), 120)
        if event is None:
            raise RuntimeError("server closed the connection")
        run.events.append(event.type)
        if event.type == "error":
            raise RuntimeError(f"server error: {event.data.get('text')}")
        if AudioChunk.is_type(event.type):
            chunk = AudioChunk.from_event(event)
            if not run.first_audio_s:
                run.first_audio_s = time.perf_counter() - started
            run.audio_s += chunk.seconds
        if event.type == until:
            run.total_s = time.perf_counter() - started
            return


async def one_shot(host: str, port: int, text: str, until: str = "audio-stop") -> Run:
    """`until` "audio-chunk": hang up at first audio (the server cancels the rest)."""
    run = Run()
    async with AsyncTcpClient(host, port) as client:
        started = time.perf_counter()
        await client.write_event(Synthesize(text=text).event())
        await _read(client, run, started, until)
    return run


async def streamed(host: str, port: int, text: str, delta_delay: float, until: str = "synthesize-stopped") -> Run:
    run = Run()
    async with AsyncTcpClient(host, port) as client:
        started = time.perf_counter()

        async def write() -> None:
            await client.write_event(SynthesizeStart().event())
            for delta in llm_deltas(text):
                await client.write_event(SynthesizeChunk(text=delta).event())
                if delta_delay:
                    await asyncio.sleep(delta_delay)
            await client.write_event(Synthesize(text=text).event())
            await client.write_event(SynthesizeStop().event())

        writer = asyncio.create_task(write())
        await _read(client, run, started, until)
        if until == "synthesize-stopped":
            await writer
        else:
            writer.cancel()
            await asyncio.gather(writer, return_exceptions=True)
    return run


async def wait_ready(host: str, port: int, timeout: float, poll_s: float = 0.25) -> None:
    """Until `describe` lists voices and no longer says the model is loading (or warming up)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            async with AsyncTcpClient(host, port) as client:
                await client.write_event(Describe().event())
                event = await asyncio.wait_for(client.read_event(), 5)
                if event is not None and Info.is_type(event.type):
                    program = Info.from_event(event).tts[0]
                    status = program.description or ""
                    if program.voices and "(loading)" not in status and "(warming up)" not in status:
                        return
        except OSError:
            pass
        await asyncio.sleep(poll_s)
    raise TimeoutError("server not ready")


def start_server(model: str, server_args: list[str]) -> tuple[subprocess.Popen, str, int]:
    port = _free_port()
    host = "127.0.0.1"
    cmd = [sys.executable, "-m", "wyoming_pocket_tts", "--model", model,
           "--uri", f"tcp://{host}:{port}", *server_args]  # fmt: skip
    _LOGGER.info("starting: %s", " ".join(cmd))
    log = open(Path(os.environ.get("TMPDIR", "/tmp")) / f"server_latency-{port}.log", "wb")
    _LOGGER.info("server log: %s", log.name)
    proc = subprocess.Popen(cmd, cwd=Path(__file__).resolve().parents[1], stdout=log, stderr=log)
    return proc, host, port


def stop_server(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


async def first_audio(host: str, port: int, text: str) -> float:
    """Seconds from a one-shot `synthesize` to its first audio chunk; then hang up (the
    server cancels the rest), so a slow machine measures many starts quickly."""
    async with AsyncTcpClient(host, port) as client:
        started = time.perf_counter()
        await client.write_event(Synthesize(text=text).event())
        while True:
            event = await asyncio.wait_for(client.read_event(), 300)
            if event is None or event.type == "error":
                raise RuntimeError(f"no audio: {event.data.get('text') if event else 'connection closed'}")
            if AudioChunk.is_type(event.type):
                return time.perf_counter() - started


async def first_after_start(host: str, port: int, rounds: int,
                            pid: int | None = None) -> tuple[list[float], list[float]]:  # fmt: skip
    """First audio of the first one-shot the instant the model is ready, then of `rounds`
    later ones: their wall times and (with the server's `pid`) the server's CPU time
    (all threads, user + system) over each, in seconds."""
    await wait_ready(host, port, timeout=600, poll_s=0.02)
    walls, cpus = [], []
    for index in range(rounds + 1):
        if index:
            await asyncio.sleep(1.0)  # let the cancelled synthesis end first
        before = _cpu_seconds(pid) if pid else 0.0
        walls.append(await first_audio(host, port, ONE_SENTENCE))
        cpus.append(_cpu_seconds(pid) - before if pid else float("nan"))
    return walls, cpus


def bench_starts(model: str, server_args: list[str], starts: int, rounds: int) -> list[tuple[str, str]]:
    """The first request after each start against the later ones, in wall time and in
    the server's CPU time (which a busy machine inflates less; with a multi-threaded first
    frame, spinning worker threads still count)."""
    firsts: list[float] = []
    laters: list[float] = []
    first_cpus: list[float] = []
    later_cpus: list[float] = []
    for _ in range(starts):
        proc, host, port = start_server(model, server_args)
        try:
            walls, cpus = asyncio.run(first_after_start(host, port, rounds, proc.pid))
        finally:
            stop_server(proc)
        _LOGGER.info("first %.0f ms, later %s ms; server CPU %s ms", walls[0] * 1000,
                     ", ".join(f"{v * 1000:.0f}" for v in walls[1:]), ", ".join(f"{v * 1000:.0f}" for v in cpus))
        firsts.append(walls[0])
        laters.append(_median(walls[1:]))
        first_cpus.append(cpus[0])
        later_cpus.append(_median(cpus[1:]))
    ratio = _median(firsts) / _median(laters)
    return [
        (f"TTFA one-shot, first request after start ({starts} starts: each, then median)",
         ", ".join(f"{v * 1000:.0f}" for v in firsts) + f" ms; median {_median(firsts) * 1000:.0f} ms"),
        (f"TTFA one-shot, the {rounds} requests after it (median of each start's median)",
         f"{_median(laters) * 1000:.0f} ms"),
        ("first / later", f"{ratio:.2f}x"),
        ("server CPU time to first audio: first, later (medians)",
         f"{_median(first_cpus) * 1000:.0f} ms, {_median(later_cpus) * 1000:.0f} ms: "
         f"{_median(first_cpus) / _median(later_cpus):.2f}x"),
    ]  # fmt: skip


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


async def bench(host: str, port: int, rounds: int, delta_delay: float) -> list[tuple[str, str]]:
    await one_shot(host, port, ONE_SENTENCE)  # warm-up: first-use costs are not latency
    await streamed(host, port, REPLY, 0.0)

    ttfa_one = [(await one_shot(host, port, ONE_SENTENCE)).first_audio_s for _ in range(rounds)]
    stream_runs = [await streamed(host, port, REPLY, delta_delay) for _ in range(rounds)]
    fast_runs = [await streamed(host, port, REPLY, 0.0) for _ in range(rounds)]
    pair = await asyncio.gather(streamed(host, port, REPLY, 0.0), streamed(host, port, REPLY, 0.0))

    def speed(run: Run) -> float:
        return run.audio_s / run.total_s

    rows = [
        ("TTFA one-shot, 1 sentence (median)", f"{_median(ttfa_one) * 1000:.0f} ms"),
        (f"TTFA streamed, LLM deltas every {delta_delay * 1000:.0f} ms (median)",
         f"{_median([r.first_audio_s for r in stream_runs]) * 1000:.0f} ms"),
        ("TTFA streamed, whole text at once (median)",
         f"{_median([r.first_audio_s for r in fast_runs]) * 1000:.0f} ms"),
        ("4-sentence streamed reply: audio / wall time (median)",
         f"{_median([speed(r) for r in fast_runs]):.2f}x real time "
         f"(RTF {_median([r.total_s / r.audio_s for r in fast_runs]):.2f}; "
         f"{_median([r.audio_s for r in fast_runs]):.1f} s of audio)"),
        ("two clients at once: each client's audio / wall time",
         " and ".join(f"{speed(r):.2f}x" for r in pair)
         + f" (first audio {', '.join(f'{r.first_audio_s * 1000:.0f}' for r in pair)} ms)"),
    ]  # fmt: skip
    for run in [*stream_runs, *fast_runs, *pair]:
        assert run.events.count("audio-start") == 1 and run.events[-1] == "synthesize-stopped"
    return rows


async def compare(base: tuple[str, int], variant: tuple[str, int], rounds: int, delta_delay: float,
                  settle: Callable[[], None], texts: tuple[str, str] = (ONE_SENTENCE, REPLY),
                  ) -> list[tuple[str, list[float], list[float]]]:
    """First audio (ms) of `base` and `variant`, measured alternately, request by request.

    Each request hangs up at its first audio chunk (the server cancels the rest within a
    frame), and the next one starts once `settle()` returns (both servers idle), so a long
    reply (a model without an end of speech) does not make the comparison slow.
    """
    servers = (base, variant)
    first = "audio-chunk"
    sentence, reply = texts
    for host, port in servers:  # warm-up: first-use costs are not latency
        await one_shot(host, port, sentence, first)
        await streamed(host, port, reply, 0.0, first)
    kinds = {
        "TTFA one-shot, 1 sentence": lambda host, port: one_shot(host, port, sentence, first),
        f"TTFA streamed, LLM deltas every {delta_delay * 1000:.0f} ms":
            lambda host, port: streamed(host, port, reply, delta_delay, first),
    }  # fmt: skip
    rows = []
    for name, request in kinds.items():
        firsts: tuple[list[float], list[float]] = ([], [])
        for index in range(2 * rounds):
            # ABBA order: neither server is always the one that runs right after the other.
            which = (index + index // 2) % 2
            run = await request(*servers[which])
            firsts[which].append(run.first_audio_s * 1000)
            settle()
        rows.append((name, *firsts))
    return rows


def _cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_idle(pids: list[int], quiet_s: float = 0.3, limit_s: float = 0.03, timeout_s: float = 10.0) -> None:
    """Until the processes used under `limit_s` of CPU over `quiet_s` (at most `timeout_s`):
    a cancelled synthesis or a warm-up must not run into the next measurement."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        before = sum(_cpu_seconds(pid) for pid in pids)
        time.sleep(quiet_s)
        if sum(_cpu_seconds(pid) for pid in pids) - before < limit_s:
            return


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("server", nargs="?", default="127.0.0.1:10200", help="HOST:PORT")
    parser.add_argument("--start", action="store_true", help="start a server here for the run")
    parser.add_argument("--model", default="demo", help="with --start: the model (default demo)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--delta-delay", type=float, default=0.05,
                        help="seconds between streamed deltas (an LLM's pace; default 0.05)")
    parser.add_argument("--server-args", default="",
                        help='with --start: more server options, e.g. "--voices-dir DIR --quantize"')
    parser.add_argument("--starts", type=int, default=0,
                        help="with --start: only measure the first request after N fresh starts")
    parser.add_argument("--compare", metavar="ARGS",
                        help='with --start: first audio against a second server with these options '
                             'added, e.g. "--length-scale 1.25"')
    parser.add_argument("--written", action="store_true",
                        help="with --compare: texts as Home Assistant and LLMs write them (numbers, "
                             "units, markdown, emoji) instead of plain prose")
    args = parser.parse_args()
    server_args = shlex.split(args.server_args)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.compare is not None:
        if not args.start:
            parser.error("--compare needs --start")
        texts = (WRITTEN_SENTENCE, WRITTEN_REPLY) if args.written else (ONE_SENTENCE, REPLY)
        _run_comparison(args.model, server_args, shlex.split(args.compare), args.rounds, args.delta_delay, texts)
        return

    if args.starts:
        if not args.start:
            parser.error("--starts needs --start")
        print("| first request after start | |\n|---|---|")
        for name, value in bench_starts(args.model, server_args, args.starts, args.rounds):
            print(f"| {name} | {value} |")
        return

    proc = None
    if args.start:
        proc, host, port = start_server(args.model, server_args)
    else:
        host, _, port_text = args.server.rpartition(":")
        host, port = host or "127.0.0.1", int(port_text)
    try:
        asyncio.run(wait_ready(host, port, timeout=300))
        rows = asyncio.run(bench(host, port, args.rounds, args.delta_delay))
    finally:
        if proc is not None:
            stop_server(proc)
    print(f"| {host}:{port} | |\n|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")



def _run_comparison(model: str, server_args: list[str], extra: list[str], rounds: int, delta_delay: float,
                    texts: tuple[str, str]) -> None:
    procs = []
    try:
        base = start_server(model, server_args)
        procs.append(base[0])
        variant = start_server(model, [*server_args, *extra])
        procs.append(variant[0])
        for _, host, port in (base, variant):
            asyncio.run(wait_ready(host, port, timeout=300))
        settle = partial(wait_idle, [proc.pid for proc in procs])
        settle()  # the warm-ups
        rows = asyncio.run(compare(base[1:], variant[1:], rounds, delta_delay, settle, texts))
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(10)
    kind = "written" if texts[0] != ONE_SENTENCE else "prose"
    print(f"| {model}, {kind}, {rounds} rounds each, alternating | base | {' '.join(extra)} | ratio |\n"
          "|---|---|---|---|")
    for name, base_ms, variant_ms in rows:
        ratio = _median(variant_ms) / _median(base_ms)
        print(f"| {name}, median (min) | {_median(base_ms):.0f} ({min(base_ms):.0f}) ms "
              f"| {_median(variant_ms):.0f} ({min(variant_ms):.0f}) ms | {ratio:.2f} |")


if __name__ == "__main__":
    main()
