"""Timing float32 against int8 on this CPU, for `--quantize auto`.

Which precision is faster depends on the CPU more than on anything we can read from it:
int8 reads a quarter of the weights, but its kernel quantizes every input on the way in,
and on some ARM cores (pocket-tts issue 240: QNNPACK on a Cortex-A76) it lost to
float32. So the server times both on the machine itself, once, and remembers the figures
(server/precision.py decides and keeps them; this module only measures).

How, so that a busy machine cannot tilt the result:
- the same process, the same loaded weights: the int8 linears are made beside the
  float32 ones and swapped in and out (`Int8Slot`), so both run on the same memory, the
  same thread, the same allocator state;
- interleaved rounds, the order alternating (float32 then int8, int8 then float32, ...),
  so a burst of load from elsewhere falls on both; the first round of each is untimed
  (first touch of the weights, the allocator's first buffers);
- medians over the rounds, with the fastest and slowest kept to show the spread;
- what a frame of serving costs: a FlowLM step of every row (the transformer over a KV
  cache holding a voice prompt and a sentence, the sampler head) and the decoding of one
  frame per row, in decoder groups of four as a reply decodes after its first frames;
  on one thread, as the FlowLM and the decoder each run on one while a reply streams.
  Each row decodes on its own, so one row's decoding is timed and counted per row (a
  quarter of the time four decoders would take to time).
- at 1 and at 4 rows (replies batched in one step, see engine/batch.py): the weights are
  read once per step whatever the number of rows by our kernels, but torch's int8 one
  (where ours is not used) multiplies each row on its own (it quantizes a whole input with
  one scale), so the two precisions may scale differently.

The input values do not matter (nothing branches on them), so they are random, fixed by
a seed; the latents are not fed back, so nothing drifts toward denormals or overflow.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

import torch
from torch import nn

from ..core.precision import MEASURED, FrameTiming, Precision, PrecisionFigures
from .kernels import inference
from .mimi import DecoderState
from .model import TTSModel
from .quantize import Int8Linear, Int8Slot, int8_slots, machine_engine
from .rows_kernel import ROWS_KERNEL


BATCH_SIZES = (1, 4)
# Timed rounds per precision and batch size, after an untimed one; past TIME_BUDGET_S,
# no new repeat starts once MIN_REPEATS are done (a slow CPU measures 3, not 5).
REPEATS = 5
MIN_REPEATS = 3
TIME_BUDGET_S = 8.0
# FlowLM steps per round, then one decoder group of as many frames per row.
STEPS_PER_ROUND = 4
# Positions already in each row's KV cache: a voice prompt (~125 frames) and a sentence.
CONTEXT = 160
# Raised when the measurement changes what it times: remembered figures are then stale.
# 2: the rows of a batched step each have caches of their own (continuous batching).
# 3: float32 steps may go through our kernel (engine/rows_kernel.py), said in the identity.
# 4: int8 products may go through ours too (a batch's rows multiplied together), said there.
METHOD_VERSION = 4

Clock = Callable[[], float]


def runtime_identity() -> str:
    """What the figures depend on besides the CPU and the model: torch, the int8 and float32
    step kernels (ours are there once a C compiler was at install, int8 with VNNI only) and
    this measurement's version."""
    float32 = "ours" if ROWS_KERNEL is not None else "torch"
    return f"torch {torch.__version__}, int8 by {machine_engine().name}, float32 steps by {float32}, measurement {METHOD_VERSION}"


