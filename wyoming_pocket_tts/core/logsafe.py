"""Text that is safe to put in a log line: control characters escaped, long values clipped.

A file name can hold a newline and terminal escape codes, a client can send a megabyte of
text: written as they are, they forge log lines or repaint the reader's terminal. Here (not
in the server) because the voices library logs file names too, and it may not import the
server. Written here rather than taken from a library: `str.translate` with one table does it.
"""

from __future__ import annotations

DEFAULT_CLIP = 80
# C0 and C1 controls and DEL, and the characters some terminals or log viewers take as a
# line break or a change of direction (Unicode line/paragraph separators, bidi controls).
_ESCAPED = (*range(32), *range(127, 160), 0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
_CONTROLS = {code: f"\\x{code:02x}" if code < 256 else f"\\u{code:04x}" for code in _ESCAPED}
_CONTROLS.update({ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"})


def escape(value: object) -> str:
    """`value` as text with every control character escaped (`\\n`, `\\x1b`): one log line."""
    text = value if isinstance(value, str) else str(value)
    return text.translate(_CONTROLS)


def clip(value: object, limit: int = DEFAULT_CLIP) -> str:
    """`value` as text of at most about `limit` characters, controls escaped, with its
    length when cut: 'aaaa... (1048576 characters)'."""
    text = value if isinstance(value, str) else str(value)
    cut = len(text) > limit
    shown = escape(text[:limit])
    return f"{shown}... ({len(text)} characters)" if cut else shown
