"""Reading Wyoming events with limits, so a client cannot exhaust memory or crash a handler.

`wyoming.event.async_read_event` trusts `data_length` and `payload_length` (a client can
announce gigabytes), returns None for a malformed line (so the connection closes with no
explanation) and lets a header without "type" raise KeyError inside the handler task. This
reader checks every field of the header before reading anything it announces, and raises
`ProtocolError` with a message meant for the client's `error` event.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from wyoming.event import Event


class ProtocolError(Exception):
    """The client sent something that is not a valid Wyoming event; the message says what."""


@dataclass(frozen=True)
class Limits:
    """Largest parts of one incoming event, in bytes."""

    # asyncio's StreamReader refuses longer lines anyway (64 KiB); a header is ~100 bytes.
    header_bytes: int = 64 * 1024
    # The longest text a TTS client sends in one event; 1 MiB is hours of speech.
    data_bytes: int = 1024 * 1024
    # TTS clients send no audio; the cap only bounds what a confused client can make us buffer.
    payload_bytes: int = 1024 * 1024


def _length(header: dict[str, Any], key: str, limit: int) -> int:
    value = header.get(key)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ProtocolError(f"malformed event header: {key} must be a non-negative integer")
    if value > limit:
        raise ProtocolError(f"event too large: {key} is {value} bytes, the limit is {limit}")
    return value


async def read_event(reader: asyncio.StreamReader, limits: Limits | None = None) -> Event | None:
    """Read one event; None at a clean end of stream (the client closed between events)."""
    limits = limits or Limits()
    line = b""
    # A blank line between events (e.g. typed by hand in nc) carries no event: skip it.
    while not line.strip():
        try:
            line = await reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as err:
            if not err.partial.strip():
                return None
            raise ProtocolError("connection closed in the middle of an event header") from None
        except asyncio.LimitOverrunError:
            raise ProtocolError("event header line too long (or missing its newline)") from None
        if len(line) > limits.header_bytes:
            raise ProtocolError(f"event header line longer than {limits.header_bytes} bytes")

    try:
        header = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ProtocolError("malformed event header: not a JSON object") from None
    if not isinstance(header, dict):
        raise ProtocolError("malformed event header: not a JSON object")
    event_type = header.get("type")
    if not isinstance(event_type, str) or not event_type:
        raise ProtocolError('malformed event header: missing "type"')
    data = header.get("data") or {}
    if not isinstance(data, dict):
        raise ProtocolError('malformed event header: "data" must be a JSON object')

    data_length = _length(header, "data_length", limits.data_bytes)
    payload_length = _length(header, "payload_length", limits.payload_bytes)

    try:
        if data_length:
            extra = json.loads(await reader.readexactly(data_length))
            if not isinstance(extra, dict):
                raise ProtocolError("malformed event data: not a JSON object")
            data = {**data, **extra}
        payload = await reader.readexactly(payload_length) if payload_length else None
    except asyncio.IncompleteReadError:
        raise ProtocolError("connection closed in the middle of an event") from None
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ProtocolError("malformed event data: not valid JSON") from None

    return Event(type=event_type, data=data, payload=payload)
