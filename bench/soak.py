"""Resident memory of the real server over many varied requests (issues 18 and 21).

    python bench/soak.py --requests 2000                 # tiny random-weight demo model
    python bench/soak.py --requests 300 --model english  # full-size English architecture, random weights
    python bench/soak.py --requests 500 --server-env LRU_CACHE_CAPACITY=1

Starts `python -m wyoming_pocket_tts` (cwd: this checkout) with a folder of three voice
recordings and a voice cache of two (so voices are evicted and encoded again, as in a
home with more voices than cache), then sends sequential one-shot `synthesize` requests
over Wyoming, texts of 1-300 characters from a seeded generator, voices in turn. Every
`--every` requests it prints the server's resident memory (VmRSS of the process); at the
end, the slope after the warm-up (MB per 100 requests, least squares) and the growth from
the first sample after the warm-up to the last, in percent.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import random
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from proc_status import status_kib  # noqa: E402 -- a sibling module of this script
from server_latency import _free_port, wait_ready  # noqa: E402
from wyoming.audio import AudioChunk, AudioStop  # noqa: E402
from wyoming.client import AsyncTcpClient  # noqa: E402
from wyoming.tts import Synthesize, SynthesizeVoice  # noqa: E402

_LOGGER = logging.getLogger("soak")

WORDS = (
    "the kitchen lights are on and the front door is locked it is twenty one degrees inside "
    "tomorrow brings rain in the morning and sun later please turn off the radio now "
    "your timer for pasta has finished the garage stays open until nine tonight"
).split()
VOICES = ("anna", "bert", "clara")
MAX_CHARS = 300


def soak_texts(count: int, seed: int = 0) -> list[str]:
    """`count` texts of 1 to 300 characters (uniform length), sentence-like, seeded."""
    rng = random.Random(seed)
    texts = []
    for _ in range(count):
        length = rng.randint(1, MAX_CHARS)
        words: list[str] = []
        while sum(len(w) + 1 for w in words) < length:
            words.append(rng.choice(WORDS))
        text = " ".join(words)[:length].strip() or "a"
        if len(text) > 40 and rng.random() < 0.5:  # sometimes two sentences
            middle = text.find(" ", len(text) // 2)
            if middle > 0:
                text = f"{text[:middle]}. {text[middle + 1:].capitalize()}"
        texts.append(text[0].upper() + text[1:] + ("." if len(text) > 3 else ""))
    return texts


async def one_shot(port: int, text: str, voice: str) -> int:
    """Send one request; the number of audio bytes received."""
    received = 0
    async with AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(Synthesize(text=text, voice=SynthesizeVoice(name=voice)).event())
        while True:
            event = await asyncio.wait_for(client.read_event(), 300)
            if event is None:
                raise RuntimeError("the server closed the connection")
            if event.type == "error":
                raise RuntimeError(f"server error for {text!r}: {event.data.get('text')}")
            if AudioChunk.is_type(event.type):
                received += len(AudioChunk.from_event(event).audio)
            if AudioStop.is_type(event.type):
                return received


def rss_mb(pid: int) -> float:
    kib = status_kib("VmRSS", pid)
    if kib is None:
        raise RuntimeError("no /proc/PID/status: the soak needs Linux")
    return kib / 1024


def slope_per_100(points: list[tuple[int, float]]) -> float:
    """Least-squares slope of (request count, MB), in MB per 100 requests."""
    if len(points) < 2:
        return float("nan")
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mean_x) ** 2 for x in xs)
    return 100 * sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / var


def prepare(folder: Path, model: str) -> tuple[str, Path]:
    """The --model value for the server, and a voices folder of three recordings."""
    from engine_fixtures import local_architecture, write_voice_recording

    voices = folder / "voices"
    for index, name in enumerate(VOICES):
        write_voice_recording(voices / f"{name}.wav", seconds=4.0 + index, seed=index)
    if model == "demo":
        return "demo", voices
    return str(local_architecture(model, folder / model).config_path), voices


async def soak(port: int, pid: int, texts: list[str], every: int, warmup: int) -> list[tuple[int, float]]:
    samples = [(0, rss_mb(pid))]
    print(f"{'requests':>8} {'RSS MB':>8} {'audio s':>8} {'elapsed s':>9}", flush=True)
    print(f"{0:>8} {samples[0][1]:>8.1f}", flush=True)
    started, audio_bytes = time.monotonic(), 0
    for done, text in enumerate(texts, start=1):
        audio_bytes += await one_shot(port, text, VOICES[done % len(VOICES)])
        if done % every == 0 or done == warmup or done == len(texts):
            samples.append((done, rss_mb(pid)))
            print(f"{done:>8} {samples[-1][1]:>8.1f} {audio_bytes / 48000:>8.0f} {time.monotonic() - started:>9.0f}",
                  flush=True)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--model", default="demo",
                        help='"demo" (tiny, default) or a catalog architecture, e.g. "english", with random weights')
    parser.add_argument("--every", type=int, default=100, help="print RSS every this many requests")
    parser.add_argument("--warmup", type=int, default=50, help="requests before the growth is measured")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--server-env", default="", help='environment for the server, e.g. "LRU_CACHE_CAPACITY=1"')
    parser.add_argument("--server-args", default="", help="more server options")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        folder = Path(tmp)
        model, voices = prepare(folder, args.model)
        port = _free_port()
        cmd = [sys.executable, "-m", "wyoming_pocket_tts", "--model", model, "--uri", f"tcp://127.0.0.1:{port}",
               "--voices-dir", str(voices), "--no-predefined-voices", "--voice-cache-size", "2",
               "--data-dir", str(folder / "data"), *shlex.split(args.server_args)]  # fmt: skip
        env = {**os.environ, **dict(item.split("=", 1) for item in shlex.split(args.server_env))}
        log_path = folder / "server.log"
        _LOGGER.info("starting (cwd %s): %s %s", ROOT, args.server_env, " ".join(cmd))
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            asyncio.run(wait_ready("127.0.0.1", port, timeout=600))
            samples = asyncio.run(soak(port, proc.pid, soak_texts(args.requests, args.seed), args.every, args.warmup))
        except BaseException:
            sys.stderr.write(log_path.read_text(errors="replace")[-4000:])
            raise
        finally:
            proc.terminate()
            proc.wait(30)
    after = [(n, mb) for n, mb in samples if n >= args.warmup]
    growth = 100 * (after[-1][1] - after[0][1]) / after[0][1] if after else float("nan")
    print(f"\nslope after {args.warmup} warm-up requests: {slope_per_100(after):+.1f} MB per 100 requests; "
          f"RSS {after[0][1]:.0f} -> {after[-1][1]:.0f} MB ({growth:+.1f}%) over requests "
          f"{after[0][0]}-{after[-1][0]}")


if __name__ == "__main__":
    main()
