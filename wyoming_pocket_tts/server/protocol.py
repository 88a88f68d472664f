"""Reading Wyoming events with limits, so a client cannot exhaust memory or crash a handler.

`wyoming.event.async_read_event` trusts `data_length` and `payload_length` (a client can
announce gigabytes), returns None for a malformed line (so the connection closes with no
explanation) and lets a header without "type" raise KeyError inside the handler task. This
reader checks every field of the header before reading anything it announces, and raises
`ProtocolError` with a message meant for the client's `error` event.

JSON itself is parsed with bounds too, since `json.loads` fails in ways that are not
`JSONDecodeError`: nesting thousands deep raises RecursionError and a megabyte of tiny
values takes a second to build (depth and values are checked on the raw bytes first, in
linear time: see `_shape_problem`), a 5,000-digit integer raises ValueError (integers are
parsed by a hook that refuses long ones), and NaN/Infinity or 1e999 give numbers no field
can use.
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
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
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
    # Values (strings, numbers, keys, containers) in one header or data section; an event
    # holds a few dozen (text, voice name, language...).
    json_values: int = 10_000


# Brackets only, each kind as "[" or "]": the depth does not depend on the kind.
_BRACKETS_ONLY = bytes.maketrans(b"{}", b"[]")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_SURROGATE = re.compile("[\ud800-\udfff]")
# The JSON escape of a UTF-16 surrogate (\ud800 to \udfff): without one, no lone surrogate.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF]")
# A data section longer than this is parsed in a worker thread (see read_event).
OFF_LOOP_BYTES = 64 * 1024

Offload = Callable[[Callable[[], Any]], Awaitable[Any]]


def _shape_problem(raw: bytes, limits: Limits) -> str | None:
    """Why JSON `raw` may not be parsed (None: it may), checked on its bytes first: nested
    deeper than the limit (json.loads would recurse), more values than the limit (it would
    build an object for each: a megabyte of "[]," is 350,000 lists, 0.4 s in one C call
    that holds the interpreter), or brackets that close more than they open (invalid).

    Linear, in C-speed byte operations, whatever `raw` holds (the regular expression used
    before backtracked quadratically on an unterminated string of escaped quotes: a 1 MiB
    data section held the event loop for minutes):

    1. Escapes go first: every backslash pair, then every backslash-quote (what stays of
       a run of backslashes is its last one when the run is odd, as a JSON reader pairs
       them). Outside a string a backslash is invalid JSON and the parser stops there: up
       to it this is exact, and after it nothing is parsed.
    2. Now every quote opens or closes a string; their count bounds the strings, and the
       pieces between pairs of quotes are dropped: the rest is outside strings.
    3. Its brackets, all written "[" and "]", with "]" appended for every unclosed "[":
       each round of removing every adjacent "[]" lowers the deepest nesting by exactly
       one (the deepest brackets are such pairs, and no other position moves), so the
       nesting is within `limit` exactly if `limit` rounds leave nothing. A round that
       removes nothing ends it early; what is left is then too deep, or a "]" before
       its "[" (invalid JSON in any case).
    """
    limit = limits.json_depth
    unescaped = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    if unescaped.count(b'"') > 2 * limits.json_values:
        return f"more than {limits.json_values} values"
    outside = b"".join(unescaped.split(b'"')[::2])
    brackets = outside.translate(_BRACKETS_ONLY, _NOT_BRACKETS)
    # Every value but the first follows a comma or a colon (keys count as values), or
    # opens a container.
    if sum(map(outside.count, (b",", b":"))) + brackets.count(b"[") > limits.json_values:
        return f"more than {limits.json_values} values"
    unclosed = 2 * brackets.count(b"[") - len(brackets)
    if unclosed < 0:
        return ""
    brackets += b"]" * unclosed
    for _ in range(limit):
        reduced = brackets.replace(b"[]", b"")
        if len(reduced) == len(brackets):
            break
        brackets = reduced
    return f"JSON nested deeper than {limit} levels" if brackets else None


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

    refusal = _shape_problem(raw, limits)
    if refusal is not None:
        raise ProtocolError(f"malformed {what}: {refusal or invalid}")
    try:
        value = json.loads(raw, parse_int=parse_int, parse_float=parse_float, parse_constant=parse_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):  # JSONDecodeError is a ValueError
        raise ProtocolError(f"malformed {what}: {invalid}") from None
    # Only an escape can make a lone surrogate (raw ones fail to decode): most events
    # skip the walk over their values.
    return _without_surrogates(value) if _SURROGATE_ESCAPE.search(raw) else value


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


async def read_event(reader: asyncio.StreamReader, limits: Limits | None = None,
                     offload: Offload | None = None) -> Event | None:  # fmt: skip
    """Read one event; None at a clean end of stream (the client closed between events).

    `offload` runs a function off the event loop (in a worker thread) and returns its
    result: a data section over OFF_LOOP_BYTES is parsed there (a megabyte of numbers takes
    ~0.1 s to parse and walk: long enough to hold up every other client). The header line
    is at most 64 KiB and parsed on the loop."""
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
            raw = await reader.readexactly(data_length)
            if offload is not None and data_length > OFF_LOOP_BYTES:
                extra = await offload(partial(_loads, raw, limits, "event data"))
            else:
                extra = _loads(raw, limits, "event data")
            if not isinstance(extra, dict):
                raise ProtocolError("malformed event data: not a JSON object")
            data = {**data, **extra}
        payload = await reader.readexactly(payload_length) if payload_length else None
    except asyncio.IncompleteReadError:
        raise ProtocolError("connection closed in the middle of an event") from None

    return Event(type=event_type, data=data, payload=payload)
