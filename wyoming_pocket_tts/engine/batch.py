"""Continuous batching: every reply being spoken advances one frame per batched FlowLM step.

The FlowLM reads all its weights for every frame (340 MB in float32 for the default
model), whether it steps one reply or eight: stepping every active reply in one pass reads
them once. So each model has one `Batcher`, and each reply's current text chunk is a
`ChunkRow` in it. A row joins at the next step, and leaves as soon as it is finished,
cancelled, or its listener stops taking audio; a streamed reply waiting for its next
sentence has no row at all.

This is the only place where the engine runs threads. A batcher has one engine thread per
core (`TTSModel.threads`), started with its first row and stopped when its model is
garbage collected. Each thread takes the most urgent job, one at a time:

1. the first step of a row that joined: its text prompt through the transformer and its
   first latent (alone: it decides when the reply's first audio comes);
2. the first decoding of a row (its first audio);
3. one batched step of every row that may step (`FlowLM.step_rows`), one thread at a time;
4. decoding the next group of a row's latents, the row decoded longest ago first.

So with one reply the two threads work as a pipeline (one steps, the other decodes, as
the FlowLM thread and the caller did before batching), and with several every core
decodes while one of them steps the batch. Decoding is per row: the Mimi decoder is bound
by arithmetic, not by reading weights (four frames cost four times one), so a batch would
save nothing there.

A row's audio is bit for bit what it is alone, whatever else is batched with it: each
row's products give the same bits whatever the other rows (our kernels, `rows_kernel`,
or else `kernels.rows_linear` and one int8 product per row), its attention
over its own cache, its noise from its own generator, its decoder groups fixed (1, 1, 2,
2, then 4 frames) rather than "whatever is ready". Every
job runs with one core: a product's rounding may depend on its thread count, and torch's
thread count is not only per thread (MKL's is process-wide), so a job given every core
changed the rounding of another reply's job running beside it.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import torch

from .allocator import give_back_free_memory
from .flow_lm import FlowLM, StepOutput
from .kernels import inference
from .layers import KVCache

logger = logging.getLogger(__name__)

# Frames per decoder call: the first ones alone, for the earliest audio; then in pairs and
# fours, with a quarter of the per-call work, once 240 ms of audio cover the wait. Fixed,
# never "whatever is ready": a seeded reply's audio (whose rounding depends on the grouping)
# must not depend on timing.
DECODER_GROUPS = (1, 1, 2, 2, 4)
# Latents a row may be ahead of its decoder: two of the largest groups and one more. Rows
# stepped together fill their groups at the same step; with room for one group only, the
# stepping stopped until every row's group was decoded, and one core idled while the other
# decoded (4 float32 replies at once: 0.92x real time each, threads busy 76% of the time;
# with two groups 1.08x, 85%: docs/batching.md).
LOOKAHEAD = 2 * max(DECODER_GROUPS) + 1
# Frames decoded but not yet taken by the reply's reader (640 ms of audio): past this the
# row waits, without stepping or decoding, for its listener.
MAX_UNREAD = 8
# How long a stopping batcher waits for a thread to finish its job (a frame takes less).
STOP_WAIT_S = 5.0
# The latents of a job that decodes nothing: shared, never written (a step job would
# otherwise allocate an empty tensor every frame).
NO_LATENTS = torch.empty(0)
# Before speech starts, the EOS logit of some voices crosses the threshold: ignore it.
MIN_FRAMES_BEFORE_EOS = 6


@dataclass(eq=False)
class ChunkRow:
    """One reply's current text chunk, from its first step to its last decoded frame.

    Made by the reply's session, which reads the frames (`frames`) in its own thread; the
    batcher's threads fill it. `noise` gives the row's noise for one step (its own
    generator and temperature); `decode` turns a group of latents [1, n, dim] into audio
    with the reply's decoder.
    """

    caches: list[KVCache]
    # Token ids [1, t], embedded by the first step (in an engine thread, like every product).
    prompt: torch.Tensor | None
    max_frames: int
    frames_after_eos: int
    eos_threshold: float
    decode_steps: int
    noise: Callable[[], torch.Tensor]
    decode: Callable[[torch.Tensor], np.ndarray]
    cancel: threading.Event
    frame_size: int
    out: queue.SimpleQueue = field(default_factory=queue.SimpleQueue)
    # Written under the batcher's lock.
    previous: torch.Tensor | None = None
    stepped: int = 0
    eos_frame: int | None = None
    latents: deque = field(default_factory=deque)
    flow_done: bool = False
    stepping: bool = False
    decoding: bool = False
    decoded: int = 0
    unread: int = 0
    closed: bool = False
    last_decode: float = 0.0
    groups: Iterator[int] = field(default_factory=lambda: itertools.chain(DECODER_GROUPS, itertools.repeat(DECODER_GROUPS[-1])))
    next_group: int = DECODER_GROUPS[0]

    @property
    def gone(self) -> bool:
        return self.closed or self.cancel.is_set()

    def frames(self, batcher: Batcher) -> Iterator[np.ndarray]:
        """The chunk's frames as they are decoded; leaving early takes the row out at once."""
        try:
            while True:
                item = self.out.get()
                if item is None:
                    return
                if isinstance(item, BaseException):
                    raise item
                batcher.taken(self)
                if self.cancel.is_set():
                    return
                yield item
        finally:
            batcher.leave(self)


