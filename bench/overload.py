"""How a server copes with more than it can serve, as its clients see it.

    python bench/overload.py 127.0.0.1:10200 [127.0.0.1:10300 ...] [--clients 20] [--stalled 2]

Two scenarios, run against each server in turn (start them with the same options; an idle
server costs no CPU, so two can run side by side and be compared in one run):
  * burst: ``--clients`` one-shot requests of the same paragraph at once. Reported: how
    many were served and how many refused (an ``error`` event), the first audio of the
    served ones (median, worst), and when the refused ones heard so.
  * stall: ``--stalled`` clients ask for a long text and then read nothing; 3 s later a
    normal client asks for one sentence. Reported: its time to first audio (or its error).
Prints a Markdown table. Only loopback addresses are used; every wait is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from dataclasses import dataclass

from wyoming.audio import AudioChunk
from wyoming.client import AsyncTcpClient
from wyoming.tts import Synthesize

PARAGRAPH = (
    "Good morning. Today will be cloudy with a chance of rain in the afternoon, and the "
    "temperature will stay around twelve degrees. Take an umbrella if you go out later."
)
SENTENCE = "The living room lights are now switched off."
LONG_TEXT = " ".join(f"This is sentence number {n} of a very long answer." for n in range(1, 80))
READ_TIMEOUT_S = 300.0


@dataclass
class Outcome:
    first_audio_s: float | None = None
    error_s: float | None = None
    error: str | None = None


async def one_shot(host: str, port: int, text: str) -> Outcome:
    outcome = Outcome()
    started = time.perf_counter()
    async with AsyncTcpClient(host, port) as client:
        await client.write_event(Synthesize(text=text).event())
        while True:
            event = await asyncio.wait_for(client.read_event(), READ_TIMEOUT_S)
            if event is None or event.type == "error":
                outcome.error_s = time.perf_counter() - started
                outcome.error = event.data.get("text") if event is not None else "closed"
                return outcome
            if AudioChunk.is_type(event.type) and outcome.first_audio_s is None:
                outcome.first_audio_s = time.perf_counter() - started
            if event.type == "audio-stop":
                return outcome


async def burst(host: str, port: int, clients: int, repeat: int) -> str:
    text = " ".join([PARAGRAPH] * repeat)
    outcomes = await asyncio.gather(*(one_shot(host, port, text) for _ in range(clients)))
    served = sorted(o.first_audio_s for o in outcomes if o.error is None and o.first_audio_s is not None)
    refused = [o for o in outcomes if o.error is not None]
    text = f"{len(served)} served"
    if served:
        text += f", first audio median {statistics.median(served):.1f} s, worst {served[-1]:.1f} s"
    if refused:
        text += f"; {len(refused)} refused after {min(o.error_s for o in refused):.1f}-"  # type: ignore[type-var]
        text += f"{max(o.error_s for o in refused):.1f} s ({refused[0].error})"  # type: ignore[type-var]
    return text


async def stall(host: str, port: int, stalled: int) -> str:
    writers = []
    for _ in range(stalled):
        # A raw socket, never read (the wyoming client would read).
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(json.dumps({"type": "synthesize", "data": {"text": LONG_TEXT}}).encode() + b"\n")
        await writer.drain()
        writers.append((reader, writer))
    await asyncio.sleep(3.0)
    try:
        outcome = await asyncio.wait_for(one_shot(host, port, SENTENCE), READ_TIMEOUT_S)
    except asyncio.TimeoutError:
        outcome = Outcome(error=f"no answer in {READ_TIMEOUT_S:g} s")
    for _, writer in writers:
        writer.close()
    if outcome.first_audio_s is not None:
        return f"served, first audio after {outcome.first_audio_s:.2f} s"
    return f"not served: {outcome.error}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("servers", nargs="+", help="HOST:PORT of each server to compare")
    parser.add_argument("--clients", type=int, default=20, help="burst: clients at once (default 20)")
    parser.add_argument("--repeat", type=int, default=1, help="burst: paragraphs per request (default 1)")
    parser.add_argument("--stalled", type=int, default=2, help="stall: clients that read nothing (default 2)")
    args = parser.parse_args()
    rows = []
    for server in args.servers:
        host, _, port_text = server.rpartition(":")
        host, port = host or "127.0.0.1", int(port_text)
        rows.append((server, f"burst of {args.clients}", asyncio.run(burst(host, port, args.clients, args.repeat))))
        time.sleep(2.0)  # let the server settle
        rows.append((server, f"{args.stalled} stalled, then one more", asyncio.run(stall(host, port, args.stalled))))
        time.sleep(2.0)
    print("| server | scenario | outcome |\n|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
