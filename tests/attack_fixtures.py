"""One client against everyone else (issue 27, items 1, 2, 4, 6 and 7): the attacks, and a
watch that measures what the other clients get meanwhile.

Shared by tests/test_server_attacks_process.py (which asserts) and bench/attacks.py (which
prints the figures for two code trees side by side). The attacker connects from
ATTACKER_HOST, the other clients from VICTIM_HOST: two addresses, as a misbehaving device
and Home Assistant are (Linux routes all of 127.0.0.0/8 to the loopback interface).

`watched` runs an attack and meanwhile, from VICTIM_HOST: a `describe` every
DESCRIBE_EVERY_S on a new connection (its latency; no answer within DESCRIBE_TIMEOUT_S
counts as that), and one-shot requests one after the other (whether one got audio).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from wyoming.event import Event, async_read_event, async_write_event
from wyoming.info import Describe, Info
from wyoming.tts import SynthesizeChunk, SynthesizeStart

ATTACKER_HOST = "127.0.0.1"
VICTIM_HOST = "127.0.0.2"
DESCRIBE_EVERY_S = 0.25
DESCRIBE_TIMEOUT_S = 5.0
# How long the other client's one-shot may take (the demo model speaks it in well under a second).
SERVED_TIMEOUT_S = 20.0
MIB = 1 << 20


def event_bytes(event: Event) -> bytes:
    """One event as Wyoming frames it (header line, then the data)."""
    data = json.dumps(event.data).encode()
    return json.dumps({"type": event.type, "data_length": len(data)}).encode() + b"\n" + data


async def connect(port: int, host: str, receive_buffer: int | None = None) -> tuple[asyncio.StreamReader,
                                                                                     asyncio.StreamWriter]:  # fmt: skip
    """A connection to the server at 127.0.0.1:`port` from address `host`; a small
    `receive_buffer` makes a client whose unread replies stay on the server's side."""
    sock = socket.socket()
    sock.setblocking(False)
    if receive_buffer is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.bind((host, 0))
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    return await asyncio.open_connection(sock=sock)


async def next_event(reader: asyncio.StreamReader, types: set[str], timeout: float) -> Event | None:
    """The first event of one of `types` (or an error), None if the connection closed first."""
    async with asyncio.timeout(timeout):
        while True:
            event = await async_read_event(reader)
            if event is None or event.type in types or event.type == "error":
                return event


async def timed_describe(port: int, host: str = VICTIM_HOST, timeout: float = DESCRIBE_TIMEOUT_S) -> float:
    """Seconds until a describe on a new connection is answered with `info`; `timeout` if it
    is not answered (refused, closed, or late)."""
    started = time.monotonic()
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await connect(port, host)
            try:
                await async_write_event(Describe().event(), writer)
                event = await next_event(reader, {"info"}, timeout)
            finally:
                writer.close()
    except (TimeoutError, OSError):
        return timeout
    if event is None or not Info.is_type(event.type):
        return timeout
    return time.monotonic() - started


async def served(port: int, host: str = VICTIM_HOST, text: str = "Hello there.",
                 voice: str | None = None, timeout: float = SERVED_TIMEOUT_S) -> str | None:  # fmt: skip
    """A one-shot request from `host`: None if it got audio, else what went wrong."""
    data: dict[str, Any] = {"text": text}
    if voice is not None:
        data["voice"] = {"name": voice}
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await connect(port, host)
            try:
                await async_write_event(Event(type="synthesize", data=data), writer)
                audio = False
                while True:
                    event = await async_read_event(reader)
                    if event is None:
                        return "closed without audio"
                    if event.type == "error":
                        return "error: " + str(event.data.get("text"))
                    audio = audio or event.type == "audio-chunk"
                    if event.type == "audio-stop":
                        return None if audio else "no audio"
            finally:
                writer.close()
    except TimeoutError:
        return f"no reply in {timeout:g} s"
    except OSError as err:
        return f"connection failed: {err}"


