"""Speaking-rate stretcher: cost per 80 ms frame, ours against the candidate libraries.

    python bench/stretch_bench.py                  # ours; candidates found installed too
    python bench/stretch_bench.py --repeats 20

Real speech (three espeak-ng sentences at 24 kHz, about 8 s) is fed in 1920-sample frames
on one thread. For each length scale it prints the cost per frame (median and p99, ms)
and, as a check of the result, the output's length against X times the input's, its
pitch against the input's at the same moment of speech (1.000 = preserved) and its
largest sample-to-sample jump against the input's (1.000 = no click added).

Candidates, each run if importable (install them in a scratch venv, never the project's):
audiotsm (WSOLA, streaming: fed frame by frame like ours), pytsmod (WSOLA, whole signal),
pedalboard (Rubber Band, whole signal) and pyrubberband (the `rubberband` program, whole
file). A whole-signal candidate cannot stream; its figure is its total time divided by
the number of frames, which is what it would cost at best.
"""

from __future__ import annotations

import os

# One thread for every library, set before numpy (and its BLAS) is first imported.
for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import logging  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

# The tests' recordings and measures.
from speech_fixtures import FRAME_SIZE, SAMPLE_RATE, ensure_espeak, frames_of  # noqa: E402
from speech_fixtures import max_jump, pitch_ratio, speak_sentences  # noqa: E402
from wyoming_pocket_tts.audio import TimeStretcher  # noqa: E402

SCALES = (0.8, 1.25, 1.5)
_LOGGER = logging.getLogger("stretch_bench")

# A streaming stretcher: (length_scale) -> (process(frame), flush()).
Streaming = Callable[[float], tuple[Callable[[np.ndarray], np.ndarray], Callable[[], np.ndarray]]]
# A whole-signal stretcher: (audio, length_scale) -> stretched audio.
Whole = Callable[[np.ndarray, float], np.ndarray]


@dataclass(frozen=True)
class Result:
    name: str
    length_scale: float
    median_ms: float
    p99_ms: float
    cpu_p99_ms: float | None  # this thread's CPU time: the p99 without the busy machine's preemptions
    streams: bool
    length_ratio: float
    pitch: float
    jump: float


def ours(length_scale: float) -> tuple[Callable[[np.ndarray], np.ndarray], Callable[[], np.ndarray]]:
    stretcher = TimeStretcher(length_scale, SAMPLE_RATE)
    return stretcher.process, stretcher.flush


def audiotsm_streaming(length_scale: float) -> tuple[Callable[[np.ndarray], np.ndarray], Callable[[], np.ndarray]]:
    from audiotsm import wsola
    from audiotsm.io.array import ArrayReader, ArrayWriter

    tsm = wsola(channels=1, speed=1.0 / length_scale)

    def process(frame: np.ndarray) -> np.ndarray:
        writer = ArrayWriter(1)
        tsm.run(ArrayReader(frame[np.newaxis, :]), writer, flush=False)
        return writer.data[0].astype(np.float32)

    def flush() -> np.ndarray:
        writer = ArrayWriter(1)
        tsm.flush_to(writer)
        return writer.data[0].astype(np.float32)

    return process, flush


def pytsmod_whole(audio: np.ndarray, length_scale: float) -> np.ndarray:
    import pytsmod

    return np.asarray(pytsmod.wsola(audio.astype(np.float64), length_scale), dtype=np.float32).reshape(-1)


def pedalboard_whole(audio: np.ndarray, length_scale: float) -> np.ndarray:
    import pedalboard

    out = pedalboard.time_stretch(audio[np.newaxis, :], SAMPLE_RATE, stretch_factor=1.0 / length_scale)
    return np.asarray(out[0], dtype=np.float32)


def pyrubberband_whole(audio: np.ndarray, length_scale: float) -> np.ndarray:
    import pyrubberband

    return np.asarray(pyrubberband.time_stretch(audio, SAMPLE_RATE, 1.0 / length_scale), dtype=np.float32)


def measure_streaming(name: str, make: Streaming, audio: np.ndarray, length_scale: float, repeats: int) -> Result:
    costs: list[float] = []
    cpu_costs: list[float] = []
    out = np.zeros(0, dtype=np.float32)
    for _ in range(repeats):
        process, flush = make(length_scale)
        chunks = []
        for frame in frames_of(audio):
            start, cpu_start = time.perf_counter(), time.thread_time()
            chunks.append(process(frame))
            costs.append(time.perf_counter() - start)
            cpu_costs.append(time.thread_time() - cpu_start)
        chunks.append(flush())
        out = np.concatenate(chunks)
    return _result(name, length_scale, np.array(costs), float(np.percentile(cpu_costs, 99) * 1000), True, audio, out)


