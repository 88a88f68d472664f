"""Several satellites at once: 1, 2, 4 and 8 clients sending a reply together, over Wyoming.

    python bench/concurrency.py                          # this checkout, float32 and int8
    python bench/concurrency.py --baseline /tmp/before   # side by side with another checkout
    python bench/concurrency.py --clients 1 4 --precision float32 --rounds 3

Each server runs this checkout's (or the baseline's) `python -m wyoming_pocket_tts` on the
same random weights of the default English architecture (made once, locally), with one
voice state, `--max-concurrent 8` (so nobody waits in line: the engines are compared, not
their queues), a long `--max-queue-wait`, and a fixed end-of-speech threshold that random
weights never reach, so every reply is as long as its text allows. The servers run one
after the other, never together, the trees alternating which goes first.

For every number of clients, all send the same one-shot Home Assistant reply at the same
instant (each on its own connection) and read their audio as fast as it comes. Reported,
medians over `--rounds` rounds: each client's speed (seconds of audio per wall second from
its request to its audio-stop; the slowest client and the median one), its first audio
(the slowest and the median), the aggregate (all clients' audio per wall second of the
round) and that aggregate against one client alone; the server's resident memory at its
peak during the round of the most clients.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from engine_bench import prepare_model  # noqa: E402 -- sibling modules of this script
from proc_status import status_kib  # noqa: E402
from server_latency import _free_port, wait_ready  # noqa: E402
from wyoming.audio import AudioChunk  # noqa: E402
from wyoming.client import AsyncTcpClient  # noqa: E402
from wyoming.tts import Synthesize  # noqa: E402

_LOGGER = logging.getLogger("concurrency")

# A short Home Assistant reply, as a satellite gets it.
REPLY = "Sure, I turned off the lights in the living room. The kitchen lights are still on."
NO_EOS = "1e9"
READ_TIMEOUT_S = 300.0


@dataclass
class Client:
    first_audio_s: float = 0.0
    total_s: float = 0.0
    audio_s: float = 0.0

    @property
    def speed(self) -> float:
        return self.audio_s / self.total_s


async def one_client(port: int, text: str, start: asyncio.Event) -> Client:
    client = Client()
    async with AsyncTcpClient("127.0.0.1", port) as connection:
        await start.wait()
        started = time.perf_counter()
        await connection.write_event(Synthesize(text=text).event())
        while True:
            event = await asyncio.wait_for(connection.read_event(), READ_TIMEOUT_S)
            if event is None or event.type == "error":
                raise RuntimeError(f"client failed: {event.data.get('text') if event else 'connection closed'}")
            if AudioChunk.is_type(event.type):
                if not client.first_audio_s:
                    client.first_audio_s = time.perf_counter() - started
                client.audio_s += AudioChunk.from_event(event).seconds
            if event.type == "audio-stop":
                client.total_s = time.perf_counter() - started
                return client


async def one_round(port: int, clients: int) -> tuple[list[Client], float]:
    """All `clients` at once; their results and the round's wall time."""
    start = asyncio.Event()
    tasks = [asyncio.create_task(one_client(port, REPLY, start)) for _ in range(clients)]
    await asyncio.sleep(0.2)  # every connection open before anyone speaks
    started = time.perf_counter()
    start.set()
    results = await asyncio.gather(*tasks)
    return list(results), time.perf_counter() - started


class PeakRss:
    """The highest VmRSS of a process, sampled every 50 ms while active."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak_kib, self._stop = pid, 0, threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.05):
            self.peak_kib = max(self.peak_kib, status_kib("VmRSS", self.pid) or 0)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def run_server(tree: Path, config: Path, voice: Path, precision: str, counts: list[int], rounds: int,
               data_dir: Path) -> dict[int, dict[str, float]]:  # fmt: skip
    port = _free_port()
    quantize = ["--quantize", "int8"] if precision == "int8" else ["--no-quantize"]
    cmd = [sys.executable, "-m", "wyoming_pocket_tts", "--model", str(config), "--voice", str(voice),
           "--uri", f"tcp://127.0.0.1:{port}", "--data-dir", str(data_dir), *quantize,
           "--max-concurrent", "8", "--max-queue-wait", "120", "--eos-threshold", NO_EOS]  # fmt: skip
    log_path = data_dir / f"server-{port}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, cwd=tree, stdout=log, stderr=subprocess.STDOUT,
                                env={**os.environ, "PYTHONPATH": str(tree)})  # fmt: skip
    try:
        asyncio.run(wait_ready("127.0.0.1", port, timeout=600))
        asyncio.run(one_round(port, 1))  # warm-up
        results: dict[int, dict[str, float]] = {}
        for clients in counts:
            rows = []
            with PeakRss(proc.pid) as rss:
                for _ in range(rounds):
                    finished, wall = asyncio.run(one_round(port, clients))
                    rows.append({
                        "slowest_speed": min(c.speed for c in finished),
                        "median_speed": statistics.median(c.speed for c in finished),
                        "worst_first_s": max(c.first_audio_s for c in finished),
                        "median_first_s": statistics.median(c.first_audio_s for c in finished),
                        "aggregate": sum(c.audio_s for c in finished) / wall,
                    })  # fmt: skip
            results[clients] = {key: statistics.median(row[key] for row in rows) for key in rows[0]}
            results[clients]["peak_rss_mb"] = rss.peak_kib / 1024
            _LOGGER.info("%s %s, %d client(s): %s", tree, precision, clients, results[clients])
        return results
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", type=Path, metavar="DIR", help="another checkout (e.g. a git worktree) to compare")
    parser.add_argument("--precision", choices=["float32", "int8", "both"], default="both")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--rounds", type=int, default=2, help="rounds per number of clients (medians)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    trees = {"ours": ROOT} if args.baseline is None else {"baseline": args.baseline.resolve(), "ours": ROOT}
    precisions = ["float32", "int8"] if args.precision == "both" else [args.precision]
    counts = sorted(set(args.clients) | {1})
    table: list[tuple[str, str, int, dict[str, float], float]] = []
    with tempfile.TemporaryDirectory(prefix="concurrency-bench-") as tmp:
        config, voice = prepare_model(Path(tmp))
        for index, precision in enumerate(precisions):
            order = list(trees) if index % 2 == 0 else list(trees)[::-1]
            for name in order:
                data_dir = Path(tmp) / f"{name}-{precision}"
                data_dir.mkdir()
                results = run_server(trees[name], config, voice, precision, counts, args.rounds, data_dir)
                alone = results[1]["aggregate"]
                table += [(precision, name, n, results[n], results[n]["aggregate"] / alone) for n in counts]

    out = sys.stdout
    out.write("\n| precision | server | clients | each: slowest / median (x real time) | first audio: worst / median (s) "
              "| aggregate (x real time) | aggregate / one alone | peak RSS (MB) |\n")
    out.write("|---|---|---|---|---|---|---|---|\n")
    for precision, name, clients, r, ratio in sorted(table, key=lambda row: (row[0], row[1], row[2])):
        out.write(f"| {precision} | {name} | {clients} | {r['slowest_speed']:.2f} / {r['median_speed']:.2f} | "
                  f"{r['worst_first_s']:.2f} / {r['median_first_s']:.2f} | {r['aggregate']:.2f} | {ratio:.2f}x | "
                  f"{r['peak_rss_mb']:.0f} |\n")


if __name__ == "__main__":
    main()
