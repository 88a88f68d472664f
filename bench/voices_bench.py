"""Voice library figures: time to first audio by cache level, and RSS with 8 voices vs 1.

    python bench/voices_bench.py                      # demo model (tiny, random weights)
    python bench/voices_bench.py --model english      # English architecture, random weights
    python bench/voices_bench.py --model english --real-weights   # released weights (network)

Time to first audio = VoiceLibrary.get() + the first 80 ms frame of a short sentence, for
(a) a voice in the memory cache, (b) a voice only in the disk cache (a fresh library on
the same data directory, as after a restart), (c) a recording never seen before.
RSS is measured in child processes that hold 1 and N voices (loaded from the disk cache,
after one first frame), so the allocator's leftovers of one run do not leak into the other.
"""

from __future__ import annotations

import argparse
import ctypes
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import soundfile

# Run from a checkout without installing: the repository root holds the package.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from proc_status import status_kib  # noqa: E402 -- a sibling module of this script
from wyoming_pocket_tts import engine  # noqa: E402
from wyoming_pocket_tts.voices import VoiceLibrary, VoiceLibraryConfig  # noqa: E402

TEXT = "Hello, this is the voice of the house speaking."
_LOGGER = logging.getLogger("voices_bench")


def build(model_name: str, real_weights: bool) -> engine.TTSModel:
    if model_name == "demo" or real_weights:
        return engine.load_model(model_name)
    from wyoming_pocket_tts.engine.catalog import catalog
    from wyoming_pocket_tts.engine.demo import make_tokenizer_json

    entry = catalog()[model_name]
    raw = dict(entry.config)
    raw["flow_lm"] = dict(raw["flow_lm"])
    lookup = dict(raw["flow_lm"]["lookup_table"])
    tokenizer_dir = Path(tempfile.mkdtemp(prefix="voices-bench-tok-"))
    lookup["tokenizer_path"] = str(make_tokenizer_json(tokenizer_dir / "tokenizer.json", lookup["n_bins"]))
    lookup["tokenizer"] = "tokenizers"
    raw["flow_lm"]["lookup_table"] = lookup
    for key in ("weights_path", "weights_path_without_voice_cloning"):
        raw.pop(key, None)
    # A fixed id: the temporary tokenizer path must not change it, or the RSS children
    # (separate processes) would miss the disk cache and encode every voice again.
    return engine.build_model(raw, name=f"{model_name}-random", random_seed=0, languages=(entry.language,),
                              model_id=f"{model_name}-random-bench")


def write_voice(path: Path, seconds: float, seed: int) -> Path:
    """A harmonic tone with syllable-rate modulation, different per seed."""
    rate = 24000
    t = np.arange(int(seconds * rate)) / rate
    f0 = 110 + 15 * seed
    tone = sum(np.sin(2 * np.pi * f0 * k * t) / k for k in range(1, 8))
    envelope = 0.5 + 0.5 * np.sin(2 * np.pi * (3 + 0.3 * seed) * t)
    noise = np.random.default_rng(seed).normal(0, 0.01, t.size)
    path.parent.mkdir(parents=True, exist_ok=True)
    soundfile.write(str(path), (0.15 * tone * envelope + noise).astype(np.float32), rate)
    return path


def first_audio(model: engine.TTSModel, library: VoiceLibrary, name: str) -> tuple[float, float]:
    """Seconds for get() and for get() + first frame."""
    options = engine.GenerationOptions(seed=0)
    started = time.perf_counter()
    _, state = library.get(name)
    got = time.perf_counter()
    frames = model.synthesize(TEXT, state, options)
    next(frames)
    done = time.perf_counter()
    frames.close()
    return got - started, done - started


def config(data_dir: Path, voices_dir: Path, cache_size: int = 8) -> VoiceLibraryConfig:
    return VoiceLibraryConfig(
        data_dir=data_dir, voices_dir=voices_dir, include_predefined=False, cache_size=cache_size
    )


def timing(model: engine.TTSModel, work: Path, seconds: float, repeat: int) -> dict[str, list[tuple[float, float]]]:
    results: dict[str, list[tuple[float, float]]] = {"memory": [], "disk": [], "new": []}
    voices_dir = work / "voices"
    # Warm-up: torch's first call pays one-off costs no request pays in steady state.
    write_voice(voices_dir / "warmup.wav", seconds, seed=99)
    first_audio(model, VoiceLibrary(model, config(work / "warm", voices_dir)), "warmup")
    for run in range(repeat):
        data_dir = work / f"data{run}"
        write_voice(voices_dir / f"new{run}.wav", seconds, seed=run)
        library = VoiceLibrary(model, config(data_dir, voices_dir))
        results["new"].append(first_audio(model, library, f"new{run}"))
        results["memory"].append(first_audio(model, library, f"new{run}"))
        library.close()
        fresh = VoiceLibrary(model, config(data_dir, voices_dir))  # as after a restart
        results["disk"].append(first_audio(model, fresh, f"new{run}"))
        fresh.close()
    return results


