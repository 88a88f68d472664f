"""The threading of a response: the FlowLM makes latents, the decoder turns them into audio.

The first frame of a chunk is made in the caller's thread with the whole thread budget,
its step and then its decoding, for the earliest audio. Only then does the FlowLM move to
a thread of its own, a frame ahead of the decoder, one core each: on two cores the two
halves overlap. Keeping every multi-threaded product in the caller's thread (a long-lived
one in the server) means one team of worker threads, kept warm, rather than a fresh team
in a new thread (measured: 5-13 ms more for the first step) that then idles beside the
decoder.

The FlowLM thread is one per session (`FlowLMThread`), started with its first chunk and
reused by every later chunk and sentence of the response, rather than a new thread each.
The model math (a step, a decode) is the caller's; this module only moves it between threads.
"""

from __future__ import annotations

import queue
import threading
import weakref
from collections.abc import Callable, Iterator

import numpy as np
import torch

# Frames per decoder call after a chunk's first frame, which is decoded alone (see decoder_groups).
DECODER_GROUPS = (1, 1, 2, 2, 4)

Latents = Iterator[torch.Tensor]


class Handoff:
    """Latents from the FlowLM thread to the decoder; None ends them, an exception is re-raised."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[torch.Tensor | BaseException | None] = queue.SimpleQueue()
        self._ended = False

    def put(self, item: torch.Tensor | BaseException | None) -> None:
        self._queue.put(item)

    def latents(self) -> Latents:
        while not self._ended:
            item = self._queue.get()
            if item is None:
                self._ended = True
            elif isinstance(item, BaseException):
                raise item
            else:
                yield item

    def wait_for_end(self) -> None:
        """Wait until the FlowLM thread has finished with this hand-off, dropping the rest."""
        while not self._ended:
            self._ended = self._queue.get() is None


class FlowLMThread:
    """One session's FlowLM thread: runs the latents generators handed to it, one at a
    time, each onto its own hand-off queue.

    Started on first use; it ends when `close` is called or its owner (the session) is
    garbage collected, so a session dropped without closing leaves no thread behind.
    """

    def __init__(self, owner: object) -> None:
        self._jobs: queue.SimpleQueue[tuple[Latents, Handoff] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        # The thread holds only the job queue, never the owner: a finalizer can then run.
        self._finalizer = weakref.finalize(owner, self._jobs.put, None)

    def run(self, latents: Latents) -> Handoff:
        """Start pulling `latents` in the FlowLM thread; the decoder reads them from the hand-off."""
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=_serve, args=(self._jobs,), name="flow-lm", daemon=True)
            self._thread.start()
        handoff = Handoff()
        self._jobs.put((latents, handoff))
        return handoff

    def close(self) -> None:
        self._finalizer()


def _serve(jobs: queue.SimpleQueue) -> None:
    torch.set_num_threads(1)  # the decoder has the other core; set once, for the thread's life
    while (job := jobs.get()) is not None:
        latents, handoff = job
        try:
            for latent in latents:
                handoff.put(latent)
        except BaseException as err:  # noqa: BLE001 -- handed to the consumer, which re-raises
            handoff.put(err)
        handoff.put(None)
        del job, latents, handoff  # nothing of a finished chunk is kept while waiting for the next


def chunk_audio(latents: Latents, stop: threading.Event, decode: Callable[[torch.Tensor], np.ndarray],
                flow_lm: FlowLMThread, threads: int, cancel: threading.Event) -> Iterator[np.ndarray]:
    """Decoded audio of one chunk's `latents` (a generator that ends when `stop` is set),
    group by group: the first frame in this thread with `threads` threads, the rest with
    the FlowLM in `flow_lm`'s thread and the decoder here, one thread each."""
    torch.set_num_threads(threads)
    try:
        first = next(latents, None)
        if first is None:
            return
        first_audio = decode(first)
    finally:
        torch.set_num_threads(1)
    handoff = flow_lm.run(latents)
    try:
        yield first_audio
        for group in decoder_groups(handoff.latents(), DECODER_GROUPS):
            if cancel.is_set():
                continue  # the latents stop within a frame
            yield decode(group)
    finally:
        stop.set()
        handoff.wait_for_end()  # the FlowLM thread is then free for the next chunk


def decoder_groups(latents: Latents, sizes: tuple[int, ...]) -> Iterator[torch.Tensor]:
    """Latents grouped as `sizes` says (its last size repeating): one at a time at
    first, for the earliest audio; then in pairs and fours (DECODER_GROUPS), which the
    decoder runs with a quarter of the per-frame overhead (and so takes the interpreter
    lock from the FlowLM thread less often), once 240 ms of audio are out to cover the
    wait. The grouping is fixed, never "whatever is waiting": a seeded request's audio
    (whose rounding depends on it) must not depend on timing."""
    remaining = iter(sizes)
    size = next(remaining)
    group: list[torch.Tensor] = []
    for latent in latents:
        group.append(latent)
        if len(group) == size:
            yield torch.cat(group, dim=1)
            group, size = [], next(remaining, size)
    if group:
        yield torch.cat(group, dim=1)
