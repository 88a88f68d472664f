"""How concurrent requests share the CPU (two cores is the design point).

* Each synthesis runs in its own worker thread (torch releases the GIL in its kernels), so
  the event loop stays free to answer ``describe`` and relay frames at all times.
* At most ``limit`` syntheses run at once; the others wait in line. ``limit`` adapts to the
  machine: two syntheses sharing two cores each run at about half the speed of one alone
  (measured: 1.7x real time alone -> 0.8x and 0.7x together on the default architecture),
  and a streamed reply made slower than real time stutters on the speaker. So the
  scheduler measures how fast a synthesis runs *alone* (audio seconds per wall second, a
  moving average of requests that ran alone) and admits ``n`` at once only
  if each would still run at ``MIN_SPEED`` (1.2x) real time: ``limit = clamp(speed / 1.2,
  1, max_concurrent)``. With today's engine on two cores that means one at a time; a
  faster engine (or ``--quantize``) lets two satellites speak at once, each in real time.
  ``--max-concurrent`` (default 2) caps it; ``--max-concurrent 1`` always serialises.
* A slot is held while a response has text to speak: a whole one-shot text, or the
  sentences of a streamed reply that have arrived. While a streamed reply waits for more
  text (the LLM is still writing) its slot is free for others, so an idle stream never
  holds the CPU; when its next sentence is already there it keeps the slot, so no other
  request slips in between two of its sentences.
* Waiters are served first-in first-out, except that a response which has already sent
  audio goes before responses that have not started: once a speaker has begun a reply, its
  next sentence must follow without a gap, while a new request only waits a little longer
  for its first audio. Background work (the start-up warm-up) comes last and is stopped
  by any request that arrives while it runs.
* A waiter whose client goes away leaves the queue at once (its task is cancelled).
* Waiting is bounded: a new request that has not got a slot within ``max_wait`` (the
  handler passes 5 s, about what a Voice PE satellite waits for an answer to start) leaves
  the queue with `SlotBusy`, and its client gets an ``error`` saying the server is busy,
  instead of audio that starts after its listener has gone (20 clients at once used to
  wait up to 90 s for first audio). The wait is timed, not estimated: the length of the
  work ahead is not known (a streamed reply arrives sentence by sentence, and a text's
  audio length is only roughly known from its characters), and a wrong estimate would
  either refuse a request that would have started in time or keep one past the bound.
  The timeout is exact both ways; the price is that a refused client learns it after
  ``max_wait`` rather than at once, which is when its satellite gives up anyway. The next
  sentence of a reply already playing (CONTINUATION) is never refused. Measured
  (bench/overload.py, 20 clients at once, demo model, loaded 2-core machine): before,
  all 20 were served, the last first audio after 11.8 s; now 9 are served (worst 4.6 s)
  and 11 hear "server busy" at 5.0 s.
* A slot whose client has stopped reading is given back (`released`): its worker is
  paused on the bounded hand-off (see synthesis.py), so it needs no CPU, and the slot goes
  to the next waiter. When the client reads again, the reply re-enters as CONTINUATION.

Batching several requests into one forward pass would use the cores better, but the
engine decodes one stream per call.
"""

from __future__ import annotations

import asyncio
import enum
import heapq
import itertools
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

_LOGGER = logging.getLogger(__name__)

# Each of n concurrent syntheses must still be at least this many times faster than real time.
MIN_SPEED = 1.2
# Weight of the newest measurement in the moving average of the solo speed.
SPEED_SMOOTHING = 0.3
# Below this much audio a measurement says more about start-up costs than about speed.
MIN_MEASURED_AUDIO_S = 0.5


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
    """One running synthesis; its user reports the audio it produced."""

    started: float = field(default_factory=time.monotonic)
    audio_s: float = 0.0
    # False as soon as another synthesis ran at the same time: then it says nothing about
    # the speed of one synthesis alone.
    alone: bool = True
    background: bool = False
    # For a background slot: asks its user to stop (within a frame) for a request.
    preempt: Callable[[], None] | None = None

    def add_audio(self, seconds: float) -> None:
        self.audio_s += seconds


class SlotBusy(Exception):
    """No slot became free within the caller's bound; the message is for the client."""


@dataclass
class SchedulerStats:
    """A snapshot for logs and tests."""

    running: int
    waiting: int
    limit: int
    solo_speed: float | None


class SynthesisScheduler:
    """A counting semaphore with an adaptive bound and two priority classes, FIFO within
    each. Event-loop only (not thread-safe)."""

    def __init__(self, max_concurrent: int, min_speed: float = MIN_SPEED) -> None:
        if max_concurrent < 1:
            raise ValueError("max_concurrent must be at least 1")
        self.max_concurrent = max_concurrent
        self.min_speed = min_speed
        self._active: list[Slot] = []
        self._waiters: list[_Waiter] = []
        self._seq = itertools.count()
        self._solo_speed: float | None = None
        # Slots granted (to the fast path or a woken waiter) but not yet in `_active`.
        self._granted = 0

    @property
    def limit(self) -> int:
        """How many syntheses may run at once now."""
        if self._solo_speed is None:
            return self.max_concurrent  # nothing measured yet: trust the cap
        return max(1, min(self.max_concurrent, int(self._solo_speed / self.min_speed)))

    @property
    def stats(self) -> SchedulerStats:
        waiting = sum(1 for w in self._waiters if not w.future.done())
        return SchedulerStats(len(self._active), waiting, self.limit, self._solo_speed)

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
                self._measure(slot)
                self._wake()

    @asynccontextmanager
    async def released(self, slot: Slot) -> AsyncIterator[None]:
        """Give ``slot`` up for the body (its synthesis is paused), then wait for it again.

        It comes back as CONTINUATION: the reply is already playing. If the body raises,
        the slot stays given up (the reply is over).
        """
        self._active.remove(slot)
        slot.alone = False  # its time now includes the pause: it says nothing about speed
        self._wake()
        yield
        await self._acquire(Priority.CONTINUATION, None)
        self._enter(slot)

    def _enter(self, slot: Slot) -> None:
        self._granted -= 1
        if slot.background:
            slot.alone = False  # its speed is not a request's
        else:
            # Background work, stopped within a frame, does not spoil a request's measure.
            rivals = [other for other in self._active if not other.background]
            if rivals:
                slot.alone = False
                for other in rivals:
                    other.alone = False
        self._active.append(slot)

    def _preempt_background(self) -> None:
        for other in self._active:
            if other.preempt is not None:
                preempt, other.preempt = other.preempt, None
                _LOGGER.debug("A request pre-empts background synthesis")
                preempt()

    def _measure(self, slot: Slot) -> None:
        if not slot.alone or slot.audio_s < MIN_MEASURED_AUDIO_S:
            return
        speed = slot.audio_s / max(time.monotonic() - slot.started, 1e-3)
        before = self.limit
        if self._solo_speed is None:
            self._solo_speed = speed
        else:
            self._solo_speed += SPEED_SMOOTHING * (speed - self._solo_speed)
        if self.limit != before:
            _LOGGER.info(
                "Synthesis alone runs at %.1fx real time: up to %d at once",
                self._solo_speed, self.limit,
            )  # fmt: skip

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
