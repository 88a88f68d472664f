"""How many replies are spoken at once, and who waits (two cores is the design point).

* Each reply's frames come from the engine's batcher: every reply being spoken advances one
  frame per batched FlowLM step (engine/batch.py). A slot here is a row of that batch: at
  most ``max_concurrent`` replies are spoken at once (the batch bound, ``--max-concurrent``);
  only the requests beyond it wait. Its default, 4, is the largest batch a 2-core x86
  machine speaks each faster than real time in int8 (what `--quantize auto` picks there)
  with the default model (docs/batching.md, the concurrency benchmark).
* A slot is held while a reply has text to speak: a whole one-shot text, or the sentences
  of a streamed reply that have arrived. While a streamed reply waits for more text (the
  LLM is still writing) its slot is free for others, so an idle stream holds no row; when
  its next sentence is already there it keeps the slot, so no other request slips in
  between two of its sentences.
* Waiters are served first-in first-out, except that a reply which has already sent audio
  goes before replies that have not started: once a speaker has begun a reply, its next
  sentence must follow without a gap, while a new request only waits a little longer for
  its first audio. Background work (the start-up warm-up) comes last and is stopped by
  any request that arrives while it runs.
* A waiter whose client goes away leaves the queue at once (its task is cancelled).
* Waiting is bounded: a new request that has not got a slot within ``max_wait`` (the
  handler passes 5 s, about what a Voice PE satellite waits for an answer to start) leaves
  the queue with `SlotBusy`, and its client gets an ``error`` saying the server is busy,
  instead of audio that starts after its listener has gone. The wait is timed, not
  estimated: the length of the work ahead is not known (a streamed reply arrives sentence
  by sentence). The next sentence of a reply already playing (CONTINUATION) is never
  refused.
* A slot whose client has stopped reading is given back (`released`): its row pauses in
  the batch (it takes no step until its frames are read), and the slot goes to the next
  waiter. When the client reads again, the reply re-enters as CONTINUATION.
"""

from __future__ import annotations

import asyncio
import enum
import heapq
import itertools
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

_LOGGER = logging.getLogger(__name__)

class Priority(enum.IntEnum):
    """Lower runs first."""

    CONTINUATION = 0  # the next sentence of a response already playing
    NEW = 1  # the first audio of a response
    # Work nobody waits for (the start-up warm-up): it runs only when nothing else asks,
    # and a request that arrives pre-empts it (see `slot`).
    BACKGROUND = 2


@dataclass(order=True)
class _Waiter:
    priority: int
    seq: int
    future: asyncio.Future[None] = field(compare=False)


@dataclass
class Slot:
    """One reply being spoken (a row of the batch)."""

    background: bool = False
    # For a background slot: asks its user to stop (within a frame) for a request.
    preempt: Callable[[], None] | None = None


class SlotBusy(Exception):
    """No slot became free within the caller's bound; the message is for the client."""


@dataclass
class SchedulerStats:
    """A snapshot for logs and tests."""

    running: int
    waiting: int
    limit: int


class SynthesisScheduler:
    """A counting semaphore with two priority classes, FIFO within each. Event-loop only
    (not thread-safe)."""

    def __init__(self, max_concurrent: int) -> None:
        if max_concurrent < 1:
            raise ValueError("max_concurrent must be at least 1")
        self.limit = max_concurrent
        self._active: list[Slot] = []
        self._waiters: list[_Waiter] = []
        self._seq = itertools.count()
        # Slots granted (to the fast path or a woken waiter) but not yet in `_active`.
        self._granted = 0

    @property
    def stats(self) -> SchedulerStats:
        waiting = sum(1 for w in self._waiters if not w.future.done())
        return SchedulerStats(len(self._active), waiting, self.limit)

    @asynccontextmanager
    async def slot(
        self,
        priority: Priority = Priority.NEW,
        max_wait: float | None = None,
        preempt: Callable[[], None] | None = None,
    ) -> AsyncIterator[Slot]:
        """Hold one synthesis slot for the body of the ``async with``.

        Raises `SlotBusy` if none is free within ``max_wait`` seconds (None: wait as long
        as it takes). A BACKGROUND slot passes `preempt`: any other request that asks for
        a slot calls it (once), and the background work stops within a frame, so the
        request does not share the CPU with it for longer than that.
        """
        background = priority == Priority.BACKGROUND
        if not background:
            self._preempt_background()
        await self._acquire(priority, max_wait)
        slot = Slot(background=background, preempt=preempt if background else None)
        self._enter(slot)
        try:
            yield slot
        finally:
            if slot in self._active:  # not if it was released and never re-acquired
                self._active.remove(slot)
                self._wake()

    @asynccontextmanager
    async def released(self, slot: Slot) -> AsyncIterator[None]:
        """Give ``slot`` up for the body (its synthesis is paused), then wait for it again.

        It comes back as CONTINUATION: the reply is already playing. If the body raises,
        the slot stays given up (the reply is over).
        """
        self._active.remove(slot)
        self._wake()
        yield
        await self._acquire(Priority.CONTINUATION, None)
        self._enter(slot)

    def _enter(self, slot: Slot) -> None:
        self._granted -= 1
        self._active.append(slot)

    def _preempt_background(self) -> None:
        for other in self._active:
            if other.preempt is not None:
                preempt, other.preempt = other.preempt, None
                _LOGGER.debug("A request pre-empts background synthesis")
                preempt()

    async def _acquire(self, priority: Priority, max_wait: float | None) -> None:
        """Return once a slot is granted (counted in `_granted`); SlotBusy after max_wait."""
        if self._running < self.limit and not self._waiters:
            self._granted += 1
            return
        waiter = _Waiter(int(priority), next(self._seq), asyncio.get_running_loop().create_future())
        heapq.heappush(self._waiters, waiter)
        _LOGGER.debug("Synthesis queued (%s)", self.stats)
        try:
            # shield: on timeout wait_for cancels the shield, and we decide about the future.
            await asyncio.wait_for(asyncio.shield(waiter.future), max_wait)
        except asyncio.TimeoutError:
            if waiter.future.done():
                return  # granted in the very same moment: take it
            stats = self.stats
            self._leave_queue(waiter)
            raise SlotBusy(
                f"no synthesis slot free within {max_wait:g} s "
                f"({stats.running} running, {stats.waiting - 1} other(s) waiting)"
            ) from None
        except asyncio.CancelledError:
            if waiter.future.done() and not waiter.future.cancelled():
                # The slot was granted just as the waiter was cancelled: pass it on.
                self._granted -= 1
                self._wake()
            else:
                self._leave_queue(waiter)
            raise

    def _leave_queue(self, waiter: _Waiter) -> None:
        waiter.future.cancel()
        self._waiters.remove(waiter)
        heapq.heapify(self._waiters)

    @property
    def _running(self) -> int:
        return len(self._active) + self._granted

    def _wake(self) -> None:
        # Grant freed capacity to the next live waiters, in order, so a newcomer cannot
        # jump the queue.
        while self._waiters and self._running < self.limit:
            waiter = heapq.heappop(self._waiters)
            if not waiter.future.done():
                self._granted += 1
                waiter.future.set_result(None)
