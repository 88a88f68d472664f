"""The English models side by side in one run, float32 and int8: which one for which machine.

    python bench/models_bench.py                                    # the four below, both precisions
    python bench/models_bench.py --models english,english_7m_2026-10 --precision int8

Each (model, precision) runs in a fresh subprocess on random weights of the catalog
architecture, with EOS disabled and a cached voice, measured as `engine_bench.py` measures
our engine (throughput, first frame of a one-sentence request, peak RSS). It also reports
the weight bytes one frame reads (the FlowLM transformer and sampler head, the Mimi
decoder and its transformer; int8 linears count one byte a weight): on a small machine
memory bandwidth bounds the speed, so bytes per frame is what carries over to a Pi
(README, "Which model for which machine").
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from engine_bench import FRAME_SECONDS, peak_rss_mb, run_ours  # noqa: E402 -- a sibling script

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


def worker(args: argparse.Namespace) -> None:
    from wyoming_pocket_tts.engine import load_model

    result = run_ours(Path(args.config), Path(args.voice_state), args.quantize, args.repeats)
    result["peak_rss_mb"] = peak_rss_mb()
    # counted on a second load, after the peak RSS was read: that figure is the measured run's
    result["frame_mb"] = bytes_per_frame(load_model(args.config, quantize=args.quantize).network) / 1e6
    sys.stdout.write(json.dumps(result) + "\n")


def prepare(name: str, folder: Path) -> tuple[Path, Path]:
    """A random-weight copy of catalog model `name`, and a voice state exported from a recording."""
    from engine_fixtures import local_architecture, write_voice_recording

    from wyoming_pocket_tts.engine import load_model

    local = local_architecture(name, folder / name)
    model = load_model(str(local.config_path))
    voice_state = folder / f"{name}-voice.safetensors"
    model.save_voice(model.voice_from_recording(write_voice_recording(folder / "voice.wav", seconds=6.0)), voice_state)
    return local.config_path, voice_state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=DEFAULT_MODELS, help="comma-separated catalog names")
    parser.add_argument("--precision", choices=["float32", "int8", "both"], default="both")
    parser.add_argument("--repeats", type=int, default=3, help="first-frame measurements per run")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
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
    rows = []
    with tempfile.TemporaryDirectory(prefix="models-bench-") as tmp:
        for name in args.models.split(","):
            config, voice_state = prepare(name, Path(tmp))
            for precision in precisions:
                command = [sys.executable, __file__, "--worker", "--config", str(config),
                           "--voice-state", str(voice_state), "--repeats", str(args.repeats)]  # fmt: skip
                if precision == "int8":
                    command.append("--quantize")
                output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
                result = json.loads(output.strip().splitlines()[-1])
                log.info("%s %s: %s", name, precision, result)
                rows.append((name, precision, result))

    sys.stdout.write("\n| model | precision | throughput (x real time) | first frame (ms) | peak RSS (MB) | "
                     "weights read per frame (MB) | effective GB/s |\n|---|---|---|---|---|---|---|\n")
    for name, precision, r in rows:
        # the weight bytes this machine streamed per second of generation
        effective = r["frame_mb"] * r["throughput"] / FRAME_SECONDS / 1000
        sys.stdout.write(f"| {name} | {precision} | {r['throughput']:.2f} | {r['first_frame_ms']:.0f} | "
                         f"{r['peak_rss_mb']:.0f} | {r['frame_mb']:.1f} | {effective:.1f} |\n")


if __name__ == "__main__":
    main()
