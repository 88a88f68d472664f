"""Reading Wyoming events with limits, so a client cannot exhaust memory or crash a handler.

`wyoming.event.async_read_event` trusts `data_length` and `payload_length` (a client can
announce gigabytes), returns None for a malformed line (so the connection closes with no
explanation) and lets a header without "type" raise KeyError inside the handler task. This
reader checks every field of the header before reading anything it announces, and raises
`ProtocolError` with a message meant for the client's `error` event.

JSON itself is parsed with bounds too, since `json.loads` fails in ways that are not
`JSONDecodeError`: nesting thousands deep raises RecursionError (the depth is checked on
the raw bytes first), a 5,000-digit integer raises ValueError (integers are parsed by a
hook that refuses long ones), and NaN/Infinity or 1e999 give numbers no field can use.
A lone UTF-16 surrogate (the escape \\ud800 alone is valid JSON) gives a str that neither
the tokenizer nor a UTF-8 log file can encode; such characters are replaced by U+FFFD
rather than the event refused: they come from a client's broken text handling, and
speaking the rest of an announcement is more useful than refusing it over one character.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
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
    # Wyoming events nest 3 or 4 deep ({"data": {"voice": {...}}}).
    json_depth: int = 32
    # Integers in events are rates, sizes and timestamps: 20 digits hold any of them.
    int_digits: int = 20


_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_OPENING = frozenset(b"[{")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _check_depth(raw: bytes, limit: int) -> None:
    """Refuse JSON nested deeper than `limit` before parsing it (json.loads would recurse)."""
    brackets = _JSON_STRING.sub(b'""', raw).translate(None, _NOT_BRACKETS)
    depth = 0
    for byte in brackets:
        depth = depth + 1 if byte in _OPENING else depth - 1
        if depth > limit:
            raise ProtocolError(f"malformed event: JSON nested deeper than {limit} levels")


def _loads(raw: bytes, limits: Limits, what: str, invalid: str = "not valid JSON") -> Any:
    """`raw` parsed as JSON within `limits`; ProtocolError naming `what` otherwise."""

    def parse_int(digits: str) -> int:
        if len(digits.lstrip("-")) > limits.int_digits:
            raise ProtocolError(f"malformed {what}: an integer has more than {limits.int_digits} digits")
        return int(digits)

    def parse_float(text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            raise ProtocolError(f"malformed {what}: a number is out of range")
        return value

    def parse_constant(name: str) -> Any:
        raise ProtocolError(f"malformed {what}: {name} is not a number JSON allows")

    _check_depth(raw, limits.json_depth)
    try:
        value = json.loads(raw, parse_int=parse_int, parse_float=parse_float, parse_constant=parse_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):  # JSONDecodeError is a ValueError
        raise ProtocolError(f"malformed {what}: {invalid}") from None
    return _without_surrogates(value)


def _without_surrogates(value: Any) -> Any:
    """`value` with every lone surrogate in its strings (keys too) replaced by U+FFFD."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_without_surrogates(key): _without_surrogates(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_without_surrogates(item) for item in value]
    return value


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

    header = _loads(line, limits, "event header", invalid="not a JSON object")
    if not isinstance(header, dict):
        raise ProtocolError("malformed event header: not a JSON object")
    event_type = header.get("type")
    if not isinstance(event_type, str) or not event_type:
        raise ProtocolError('malformed event header: missing "type"')
    data = header.get("data")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ProtocolError('malformed event header: "data" must be a JSON object')

    data_length = _length(header, "data_length", limits.data_bytes)
    payload_length = _length(header, "payload_length", limits.payload_bytes)

    try:
        if data_length:
            extra = _loads(await reader.readexactly(data_length), limits, "event data")
            if not isinstance(extra, dict):
                raise ProtocolError("malformed event data: not a JSON object")
            data = {**data, **extra}
        payload = await reader.readexactly(payload_length) if payload_length else None
    except asyncio.IncompleteReadError:
        raise ProtocolError("connection closed in the middle of an event") from None

    return Event(type=event_type, data=data, payload=payload)
