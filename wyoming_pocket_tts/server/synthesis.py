"""Running an engine iterator in a worker thread and handing its frames to the event loop.

The engine's iterators block for tens of milliseconds per frame, so they never run on the
event loop. A worker thread pulls frames, converts each to 16-bit PCM (cheap, and it keeps
numpy off the loop), and passes it through an asyncio queue with `call_soon_threadsafe`.
The consumer is an async iterator; leaving it early for any reason (the client went away,
a write failed, the task was cancelled) sets the request's cancel Event, which the engine
checks every frame, and waits for the worker to finish so the scheduler slot is only
released once the CPU really is free.

The hand-off is bounded (backpressure): the worker computes a frame only with a credit,
and the consumer returns one each time it asks for the next frame, i.e. once the handler
has written (and drained) the previous one. So a client that stops reading stops the
engine within ``handoff_frames`` frames, and at most that many frames wait in memory.
A plain semaphore does the job (no library needed): on cancel the consumer releases every
credit at once, so a worker blocked on it wakes, sees the cancel Event and stops.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass

import numpy as np

_LOGGER = logging.getLogger(__name__)

FrameIterator = Iterator[np.ndarray]

# Frames the worker may compute before the consumer has taken them (80 ms each, so about a
# second of audio). Each frame needs the event loop to hand it on; on a loaded machine a
# wake-up can take tens of milliseconds, and with 4 frames a fast engine was held to about
# real time (6.6 s of audio in 10 s instead of 0.4 s, demo model, load average 14 on two
# cores). 12 frames let the loop take them in batches; a stalled client still costs at
# most this many frames of CPU and memory.
DEFAULT_HANDOFF_FRAMES = 12


@dataclass(frozen=True)
class _Failed:
    error: BaseException


_DONE = object()


def to_pcm16(frame: np.ndarray) -> bytes:
    """Float samples in [-1, 1] to little-endian int16 bytes (clipped, never wrapped)."""
    samples = np.clip(np.asarray(frame, dtype=np.float32).reshape(-1), -1.0, 1.0)
    return (samples * 32767.0).round().astype("<i2").tobytes()


class _Bridge:
    """Thread side: put items on the loop's queue, unless the loop has gone away."""

    def __init__(self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[object]) -> None:
        self._loop = loop
        self._queue = queue

    def put(self, item: object) -> None:
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)
        except RuntimeError:
            # The loop is closed (server shutting down): nobody is listening any more.
            pass


def _pump(
    make_frames: Callable[[], FrameIterator],
    cancel: threading.Event,
    bridge: _Bridge,
    credits: threading.Semaphore,
) -> None:
    frames: FrameIterator | None = None
    try:
        frames = make_frames()
        while True:
            credits.acquire()  # blocks while the consumer is `handoff_frames` behind
            if cancel.is_set():
                break
            frame = next(frames, None)
            if frame is None or cancel.is_set():
                break
            bridge.put(to_pcm16(frame))
    except BaseException as err:  # noqa: BLE001 - every failure goes to the consumer
        bridge.put(_Failed(err))
    finally:
        close = getattr(frames, "close", None)
        if close is not None:
            try:
                close()  # frees the engine's per-request state at once
            except Exception:  # noqa: BLE001
                _LOGGER.exception("Closing an engine iterator failed")
        bridge.put(_DONE)


async def stream_pcm(
    make_frames: Callable[[], FrameIterator],
    cancel: threading.Event,
    executor: Executor,
    handoff_frames: int = DEFAULT_HANDOFF_FRAMES,
) -> AsyncIterator[bytes]:
    """Yield int16 PCM frames from ``make_frames()``, which runs in a worker of ``executor``.

    ``make_frames`` itself is called in the worker (creating a session or starting a
    synthesis may already take time). An exception raised there or while iterating is
    re-raised here, in the consumer. The worker runs at most ``handoff_frames`` frames
    ahead of the consumer.
    """
    if handoff_frames < 1:
        raise ValueError("handoff_frames must be at least 1")
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[object] = asyncio.Queue()
    credits = threading.Semaphore(handoff_frames)
    worker = loop.run_in_executor(executor, _pump, make_frames, cancel, _Bridge(loop, queue), credits)
    finished = False
    try:
        while True:
            item = await queue.get()
            if item is _DONE:
                finished = True
                break
            if isinstance(item, _Failed):
                # The worker has stopped by itself; the cancel Event is shared by the whole
                # reply (a streamed one goes on with its next sentence), so leave it alone.
                finished = True
                raise item.error
            assert isinstance(item, bytes)
            yield item
            credits.release()  # the previous frame is written: the worker may make one more
    finally:
        if not finished:
            cancel.set()
            # Wake a worker blocked on the hand-off: it sees the cancel at once.
            credits.release(handoff_frames + 1)
        # Wait for the worker even when cancelled: the slot must outlive the CPU work.
        # shield() keeps a second cancellation from abandoning the wait half-way.
        try:
            await asyncio.shield(worker)
        except asyncio.CancelledError:
            raise
        except BaseException:  # noqa: BLE001 - its error, if any, was already reported
            pass