@dataclass
class Watch:
    """What the other clients got while an attack ran."""

    describes: list[float] = field(default_factory=list)
    # The outcome of each one-shot request (None: audio).
    requests: list[str | None] = field(default_factory=list)
    # Seconds the attack itself took.
    attack_s: float = 0.0

    @property
    def worst_describe(self) -> float:
        return max(self.describes, default=float("nan"))

    @property
    def served(self) -> bool:
        return any(outcome is None for outcome in self.requests)

    def summary(self) -> str:
        failures = sorted({outcome for outcome in self.requests if outcome is not None})
        return (f"{len(self.describes)} describes, worst {self.worst_describe:.3f} s; "
                f"{self.requests.count(None)}/{len(self.requests)} requests served"
                + (f" ({'; '.join(failures)[:200]})" if failures else ""))  # fmt: skip


async def watched(port: int, attack: Awaitable[Any], *, min_s: float = 2.0, request: bool = True,
                  voice: str | None = None) -> Watch:  # fmt: skip
    """Run `attack`, describing and requesting from VICTIM_HOST meanwhile (for at least
    `min_s`, and until the attack and a last request have ended)."""
    watch = Watch()
    started = time.monotonic()
    attack_task = asyncio.ensure_future(attack)

    async def describing() -> None:
        while not attack_task.done() or time.monotonic() - started < min_s:
            watch.describes.append(await timed_describe(port))
            await asyncio.sleep(DESCRIBE_EVERY_S)

    async def requesting() -> None:
        await asyncio.sleep(0.2)  # the attack first
        while True:
            watch.requests.append(await served(port, voice=voice))
            if attack_task.done() and time.monotonic() - started >= min_s:
                return
            await asyncio.sleep(0.2)

    tasks = [asyncio.ensure_future(describing())]
    if request:
        tasks.append(asyncio.ensure_future(requesting()))
    try:
        await attack_task
        watch.attack_s = time.monotonic() - started
        await asyncio.gather(*tasks)
    finally:
        for task in (attack_task, *tasks):
            task.cancel()
    return watch


# -- the attacks ------------------------------------------------------------------------


async def send_and_wait_close(port: int, data: bytes | list[bytes], timeout: float,
                              until: str | None = None) -> list[Event]:  # fmt: skip
    """Send `data` (or each block of a list, as written) from ATTACKER_HOST; the events
    received until the server closes (or `timeout`, or an event of type `until`)."""
    reader, writer = await connect(port, ATTACKER_HOST)
    events: list[Event] = []
    try:
        for block in [data] if isinstance(data, bytes) else data:
            writer.write(block)
            await writer.drain()
        with contextlib.suppress(TimeoutError, OSError):
            async with asyncio.timeout(timeout):
                while (event := await async_read_event(reader)) is not None:
                    events.append(event)
                    if event.type == until:
                        break
    except OSError:
        pass  # the server closed on us while we wrote: what it sent was read (or lost)
    finally:
        writer.close()
    return events