class _Work:
    """The rows and the threads' shared state, behind one condition. Holds the FlowLM but
    not the model: the model's finalizer stops the threads."""

    def __init__(self, flow_lm: FlowLM, threads: int) -> None:
        self.flow_lm = flow_lm
        self.threads = threads
        self.rows: list[ChunkRow] = []
        self.changed = threading.Condition()
        self.step_running = False
        self.stopping = False
        # A row ended since the memory was last given back (see allocator).
        self.ended_since_trim = False
        self.workers: list[threading.Thread] = []

    def stop(self) -> None:
        """End the threads once idle, and wait for them: at interpreter exit a thread still
        inside torch crashes the process ("terminate called without an active exception")."""
        with self.changed:
            self.stopping = True
            self.changed.notify_all()
            workers = list(self.workers)
        for thread in workers:
            if thread is not threading.current_thread():
                thread.join(timeout=STOP_WAIT_S)


class Batcher:
    """The rows of one model, and the threads that step and decode them."""

    def __init__(self, owner: object, flow_lm: FlowLM, threads: int) -> None:
        self._work = _Work(flow_lm, max(1, threads))
        weakref.finalize(owner, self._work.stop)

    @property
    def active_rows(self) -> int:
        """Rows joined and not yet finished (for logs and tests)."""
        with self._work.changed:
            return len(self._work.rows)

    def submit(self, row: ChunkRow) -> None:
        """Add a row: it takes its first step as soon as a thread is free."""
        work = self._work
        with work.changed:
            work.rows.append(row)
            work.workers = [thread for thread in work.workers if thread.is_alive()]
            while len(work.workers) < work.threads:
                thread = threading.Thread(target=_serve, args=(work,), name="tts-engine", daemon=True)
                thread.start()
                work.workers.append(thread)
            work.changed.notify_all()

    def taken(self, row: ChunkRow) -> None:
        """The reader took a frame: the row may go on if it was waiting for that."""
        with self._work.changed:
            row.unread -= 1
            if row.unread == MAX_UNREAD - 1:
                self._work.changed.notify_all()

    def leave(self, row: ChunkRow) -> None:
        """The reader is done with the row (finished, or left early). Returns once no
        thread works on it any more (within a frame): the reply's decoder is then its own
        again, for its next sentence."""
        work = self._work
        with work.changed:
            row.closed = True
            _retire(work)
            work.changed.notify_all()
            while row in work.rows:
                work.changed.wait()


# -- the engine threads -----------------------------------------------------------------


@dataclass
class _Job:
    kind: str  # "first step", "step", "decode"
    rows: list[ChunkRow]
    # A decode job's latents [1, n, dim], taken off its row when the job was chosen.
    group: torch.Tensor = NO_LATENTS


def _serve(work: _Work) -> None:
    torch.set_num_threads(1)  # per thread: see the module's docstring
    while True:
        with work.changed:
            job = _next_job(work)
            while job is None:
                if work.stopping:
                    return
                work.changed.wait()
                job = _next_job(work)
        try:
            _run(work, job)
        except BaseException as err:  # noqa: BLE001 -- handed to the readers, which re-raise
            logger.debug("engine job failed", exc_info=True)
            _fail(work, job, err)
        idle = _end(work, job)
        # Nothing of a finished job is kept while waiting for the next: its rows hold their
        # reply's session (and so its model, which must be free to be unloaded).
        del job
        if idle:
            give_back_free_memory()  # outside the lock: a new row must not wait for it


def _fail(work: _Work, job: _Job, error: BaseException) -> None:
    with work.changed:
        for row in job.rows:
            row.flow_done = True
            row.latents.clear()
            _finish(work, row, error)


