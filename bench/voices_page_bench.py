"""Time to the first audio of a preview on the voices page, against the same request
straight over Wyoming, alternated in one run on one server.

    python bench/voices_page_bench.py                      # demo model, 10 rounds
    python bench/voices_page_bench.py --model english --rounds 20

The page's preview is a Wyoming client of its own server (over loopback) that streams the
audio to the browser as WAV; this measures what that path adds: from the HTTP request to
the first PCM byte after the WAV header, against from the Wyoming `synthesize` to the
first `audio-chunk`. Medians and ranges; the machine's load is printed with them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from server_fixtures import free_port, one_shot, start_server_process, wait_port, wait_voices  # noqa: E402

TEXT = "The front door is locked, and the lights in the kitchen are off."


async def page_first_audio(url: str, csrf: str, voice: str) -> float:
    async with aiohttp.ClientSession() as session:
        started = time.monotonic()
        async with session.post(url + "api/preview", json={"voice": voice, "text": TEXT},
                                headers={"X-CSRF-Token": csrf}) as response:  # fmt: skip
            assert response.status == 200, await response.text()
            received = 0
            first = None
            async for chunk in response.content.iter_any():
                received += len(chunk)
                if first is None and received > 44:
                    first = time.monotonic() - started
            assert first is not None
            return first


async def wyoming_first_audio(port: int, voice: str) -> float:
    started = time.monotonic()
    response = await one_shot(port, TEXT, voice=voice, timeout=120)
    assert response.first_audio_at is not None, response.types
    return response.first_audio_at - started


async def csrf_of(url: str) -> str:
    async with aiohttp.ClientSession() as session:
        async with session.get(url) as response:
            html = await response.text()
    return json.loads(html.split('id="page-settings">', 1)[1].split("</script>", 1)[0])["csrf"]


def summary(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.0f} ms ({min(values) * 1000:.0f}-{max(values) * 1000:.0f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="demo")
    parser.add_argument("--voice", default=None, help="default: the model's default voice")
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        page_port = free_port()
        (Path(folder) / "voices").mkdir()
        server = start_server_process(Path(folder), "--model", args.model, "--http", f"127.0.0.1:{page_port}",
                                      "--voices-dir", str(Path(folder) / "voices"))  # fmt: skip
        try:
            wait_voices(server, port_timeout=60)
            asyncio.run(wait_port(page_port))
            url = f"http://127.0.0.1:{page_port}/"
            csrf = asyncio.run(csrf_of(url))
            voice = args.voice or ("demo" if args.model == "demo" else "alba")
            asyncio.run(wyoming_first_audio(server.port, voice))  # warm: the voice encoded, the warm-up over
            page, direct = [], []
            for _ in range(args.rounds):
                direct.append(asyncio.run(wyoming_first_audio(server.port, voice)))
                page.append(asyncio.run(page_first_audio(url, csrf, voice)))
            load = os.getloadavg()
            print(f"model {args.model}, voice {voice}, {args.rounds} rounds alternated, "
                  f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")  # fmt: skip
            print(f"first audio, Wyoming directly:     {summary(direct)}")
            print(f"first audio, through the page:     {summary(page)}")
            print(f"page minus Wyoming, per round:     {summary([p - d for p, d in zip(page, direct)])}")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
