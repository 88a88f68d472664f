"""The checks on an event's raw JSON are exact and linear (issue 27, item 1).

`_shape_problem` decides, on the bytes, whether json.loads may parse them: a reference
scanner written the obvious way (byte by byte, strings and escapes tracked) says how deep
the JSON really nests, and the fast check must never let deeper JSON through, nor refuse
valid JSON within the limits. The hostile megabytes of the issue (the escaped-quote string
that made the former regular expression backtrack for minutes, and shapes that make
json.loads build hundreds of thousands of objects) are each decided well within a second.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wyoming_pocket_tts.server.protocol import Limits, ProtocolError, _shape_problem, read_event

LIMITS = Limits()
MIB = 1 << 20
# The bytes that matter to the structure of JSON, and two that do not.
ALPHABET = b'[]{}"\\ a,:'


async def read_data_section(raw: bytes) -> object:
    """The event whose data section is `raw`, read as the server reads it."""
    reader = asyncio.StreamReader()
    reader.feed_data(b'{"type": "synthesize", "data_length": %d}\n' % len(raw) + raw)
    reader.feed_eof()
    return await read_event(reader, Limits(data_bytes=2 * MIB))


def reference_depth(raw: bytes) -> int:
    """How deep a JSON reader gets into `raw` before it stops: the deepest bracket outside
    strings, up to the first backslash outside a string or the first unmatched closing."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in raw:
        char = chr(byte)
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == "\\":
            break
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
            if depth < 0:
                break
    return deepest


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=200).map(lambda data: bytes(ALPHABET[b % len(ALPHABET)] for b in data)))
def test_nothing_deeper_than_the_limit_is_let_through(raw: bytes) -> None:
    limits = Limits(json_depth=4)
    if _shape_problem(raw, limits) is None:
        assert reference_depth(raw) <= 4


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(alphabet='[]{}"\\ab,:\n', max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet='[]{}"\\k', max_size=4), inner,
                                                                max_size=3),
    max_leaves=30,
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(JSON_VALUES)
def test_valid_json_is_refused_exactly_when_too_deep(value: object) -> None:
    raw = json.dumps(value).encode()
    limits = Limits(json_depth=3)
    problem = _shape_problem(raw, limits)
    assert (problem is None) == (reference_depth(raw) <= 3), (raw, problem)


HOSTILE = {
    # The former regular expression backtracked on every quote of this: minutes per MiB.
    "escaped quotes": b'{"text": "' + b'\\"' * (MIB // 2) + b'"}',
    "unterminated escaped quotes": b'{"text": "' + b'\\"' * (MIB // 2),
    "empty lists": b"[" + b"[]," * (MIB // 3) + b"[]]",
    "numbers": b"[" + b"0," * (MIB // 2) + b"0]",
    "strings": b"[" + b'"",' * (MIB // 3) + b'""]',
    "nesting at the limit, repeated": (b"[" * 32 + b"]" * 32) * (MIB // 64),
    "closing first": b"]" * (MIB // 2) + b"[" * (MIB // 2),
    "backslashes": b'{"text": "' + b"\\\\" * (MIB // 2) + b'"}',
}


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_megabyte_is_decided_quickly(name: str) -> None:
    started = time.perf_counter()
    try:
        asyncio.run(read_data_section(HOSTILE[name]))
    except ProtocolError:
        pass
    # Linear work on a megabyte is milliseconds; the former check took minutes on the first.
    assert time.perf_counter() - started < 1.0


def test_a_megabyte_of_text_is_read() -> None:
    text = "Hello, world: [quoted] \"text\" with \\ backslashes {and braces}. " * (MIB // 64)
    event = asyncio.run(read_data_section(json.dumps({"text": text}).encode()))
    assert getattr(event, "data", None) == {"text": text}


def test_more_values_than_the_limit_are_refused() -> None:
    assert _shape_problem(json.dumps(list(range(10_001))).encode(), LIMITS) == "more than 10000 values"
    assert _shape_problem(json.dumps(list(range(5_000))).encode(), LIMITS) is None
    assert _shape_problem(json.dumps({"text": "a, b: c" * 10_000}).encode(), LIMITS) is None