def measure_whole(name: str, stretch: Whole, audio: np.ndarray, length_scale: float, repeats: int) -> Result:
    frames = len(frames_of(audio))
    costs: list[float] = []
    out = np.zeros(0, dtype=np.float32)
    for _ in range(repeats):
        start = time.perf_counter()
        out = stretch(audio, length_scale)
        costs.append((time.perf_counter() - start) / frames)
    # Wall time only: pyrubberband's work is in a child process, outside this thread.
    return _result(name, length_scale, np.array(costs), None, False, audio, out)


def _result(name: str, length_scale: float, costs: np.ndarray, cpu_p99_ms: float | None, streams: bool,
            audio: np.ndarray, out: np.ndarray) -> Result:  # fmt: skip
    return Result(
        name=name,
        length_scale=length_scale,
        median_ms=float(np.median(costs) * 1000),
        p99_ms=float(np.percentile(costs, 99) * 1000),
        cpu_p99_ms=cpu_p99_ms,
        streams=streams,
        length_ratio=out.size / (length_scale * audio.size),
        pitch=pitch_ratio(audio, out, length_scale),
        jump=max_jump(out) / max_jump(audio),
    )


def candidates() -> tuple[list[tuple[str, Streaming]], list[tuple[str, Whole]]]:
    streaming: list[tuple[str, Streaming]] = [("ours (WSOLA, numpy)", ours)]
    whole: list[tuple[str, Whole]] = []
    if importlib.util.find_spec("audiotsm"):
        streaming.append(("audiotsm 0.1.2 (WSOLA)", audiotsm_streaming))
    if importlib.util.find_spec("pytsmod"):
        whole.append(("pytsmod (WSOLA)", pytsmod_whole))
    if importlib.util.find_spec("pedalboard"):
        whole.append(("pedalboard (Rubber Band)", pedalboard_whole))
    if importlib.util.find_spec("pyrubberband") and shutil.which("rubberband"):
        whole.append(("pyrubberband (CLI)", pyrubberband_whole))
    return streaming, whole


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=10, help="runs over the speech per scale (default 10)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    espeak = ensure_espeak()
    if espeak is None:
        raise SystemExit("stretch_bench needs espeak-ng (apt-get install espeak-ng)")
    with tempfile.TemporaryDirectory() as folder:
        audio = np.concatenate(speak_sentences(espeak, Path(folder)))
    frame_ms = 1000 * FRAME_SIZE / SAMPLE_RATE
    _LOGGER.info("speech: %.2f s, %d frames of %.0f ms; %d repeats", audio.size / SAMPLE_RATE,
                 len(frames_of(audio)), frame_ms, args.repeats)  # fmt: skip
    streaming, whole = candidates()
    results: list[Result] = []
    for length_scale in SCALES:
        for name, make in streaming:
            results.append(measure_streaming(name, make, audio, length_scale, args.repeats))
        for name, stretch in whole:
            results.append(measure_whole(name, stretch, audio, length_scale, max(1, args.repeats // 2)))

    _LOGGER.info("%-26s %5s %9s %8s %8s %6s %8s %7s %6s %8s", "stretcher", "X", "median ms", "p99 ms", "cpu p99",
                 "stream", "length", "pitch", "jump", "vs ours")  # fmt: skip
    for result in results:
        baseline = next(r for r in results if r.length_scale == result.length_scale and r.name.startswith("ours"))
        cpu = "-" if result.cpu_p99_ms is None else f"{result.cpu_p99_ms:.3f}"
        _LOGGER.info("%-26s %5.2f %9.3f %8.3f %8s %6s %8.4f %7.3f %6.3f %7.1fx", result.name, result.length_scale,
                     result.median_ms, result.p99_ms, cpu, "yes" if result.streams else "no", result.length_ratio,
                     result.pitch, result.jump, result.median_ms / baseline.median_ms)  # fmt: skip
    mine = [r for r in results if r.name.startswith("ours")]
    worst, worst_cpu = max(r.p99_ms for r in mine), max(r.cpu_p99_ms or 0.0 for r in mine)
    _LOGGER.info("ours: worst p99 %.3f ms wall, %.3f ms CPU per %.0f ms frame = %.1f%% / %.1f%% of a frame's time",
                 worst, worst_cpu, frame_ms, 100 * worst / frame_ms, 100 * worst_cpu / frame_ms)  # fmt: skip


if __name__ == "__main__":
    main()