def rss_child(model_name: str, real_weights: bool, data_dir: Path, voices_dir: Path, count: int) -> None:
    """Child process: hold `count` voices, then report RSS and the states' bytes."""
    model = build(model_name, real_weights)
    library = VoiceLibrary(model, config(data_dir, voices_dir, cache_size=max(count, 1)))
    names = sorted(path.stem for path in voices_dir.glob("rss*.wav"))[:count]
    for name in names:
        library.get(name)
    first_audio(model, library, names[0])
    held = _rss_bytes()
    sys.stdout.write(f"{held} {_rss_bytes_trimmed()} {library.cached_bytes()} {len(library.cached_names())}\n")


def _rss_bytes() -> int:
    return (status_kib("VmRSS") or 0) * 1024


def _rss_bytes_trimmed() -> int:
    """RSS once glibc has returned its free memory: what the process really holds."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass  # not glibc: the figure is then the plain RSS
    return _rss_bytes()


def rss(model: engine.TTSModel, args: argparse.Namespace, work: Path) -> dict[int, tuple[int, ...]]:
    voices_dir, data_dir = work / "rss_voices", work / "rss_data"
    for n in range(args.voices):
        write_voice(voices_dir / f"rss{n:02d}.wav", args.seconds, seed=n)
    # Encode every voice once here so the children only load from the disk cache.
    library = VoiceLibrary(model, config(data_dir, voices_dir, cache_size=args.voices))
    for n in range(args.voices):
        library.get(f"rss{n:02d}")
    library.close()
    figures = {}
    for count in (1, args.voices):
        command = [sys.executable, __file__, "--model", args.model, "--rss-child", str(count),
                   "--work", str(work)] + (["--real-weights"] if args.real_weights else [])
        out = subprocess.run(command, check=True, capture_output=True, text=True).stdout.split()
        figures[count] = tuple(int(value) for value in out)
    return figures


def report(model: engine.TTSModel, args: argparse.Namespace, times: dict, memory: dict) -> None:
    write = sys.stdout.write
    write(f"\nmodel {model.name} ({model.model_id}), {os.cpu_count()} cores, "
          f"torch threads {__import__('torch').get_num_threads()}, recordings of {args.seconds:g} s, "
          f"median of {args.repeat}\n\n")
    write("| voice is ...                          | get() ms median (min) | first audio ms median (min) |\n")
    write("|---------------------------------------|----------------------:|----------------------------:|\n")
    labels = {"memory": "(a) in the memory cache", "disk": "(b) only in the disk cache (restart)",
              "new": "(c) a never-seen recording"}
    for key in ("memory", "disk", "new"):
        gets = [t[0] * 1000 for t in times[key]]
        firsts = [t[1] * 1000 for t in times[key]]
        get_text = f"{statistics.median(gets):.1f} ({min(gets):.1f})"
        first_text = f"{statistics.median(firsts):.1f} ({min(firsts):.1f})"
        write(f"| {labels[key]:<37} | {get_text:>21} | {first_text:>27} |\n")
    write("\n| voices in memory | RSS MB | RSS after malloc_trim MB | voice states MB |\n|---:|---:|---:|---:|\n")
    for count, (rss_bytes, trimmed, state_bytes, cached) in sorted(memory.items()):
        write(f"| {cached} | {rss_bytes / 2**20:.0f} | {trimmed / 2**20:.0f} | {state_bytes / 2**20:.1f} |\n")
    if len(memory) == 2:
        (r1, t1, s1, _), (r8, t8, s8, _) = (memory[k] for k in sorted(memory))
        write(f"\nRSS difference: {(r8 - r1) / 2**20:.1f} MB ({(t8 - t1) / 2**20:.1f} MB after malloc_trim) "
              f"for {(s8 - s1) / 2**20:.1f} MB of voice states\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="demo", help="demo, or a catalog name (random weights unless --real-weights)")
    parser.add_argument("--real-weights", action="store_true", help="load the released weights (network)")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each recording")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--voices", type=int, default=8, help="voices held for the RSS figure")
    parser.add_argument("--rss-child", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    if args.rss_child is not None:
        rss_child(args.model, args.real_weights, args.work / "rss_data", args.work / "rss_voices", args.rss_child)
        return
    with tempfile.TemporaryDirectory(prefix="voices-bench-") as tmp:
        work = Path(tmp)
        model = build(args.model, args.real_weights)
        times = timing(model, work, args.seconds, args.repeat)
        memory = rss(model, args, work)
        report(model, args, times, memory)


if __name__ == "__main__":
    main()