def measure_precisions(model: TTSModel, *, repeats: int = REPEATS, batch_sizes: Sequence[int] = BATCH_SIZES,
                       clock: Clock = time.perf_counter, budget_s: float = TIME_BUDGET_S) -> PrecisionFigures:  # fmt: skip
    """Time `model` (float32, as loaded) in float32 and in int8; it is float32 again after.

    Takes a few seconds for the default model on a 2-core x86 machine (docs/precision.md).
    Run it before the model serves: it swaps the model's linears while it measures.
    """
    started = clock()
    slots = int8_slots(model.network)
    float32: list[nn.Module] = [slot.get() for slot in slots]
    if any(isinstance(module, Int8Linear) for module in float32):
        raise ValueError("the model is already quantized: measure it as loaded, in float32")
    int8 = [Int8Linear(module) for module in float32]
    modules: dict[Precision, list[nn.Module]] = {"float32": float32, "int8": list(int8)}
    rounds = _Rounds(model, batch_sizes)
    times: dict[tuple[Precision, int], list[float]] = {(p, rows): [] for p in MEASURED for rows in batch_sizes}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # per thread: the caller's others are left alone
    try:
        for repeat in range(repeats + 1):
            if repeat > min(MIN_REPEATS, repeats) and clock() - started > budget_s:
                break
            for precision in MEASURED if repeat % 2 == 0 else MEASURED[::-1]:
                _use(slots, modules[precision])
                # Each row decodes on its own (the decoder is not batched): one row's
                # decoding, timed once, counts once per row.
                decode_ms = rounds.decode_ms(clock)
                for rows in batch_sizes:
                    milliseconds = rounds.step_ms(rows, clock) + rows * decode_ms
                    if repeat > 0:
                        times[precision, rows].append(milliseconds)
    finally:
        _use(slots, float32)
        torch.set_num_threads(threads)
    timings = tuple(
        FrameTiming(precision, rows, statistics.median(values), min(values), max(values))
        for (precision, rows), values in times.items()
    )
    return PrecisionFigures(timings, frame_ms=1000.0 / model.network.mimi.frame_rate,
                            int8_engine=int8[0].engine.name if int8 else "none",
                            seconds=clock() - started, repeats=len(times[MEASURED[0], batch_sizes[0]]))  # fmt: skip


def _use(slots: list[Int8Slot], modules: list[nn.Module]) -> None:
    for slot, module in zip(slots, modules):
        slot.put(module)


class _Rounds:
    """The inputs of every round, made once (untimed): per batch size, each row's KV
    prefix, previous latent and noise; the latents a decoder group decodes, and the
    decoder, which carries its state from round to round as a reply's does from frame to
    frame."""

    def __init__(self, model: TTSModel, batch_sizes: Sequence[int]) -> None:
        network = model.network
        self.flow_lm, self.mimi = network.flow_lm, network.mimi
        transformer = self.flow_lm.transformer
        generator = torch.Generator().manual_seed(0)
        shape = (transformer.num_kv_heads, CONTEXT, transformer.head_dim)
        # Per batch size, per row (each reply has caches of its own), per layer.
        self.prefixes = {rows: [[(torch.randn(1, *shape, generator=generator), torch.randn(1, *shape, generator=generator))
                                 for _ in transformer.layers] for _ in range(rows)]
                         for rows in batch_sizes}  # fmt: skip
        latent_dim = self.flow_lm.latent_dim
        self.previous = {rows: torch.randn(rows, 1, latent_dim, generator=generator) for rows in batch_sizes}
        self.noise = {rows: torch.randn(rows, latent_dim, generator=generator) for rows in batch_sizes}
        latents = torch.randn(1, STEPS_PER_ROUND, latent_dim, generator=generator)
        self.group = latents * self.flow_lm.emb_std + self.flow_lm.emb_mean
        self.decoder: DecoderState = self.mimi.new_decoder_state()

    def step_ms(self, rows: int, clock: Clock) -> float:
        """STEPS_PER_ROUND FlowLM steps of `rows` rows, in milliseconds per step."""
        flow_lm = self.flow_lm
        with inference():
            caches = [flow_lm.transformer.new_caches(prefix, capacity=STEPS_PER_ROUND) for prefix in self.prefixes[rows]]
            started = clock()
            for _ in range(STEPS_PER_ROUND):
                flow_lm.step_rows(self.previous[rows], caches, self.noise[rows], 1)
            elapsed = clock() - started
        return elapsed * 1000.0 / STEPS_PER_ROUND

    def decode_ms(self, clock: Clock) -> float:
        """One decoder group of STEPS_PER_ROUND frames of one row, in milliseconds per frame."""
        with inference():
            started = clock()
            self.mimi.decode(self.group, self.decoder)
            elapsed = clock() - started
        return elapsed * 1000.0 / STEPS_PER_ROUND