def json_bomb(size: int = MIB) -> bytes:
    """A synthesize whose data section is `size` bytes of a string of escaped quotes that
    never ends: the former nesting check's regular expression tried each quote as the
    start of a string, and scanned to the end from each (hours for a MiB)."""
    body = b'{"text": "' + b'\\"' * ((size - 10) // 2)
    return json.dumps({"type": "synthesize", "data_length": len(body)}).encode() + b"\n" + body


async def attack_json_bomb(port: int, timeout: float = 120.0) -> list[Event]:
    return await send_and_wait_close(port, json_bomb(), timeout)


async def attack_huge_chunk(port: int, timeout: float = 120.0) -> list[Event]:
    """A stream whose one chunk is a megabyte of "a. a. a.": a sentence end at every
    third character, none of them one (seconds of work for the sentence splitter)."""
    blocks = [event_bytes(SynthesizeStart().event()),
              event_bytes(SynthesizeChunk(text="a. " * 333_000).event())]  # fmt: skip
    return await send_and_wait_close(port, blocks, timeout)


async def attack_chunk_then_letters(port: int, letters: int = 3_000, timeout: float = 120.0) -> list[Event]:
    """A stream of 40,000 characters with no sentence end, then one-letter chunks (each
    made the former splitter scan all that is pending again), then a describe: answered
    once they have all been taken."""
    blocks = [event_bytes(SynthesizeStart().event()), event_bytes(SynthesizeChunk(text="word " * 8_000).event()),
              b"".join(event_bytes(SynthesizeChunk(text="a").event()) for _ in range(letters)),
              event_bytes(Describe().event())]  # fmt: skip
    return await send_and_wait_close(port, blocks, timeout, until="info")


async def attack_wordless_streams(port: int, count: int, hold_s: float) -> list[str]:
    """`count` connections from ATTACKER_HOST, each opening a stream and sending nothing
    more, held for `hold_s`: how each ended ("error: ...", "closed", "open")."""

    async def one() -> str:
        try:
            reader, writer = await connect(port, ATTACKER_HOST)
        except OSError as err:
            return f"connection failed: {err}"
        try:
            await async_write_event(SynthesizeStart().event(), writer)
            event = await next_event(reader, set(), hold_s)
        except TimeoutError:
            return "open"
        except OSError:
            return "closed"
        finally:
            writer.close()
        return "closed" if event is None else "error: " + str(event.data.get("text"))

    return list(await asyncio.gather(*(one() for _ in range(count))))


async def attack_queue_flood(port: int, megabytes: float, during: Callable[[], None] | None = None,
                             timeout: float = 120.0) -> tuple[list[Event], float]:  # fmt: skip
    """A stream of short sentences, `megabytes` of them in 64 KiB chunks, from a client that
    reads nothing; `during()` is called once all is sent (or the server closed). Returns
    what the client got at the end and how many MB it sent."""
    reader, writer = await connect(port, ATTACKER_HOST, receive_buffer=4096)
    chunk = event_bytes(SynthesizeChunk(text="Hi. " * (64 * 1024 // 4)).event())
    sent = 0
    events: list[Event] = []
    try:
        writer.write(event_bytes(SynthesizeStart().event()))
        while sent < megabytes * MIB:
            writer.write(chunk)
            async with asyncio.timeout(timeout):
                await writer.drain()
            sent += len(chunk)
    except (OSError, TimeoutError):
        pass  # the server refused the stream and closed
    if during is not None:
        during()
    with contextlib.suppress(TimeoutError, OSError, asyncio.IncompleteReadError, ValueError):
        async with asyncio.timeout(10):
            while (event := await async_read_event(reader)) is not None:
                if event.type != "audio-chunk":
                    events.append(event)
    writer.close()
    return events, sent / MIB


async def attack_connection_flood(port: int, count: int) -> None:
    """`count` connections one after the other from ATTACKER_HOST, each opening a stream
    and closing at once."""
    start = event_bytes(SynthesizeStart().event())
    for _ in range(count):
        try:
            _, writer = await connect(port, ATTACKER_HOST)
        except OSError:
            continue
        writer.write(start)
        with contextlib.suppress(OSError):
            await writer.drain()
        writer.close()
        await asyncio.sleep(0.002)


async def open_stream(port: int, voice: str, sentence: str = "Hello there, this is a long stream. And") -> tuple[
        asyncio.StreamReader, asyncio.StreamWriter]:  # fmt: skip
    """A stream in `voice` from ATTACKER_HOST that speaks a sentence and stays open (the
    word after it shows the sentence has ended)."""
    reader, writer = await connect(port, ATTACKER_HOST)
    await async_write_event(Event(type="synthesize-start", data={"voice": {"name": voice}}), writer)
    await async_write_event(SynthesizeChunk(text=sentence + " ").event(), writer)
    await next_event(reader, {"audio-chunk"}, 60.0)
    return reader, writer