def _end(work: _Work, job: _Job) -> bool:
    """Release the job's rows; True if the batch has gone idle since a row ended."""
    with work.changed:
        for row in job.rows:
            if job.kind == "decode":
                row.decoding = False
            else:
                row.stepping = False
        if job.kind == "step":
            work.step_running = False
        _retire(work)
        idle = not work.rows and work.ended_since_trim
        if idle:
            work.ended_since_trim = False
        work.changed.notify_all()
    return idle


def _retire(work: _Work) -> None:
    """Take out the rows that are over (under the lock)."""
    for row in list(work.rows):
        if not (row.stepping or row.decoding) and (row.gone or (row.flow_done and not row.latents)):
            _finish(work, row, None)


def _finish(work: _Work, row: ChunkRow, error: BaseException | None) -> None:
    if row in work.rows:
        work.rows.remove(row)
    row.out.put(error)
    work.ended_since_trim = True


def _next_job(work: _Work) -> _Job | None:
    """The most urgent job, its rows marked busy (under the lock); None: nothing to do."""
    _retire(work)
    ready = [row for row in work.rows if not row.gone and row.unread < MAX_UNREAD]
    for row in ready:
        if row.prompt is not None and not row.stepping:
            row.stepping = True
            return _Job("first step", [row])
    decodable = [row for row in ready if not row.decoding and _group_ready(row)]
    for row in decodable:
        if row.decoded == 0:
            return _decode_job(row)
    if not work.step_running:
        live = [row for row in ready if row.prompt is None and not row.flow_done and row.previous is not None]
        steppable = [row for row in live if not row.stepping and len(row.latents) < LOOKAHEAD]
        # A row that is a full lookahead ahead waits for its decoding (it is in `decodable`):
        # decode it first, then step every row together, rather than step the others now
        # and that one alone later (the weights read twice, the batch split for good).
        if steppable and (len(steppable) == len(live) or not decodable):
            # One decode_steps per step (a request's option): the others step next time.
            batch = [row for row in steppable if row.decode_steps == steppable[0].decode_steps]
            for row in batch:
                row.stepping = True
            work.step_running = True
            return _Job("step", batch)
    if decodable:
        return _decode_job(min(decodable, key=lambda row: row.last_decode))
    return None


def _group_ready(row: ChunkRow) -> bool:
    return len(row.latents) >= row.next_group or (row.flow_done and bool(row.latents))


def _decode_job(row: ChunkRow) -> _Job:
    """Takes the group's latents off the row now: the row may step again while it decodes."""
    row.decoding = True
    size = min(row.next_group, len(row.latents))
    return _Job("decode", [row], torch.cat([row.latents.popleft() for _ in range(size)], dim=1))


def _run(work: _Work, job: _Job) -> None:
    if job.kind == "first step":
        row = job.rows[0]
        with inference():
            prompt = work.flow_lm.embed_text(row.prompt)
            output = work.flow_lm.step(None, row.caches, row.noise(), row.decode_steps, prompt)
        with work.changed:
            row.prompt = None
            _advance(row, output, 0)
    elif job.kind == "step":
        rows = job.rows
        noise = torch.cat([row.noise() for row in rows])
        previous = torch.cat([row.previous for row in rows])  # type: ignore[misc]
        with inference():
            output = work.flow_lm.step_rows(previous, [row.caches for row in rows], noise, rows[0].decode_steps)
        with work.changed:
            for index, row in enumerate(rows):
                _advance(row, output, index)
    else:
        row = job.rows[0]
        audio = row.decode(job.group)
        with work.changed:
            row.next_group = next(row.groups)
            row.decoded += job.group.shape[1]
            row.last_decode = time.monotonic()
            for frame in audio.reshape(-1, row.frame_size):
                row.out.put(frame)
                row.unread += 1


def _advance(row: ChunkRow, output: StepOutput, index: int) -> None:
    """Book row `index` of a step's output into its row (under the lock): a latent to
    decode, unless the chunk has ended (end of speech plus its tail, or the length cap)."""
    frame = row.stepped
    row.stepped += 1
    if row.eos_frame is None and float(output.eos_logits[index]) > row.eos_threshold and frame >= MIN_FRAMES_BEFORE_EOS:
        row.eos_frame = frame
    if row.eos_frame is not None and frame >= row.eos_frame + row.frames_after_eos:
        row.flow_done = True
        return
    latent = output.latent[index : index + 1]
    row.latents.append(latent)
    row.previous = latent
    if row.stepped >= row.max_frames:
        row.flow_done = True
        logger.warning("chunk reached its length cap (%d frames) without an end of speech", row.max_frames)
