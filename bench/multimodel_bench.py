"""Two full-size models in one server (issue 16): resident memory, and first audio for a
voice whose model is loaded vs one whose model must load first.

Both models are released architectures with random weights (no download): the English
model and the German one, served from local configs, each with a household recording.
Figures come from one run on one machine, side by side; on a shared machine compare them
to each other, not to another run.

    python bench/multimodel_bench.py [--work DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from engine_fixtures import local_architecture, write_voice_recording  # noqa: E402
from server_fixtures import REPO, ServerProcess, free_port, one_shot, rss_mb  # noqa: E402

TEXT = "Good morning, the kitchen lights are on and the coffee is ready."


def start(work: Path, models: list[Path], max_loaded: int) -> ServerProcess:
    port = free_port()
    log_path = work / f"server-{max_loaded}.log"
    cmd = [sys.executable, "-m", "wyoming_pocket_tts", "--uri", f"tcp://127.0.0.1:{port}",
           "--data-dir", str(work / "data"), "--voices", str(work / "voices.yaml"),
           "--voices-dir", str(work / "empty"), "--max-loaded-models", str(max_loaded)]  # fmt: skip
    for model in models:
        cmd += ["--model", str(model)]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
    server = ServerProcess(proc, port, log_path)
    deadline = time.monotonic() + 600
    while "Warm-up:" not in server.log():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(server.log()[-3000:])
        time.sleep(0.5)
    return server


def first_audio_s(server: ServerProcess, voice: str) -> float:
    started = time.monotonic()
    response = asyncio.run(one_shot(server.port, TEXT, voice, timeout=600))
    if response.error or response.first_audio_at is None:
        raise RuntimeError(f"{voice}: {response.error}\n{server.log()[-3000:]}")
    return response.first_audio_at - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=None, help="folder for the models (default: a temporary one)")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="multimodel-bench-"))
    (work / "empty").mkdir(parents=True, exist_ok=True)
    english = local_architecture("english", work / "english").config_path
    german = local_architecture("german", work / "german").config_path
    write_voice_recording(work / "anna.wav", seconds=5, seed=1)
    write_voice_recording(work / "oma.wav", seconds=5, seed=2)
    (work / "voices.yaml").write_text(yaml.safe_dump({"voices": [
        {"name": "anna", "audio": "anna.wav"},
        {"name": "oma", "audio": "oma.wav", "model": str(german)},
    ]}))  # fmt: skip
    figures: dict[str, float] = {}

    both = start(work, [english, german], max_loaded=2)
    try:
        figures["rss_mb_one_loaded"] = rss_mb(both)
        figures["first_audio_s_loaded_model"] = first_audio_s(both, "anna")
        # Its model loads first, and oma is encoded by it (not yet in the disk cache).
        figures["first_audio_s_model_loads_voice_encodes"] = first_audio_s(both, "oma")
        figures["rss_mb_two_loaded"] = rss_mb(both)
        figures["first_audio_s_second_model_loaded"] = first_audio_s(both, "oma")
    finally:
        both.stop()

    one = start(work, [english, german], max_loaded=1)
    try:
        first_audio_s(one, "anna")
        figures["rss_mb_max1_english"] = rss_mb(one)
        # The English model is unloaded, the German one loads; oma comes from the disk cache.
        figures["first_audio_s_model_loads_voice_cached"] = first_audio_s(one, "oma")
        figures["rss_mb_max1_german"] = rss_mb(one)
        figures["first_audio_s_model_reloads"] = first_audio_s(one, "anna")
        figures["rss_mb_max1_english_again"] = rss_mb(one)
    finally:
        one.stop()
    print(json.dumps({key: round(value, 2) for key, value in figures.items()}, indent=2))


if __name__ == "__main__":
    main()
