"""Log lines a client cannot flood: clipped values and rate-limited repeats.

Anything a client sends (voice names, texts, the reason its event was refused) can be a
megabyte long or hold newlines that forge log lines; `clip` bounds it (it lives in
`core.logsafe`, which the voices library uses too). A burst of
identical warnings (thousands of clients making the same mistake, accept() failing in a
loop) is cut to a few by `RepeatLimiter`, which says how many it held back. Written here
rather than taken from a library: the standard library has no rate-limiting filter, and
the two helpers are a few lines each.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from dataclasses import dataclass
from typing import Callable

from ..core.logsafe import DEFAULT_CLIP, clip

__all__ = ["DEFAULT_CLIP", "RepeatLimiter", "clip", "without_paths"]

# The directories of an absolute path: a slash that starts a word (not one in a URL's
# "//", in "a/b" or alone), up to the last slash before the file name.
_DIRECTORIES = re.compile(r"(?<![\w.~:/-])/(?:[^\s/'\"(),;]+/)*(?=[^\s/'\"(),;])")


def without_paths(text: str) -> str:
    """`text` with every absolute path cut to its last part ("/share/voices/a.wav": "a.wav"),
    for what a client is told: the server's directories are none of its business. The
    voices library says exactly which file failed (VoiceError.public); this catches the
    paths any other message may hold (a path with spaces keeps the part after the last
    space, without the directories before it)."""
    return _DIRECTORIES.sub("", text)


@dataclass
class _Burst:
    window_start: float
    passed: int = 0
    suppressed: int = 0


class RepeatLimiter(logging.Filter):
    """Lets through at most `burst` records of one message template per `window_s` seconds
    (of levels `level` to `up_to`, by default warnings and above; other levels pass); the
    first record after a window that held some back says how many. Install on the
    handlers, so records of every logger pass it:
    `for handler in logging.getLogger().handlers: handler.addFilter(RepeatLimiter())`."""

    def __init__(self, burst: int = 5, window_s: float = 10.0, level: int = logging.WARNING,
                 clock: Callable[[], float] = time.monotonic, up_to: int = logging.CRITICAL) -> None:  # fmt: skip
        super().__init__()
        self._burst = burst
        self._window_s = window_s
        self._level = level
        self._up_to = up_to
        self._clock = clock
        self._lock = threading.Lock()
        self._bursts: dict[tuple[str, int, str], _Burst] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if not self._level <= record.levelno <= self._up_to:
            return True
        key = (record.name, record.levelno, str(record.msg))
        now = self._clock()
        with self._lock:
            burst = self._bursts.get(key)
            if burst is None or now - burst.window_start >= self._window_s:
                held_back = burst.suppressed if burst else 0
                self._bursts[key] = _Burst(now, passed=1)
                self._forget_old(now)
                if held_back:
                    record.msg = f"{record.getMessage()} ({held_back} similar messages suppressed)"
                    record.args = None
                return True
            if burst.passed < self._burst:
                burst.passed += 1
                return True
            burst.suppressed += 1
            return False

    def _forget_old(self, now: float) -> None:
        """Drop quiet templates, so the table stays as small as the set of active ones."""
        if len(self._bursts) > 256:
            self._bursts = {k: b for k, b in self._bursts.items() if now - b.window_start < self._window_s}
