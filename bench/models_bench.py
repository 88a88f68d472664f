"""The English models side by side in one run, float32 and int8: which one for which machine.

    python bench/models_bench.py                                    # the four below, both precisions
    python bench/models_bench.py --models english,english_7m_2026-10 --precision int8

Each (model, precision) runs in a fresh subprocess on random weights of the catalog
architecture, with EOS disabled and a cached voice, measured as `engine_bench.py` measures
our engine (throughput, first frame of a one-sentence request, peak RSS), over the first
`--frames` frames of the long text. It also reports the CPU time a frame takes (user +
system, all threads): on a machine shared with other work that moves much less than the
wall-clock figures, so it is the column to compare models by there. And it reports
the weight bytes one frame reads (the FlowLM transformer and sampler head, the Mimi
decoder and its transformer; int8 linears count one byte a weight): on a small machine
memory bandwidth bounds the speed, so bytes per frame is what carries over to a Pi
(README, "Which model for which machine").
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from engine_bench import LONG_TEXT, NO_EOS, ONE_SENTENCE, measure, peak_rss_mb, prepare_model  # noqa: E402

DEFAULT_MODELS = "english,english_18m_2026-10,english_7m_2026-10,english_2m_2026-10"
# What every frame runs: one FlowLM step (transformer, sampler head) and one Mimi decode.
PER_FRAME_MODULES = ("flow_lm.transformer", "flow_lm.flow_net", "flow_lm.out_eos", "mimi.decoder_transformer",
                     "mimi.decoder", "mimi.upsample")  # fmt: skip


def bytes_per_frame(network: "torch.nn.Module") -> int:
    """Weight bytes read by one frame: parameters of the per-frame modules, and the packed
    int8 weights (one byte each, float32 bias) of their `Int8Linear`s."""
    from wyoming_pocket_tts.engine.quantize import Int8Linear

    total = 0
    for prefix in PER_FRAME_MODULES:
        module = network.get_submodule(prefix)
        total += sum(p.numel() * p.element_size() for p in module.parameters())
        for sub in module.modules():
            if isinstance(sub, Int8Linear):
                total += sub.in_features * sub.out_features + 4 * sub.out_features
    return total


def worker(config: str, voice_state: str, precision: str, repeats: int, frames: int) -> dict[str, float]:
    from wyoming_pocket_tts.engine import GenerationOptions, load_model

    model = load_model(config, quantize=precision == "int8")
    voice = model.voice_from_file(Path(voice_state))
    options = GenerationOptions(eos_threshold=NO_EOS, seed=0)
    cpu_seconds: list[float] = []

    def long_run() -> Iterator[object]:
        started = time.process_time()
        yield from itertools.islice(model.synthesize(LONG_TEXT, voice, options), frames)
        cpu_seconds.append(time.process_time() - started)

    result = measure(lambda: model.synthesize(ONE_SENTENCE, voice, options, threading.Event()), long_run, repeats)
    result["cpu_ms_per_frame"] = cpu_seconds[-1] * 1000 / result["frames"]
    result["peak_rss_mb"] = peak_rss_mb()
    result["frame_mb"] = bytes_per_frame(model.network) / 1e6
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=DEFAULT_MODELS, help="comma-separated catalog names")
    parser.add_argument("--precision", choices=["float32", "int8", "both"], default="both")
    parser.add_argument("--repeats", type=int, default=3, help="first-frame measurements per run")
    parser.add_argument("--frames", type=int, default=200, help="frames of the throughput run (80 ms each)")
    parser.add_argument("--worker", nargs=3, metavar=("CONFIG", "VOICE_STATE", "PRECISION"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        logging.basicConfig(level=logging.WARNING)
        sys.stdout.write(json.dumps(worker(*args.worker, args.repeats, args.frames)) + "\n")
        return

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    log = logging.getLogger("bench")
    precisions = ["float32", "int8"] if args.precision == "both" else [args.precision]
    rows = []
    with tempfile.TemporaryDirectory(prefix="models-bench-") as tmp:
        for name in args.models.split(","):
            config, voice_state = prepare_model(Path(tmp), name)
            for precision in precisions:
                command = [sys.executable, __file__, "--worker", str(config), str(voice_state), precision,
                           "--repeats", str(args.repeats), "--frames", str(args.frames)]  # fmt: skip
                output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
                result = json.loads(output.strip().splitlines()[-1])
                log.info("%s %s: %s", name, precision, result)
                rows.append((name, precision, result))

    sys.stdout.write("\n| model | precision | throughput (x real time) | first frame (ms) | CPU ms per frame | "
                     "peak RSS (MB) | weights read per frame (MB) |\n|---|---|---|---|---|---|---|\n")
    for name, precision, r in rows:
        sys.stdout.write(f"| {name} | {precision} | {r['throughput']:.2f} | {r['first_frame_ms']:.0f} | "
                         f"{r['cpu_ms_per_frame']:.1f} | {r['peak_rss_mb']:.0f} | {r['frame_mb']:.1f} |\n")


if __name__ == "__main__":
    main()
