"""Our engine against upstream pocket-tts, side by side in one run, on this machine.

    python bench/engine_bench.py            # float32 and int8, default English architecture
    python bench/engine_bench.py --baseline /tmp/old   # this checkout against another one of ours

Each engine runs in a fresh subprocess (so peak RSS is its own), on the same random
weights of the default English architecture, with EOS disabled so both generate the same
number of frames, and speaks with the same cached voice: a voice state encoded once from
a 6 s recording and exported, which both engines load (as the server does from its voice
cache). Figures: throughput (seconds of audio per wall second), time to first frame of a
one-sentence request, and peak RSS of the process.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from proc_status import status_kib  # noqa: E402 -- a sibling module of this script

ONE_SENTENCE = "Turn on the kitchen lights, please."
LONG_TEXT = (
    "The weather today is sunny with a light breeze from the west. "
    "In the afternoon, temperatures will reach twenty two degrees. "
    "Tonight the sky stays clear and the wind drops. "
    "Tomorrow morning brings a little fog near the river."
)
NO_EOS = 1e9
FRAME_SECONDS = 0.08


def measure(first_frame: Callable[[], Iterator[object]], long_run: Callable[[], Iterator[object]], repeats: int) -> dict[str, float]:
    for _ in first_frame():  # warm-up: one whole request
        pass
    latencies = []
    for _ in range(repeats):
        started = time.perf_counter()
        stream = first_frame()
        next(iter(stream))
        latencies.append(time.perf_counter() - started)
        for _ in stream:  # let it finish so the next request starts on an idle machine
            pass
    started = time.perf_counter()
    frames = sum(1 for _ in long_run())
    elapsed = time.perf_counter() - started
    return {
        "first_frame_ms": statistics.median(latencies) * 1000,
        "throughput": frames * FRAME_SECONDS / elapsed,
        "frames": frames,
    }


def run_ours(config: Path, voice_state: Path, quantize: bool, repeats: int) -> dict[str, float]:
    import threading

    from wyoming_pocket_tts.engine import GenerationOptions, load_model

    model = load_model(str(config), quantize=quantize)
    voice = model.voice_from_file(voice_state)
    options = GenerationOptions(eos_threshold=NO_EOS, seed=0)

    def one() -> Iterator[object]:
        return model.synthesize(ONE_SENTENCE, voice, options, threading.Event())

    return measure(one, lambda: model.synthesize(LONG_TEXT, voice, options), repeats)


def run_upstream(config: Path, voice_state: Path, quantize: bool, repeats: int) -> dict[str, float]:
    from pocket_tts import TTSModel

    model = TTSModel.load_model(config=str(config), eos_threshold=NO_EOS, quantize=quantize)
    state = model.get_state_for_audio_prompt(voice_state)

    def frames(text: str) -> Iterator[object]:
        # upstream may hand several frames in one chunk: count 1920-sample frames
        for chunk in model.generate_audio_stream(state, text):
            yield from range(chunk.shape[-1] // 1920)

    return measure(lambda: frames(ONE_SENTENCE), lambda: frames(LONG_TEXT), repeats)


def peak_rss_mb() -> float:
    """This process's peak resident memory. On Linux, VmHWM: ru_maxrss would also count
    the parent's resident memory at the moment it spawned us (the kernel carries the old
    address space's peak over an exec), and the parent holds a model."""
    peak = status_kib("VmHWM")
    return (peak if peak is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) / 1024


def worker(args: argparse.Namespace) -> None:
    run = run_ours if args.worker == "ours" else run_upstream
    result = run(Path(args.config), Path(args.voice_state), args.quantize, args.repeats)
    result["peak_rss_mb"] = peak_rss_mb()
    sys.stdout.write(json.dumps(result) + "\n")


def prepare_model(folder: Path, name: str = "english") -> tuple[Path, Path]:
    """A random-weight copy of catalog model `name` in `folder`: its config, and a voice
    state exported from a recording."""
    from engine_fixtures import local_architecture, write_voice_recording

    from wyoming_pocket_tts.engine import load_model

    local = local_architecture(name, folder / name)
    model = load_model(str(local.config_path))
    voice_state = folder / f"{name}-voice.safetensors"
    model.save_voice(model.voice_from_recording(write_voice_recording(folder / "voice.wav", seconds=6.0)), voice_state)
    return local.config_path, voice_state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--precision", choices=["float32", "int8", "both"], default="both")
    parser.add_argument("--repeats", type=int, default=5, help="first-frame measurements per engine")
    parser.add_argument("--baseline", type=Path, metavar="DIR",
                        help="compare with our engine in another checkout (e.g. a git worktree) instead of upstream")
    parser.add_argument("--rounds", type=int, default=1, help="worker runs per engine, alternating (ratios of medians)")
    parser.add_argument("--worker", choices=["ours", "upstream"], help=argparse.SUPPRESS)
    parser.add_argument("--config", help=argparse.SUPPRESS)
    parser.add_argument("--voice-state", help=argparse.SUPPRESS)
    parser.add_argument("--quantize", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        logging.basicConfig(level=logging.WARNING)
        worker(args)
        return

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    log = logging.getLogger("bench")
    precisions = ["float32", "int8"] if args.precision == "both" else [args.precision]
    # Each engine's worker imports the package from its own checkout, never an installed copy.
    trees = {"upstream": ROOT, "ours": ROOT} if args.baseline is None else {"baseline": args.baseline.resolve(), "ours": ROOT}
    reference, engines = ("upstream" if args.baseline is None else "baseline"), list(trees)
    with tempfile.TemporaryDirectory(prefix="engine-bench-") as tmp:
        config, voice_state = prepare_model(Path(tmp))
        rows = []
        for precision in precisions:
            runs: dict[str, list[dict[str, float]]] = {engine: [] for engine in engines}
            for round_index in range(args.rounds):
                for engine in engines if round_index % 2 == 0 else engines[::-1]:  # alternate who goes first
                    worker_kind = "upstream" if engine == "upstream" else "ours"
                    command = [sys.executable, __file__, "--worker", worker_kind, "--config", str(config),
                               "--voice-state", str(voice_state), "--repeats", str(args.repeats)]  # fmt: skip
                    if precision == "int8":
                        command.append("--quantize")
                    env = {**os.environ, "PYTHONPATH": str(trees[engine])}
                    output = subprocess.run(command, check=True, capture_output=True, text=True, env=env).stdout
                    runs[engine].append(json.loads(output.strip().splitlines()[-1]))
                    log.info("%s %s: %s", engine, precision, runs[engine][-1])
            results = {engine: {key: statistics.median(run[key] for run in engine_runs) for key in engine_runs[0]}
                       for engine, engine_runs in runs.items()}
            rows.append((precision, results))

    sys.stdout.write("\n| precision | engine | throughput (x real time) | first frame (ms) | peak RSS (MB) | frames |\n")
    sys.stdout.write("|---|---|---|---|---|---|\n")
    for precision, results in rows:
        for engine in engines:
            r = results[engine]
            sys.stdout.write(f"| {precision} | {engine} | {r['throughput']:.2f} | {r['first_frame_ms']:.0f} | {r['peak_rss_mb']:.0f} | {r['frames']:.0f} |\n")
        ref, ours = results[reference], results["ours"]
        sys.stdout.write(
            f"| {precision} | **ours / {reference}** | **{ours['throughput'] / ref['throughput']:.2f}x** | "
            f"**{ours['first_frame_ms'] / ref['first_frame_ms']:.2f}x** | **{ours['peak_rss_mb'] / ref['peak_rss_mb']:.2f}x** | |\n"
        )


if __name__ == "__main__":
    main()
