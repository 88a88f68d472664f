"""Work on a client's text that can be long: bounded, off the event loop, and cancellable.

Cutting text into sentences costs about 1.5 µs a character: a 1 MB `synthesize-chunk` is
more than a second of work. On the event loop, every other client (and `describe`) would
wait for it; so a text longer than INLINE_TEXT_CHARS is cut in a worker thread
(`off_loop`), a slice of CUT_SLICE_CHARS at a time (the sentence splitter and the SSML
reader take text in pieces anyway: that is what streaming is), and the work stops between
two slices once the client has left or the stream is over one of its bounds (`cut_text`).
The thread holds the interpreter lock only for its switch interval at a time, so the loop
keeps answering meanwhile.

What a stream holds is bounded too: the text cut into sentences but not yet spoken waits
in a `TextQueue`, which counts its characters; the handler refuses a stream whose queue
holds more than its bound (a client that sends text much faster than it is spoken, and
reads little: 30 MB of short sentences grew the server by 460 MB before).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Executor
from typing import Protocol, TypeVar

from ..text.ssml import Segment

T = TypeVar("T")

# Text up to this long is cut on the event loop (a few milliseconds at most); an LLM's
# streamed deltas are a few characters each.
INLINE_TEXT_CHARS = 2_000
# How much text a worker cuts between two looks at whether to go on (~20 ms of work).
CUT_SLICE_CHARS = 16_384
# How often the loop looks whether the client of a running piece of work has left.
GONE_POLL_S = 0.1
# What a queued sentence costs besides its characters (its objects and queue entry): a
# stream of one-letter sentences reaches the bound after as many sentences as characters.
SENTENCE_OVERHEAD_CHARS = 32

Piece = str | Segment


def piece_chars(piece: Piece | None) -> int:
    """What a queued sentence (or SSML segment, or the end marker) counts against the bound."""
    if piece is None:
        return 0
    text = piece if isinstance(piece, str) else getattr(piece, "text", "")
    return len(text) + SENTENCE_OVERHEAD_CHARS


class TextQueue(asyncio.Queue[Piece | None]):
    """A stream's sentences (or SSML segments) waiting to be spoken, None ending them, and
    how many characters they hold (`chars`, see `piece_chars`). Event-loop only."""

    def __init__(self) -> None:
        super().__init__()
        self.chars = 0

    # asyncio.Queue's documented hooks for subclasses (as PriorityQueue uses them).
    def _put(self, item: Piece | None) -> None:
        self.chars += piece_chars(item)
        super()._put(item)  # type: ignore[misc]

    def _get(self) -> Piece | None:
        item: Piece | None = super()._get()  # type: ignore[misc]
        self.chars -= piece_chars(item)
        return item


class Cutter(Protocol):
    """What a stream cuts its text with: a SentenceSplitter or an SsmlReader."""

    @property
    def pending_chars(self) -> int: ...

    def add_chunk(self, chunk: str) -> Iterable[Piece]: ...


def cut_text(cutter: Cutter, text: str, cancel: threading.Event, room: int, max_pending: int) -> list[Piece]:
    """The complete sentences (or segments) in `text` after what `cutter` already holds,
    cut a slice at a time. Stops early, leaving the rest uncut, when `cancel` is set, when
    the sentences cut exceed `room` characters (see `piece_chars`), or when more than
    `max_pending` characters wait for a sentence end: the caller then refuses the stream
    anyway, and the rest of a megabyte is not worth cutting. May run in a worker thread:
    `cutter` is used by one thread at a time (its stream's events are handled in order)."""
    pieces: list[Piece] = []
    produced = 0
    for start in range(0, len(text), CUT_SLICE_CHARS):
        if cancel.is_set():
            break
        for piece in cutter.add_chunk(text[start : start + CUT_SLICE_CHARS]):
            pieces.append(piece)
            produced += piece_chars(piece)
        if produced > room or cutter.pending_chars > max_pending:
            break
    return pieces


async def off_loop(executor: Executor | None, work: Callable[[threading.Event], T],
                   gone: Callable[[], bool]) -> T:  # fmt: skip
    """`work(cancel)` in a worker thread; `cancel` is set when `gone()` turns true (the
    client left: checked every GONE_POLL_S) or this is cancelled (the connection closes,
    the server stops). The work is expected to stop soon after `cancel` is set."""
    cancel = threading.Event()
    future = asyncio.get_running_loop().run_in_executor(executor, work, cancel)
    try:
        while True:
            done, _ = await asyncio.wait([future], timeout=GONE_POLL_S)
            if done:
                return future.result()
            if gone():
                cancel.set()
    finally:
        cancel.set()
