"""Client helpers for the tests of what one connection may cost: raw event bytes, a client
that does not read, and reading back what the server sent."""

from __future__ import annotations

import asyncio
import json
import socket
import time

from wyoming.event import Event


def event_bytes(event: Event) -> bytes:
    """One event as Wyoming frames it (header line, then the data)."""
    data = json.dumps(event.data).encode()
    header = json.dumps({"type": event.type, "data_length": len(data)}).encode()
    return header + b"\n" + data


async def open_non_reader(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A client with a small receive buffer, so that what it does not read stays server-side."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    return await asyncio.open_connection(sock=sock)


async def stalled_request(port: int, text: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Send a one-shot `synthesize` of `text` from a client that then reads nothing."""
    reader, writer = await open_non_reader(port)
    writer.write(event_bytes(Event(type="synthesize", data={"text": text})))
    await writer.drain()
    return reader, writer


async def read_all(reader: asyncio.StreamReader, timeout: float) -> tuple[bytes, bool]:
    """Everything the server sends until it closes; (bytes, closed within the timeout)."""
    received = bytearray()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            block = await asyncio.wait_for(reader.read(65536), deadline - time.monotonic())
        except asyncio.TimeoutError:
            break
        if not block:
            return bytes(received), True
        received += block
    return bytes(received), False


def parse_events(received: bytes) -> list[dict]:
    """The headers (with their data) of the events in a byte string, in order."""
    headers = []
    at = 0
    while at < len(received):
        end = received.index(b"\n", at)
        header = json.loads(received[at:end])
        at = end + 1
        data_length = header.get("data_length") or 0
        if data_length:
            header["data"] = json.loads(received[at : at + data_length])
        at += data_length + (header.get("payload_length") or 0)
        headers.append(header)
    return headers
