"""Several models in one server (issue 16), as real server processes on two small
random-weight models: the demo, and a custom config (the 7M English architecture, served
as German with --language, which with several models applies to custom configs only).

Temperature 0 makes synthesis deterministic, so "spoken by its own model" is checked as
"the same audio as that model served alone".
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import yaml

from engine_fixtures import LocalModel, local_architecture, write_voice_recording
from server_fixtures import REPO, ServerProcess, describe, free_port, one_shot, rss_mb, stop_cleanly

TEXT = "Guten Morgen, das Wetter ist schön."
CUSTOM_ARCHITECTURE = "english_7m_2026-10"
ROUNDING_STEPS = 2


@dataclass(frozen=True)
class Household:
    custom: LocalModel
    voices_file: Path


@pytest.fixture(scope="module")
def household(tmp_path_factory: pytest.TempPathFactory) -> Household:
    """A voices file with a voice of each model, and one name both models offer ("demo")."""
    folder = tmp_path_factory.mktemp("household")
    custom = local_architecture(CUSTOM_ARCHITECTURE, folder / "model")
    write_voice_recording(folder / "oma.wav", seed=1)
    write_voice_recording(folder / "papa.wav", seed=2)
    voices = {
        "voices": [
            {"name": "papa", "audio": "papa.wav"},  # no model: the first one's
            {"name": "oma", "audio": "oma.wav", "model": str(custom.config_path)},
            # The custom model's own "demo": the demo model's predefined voice has the name.
            {"name": "demo", "audio": "oma.wav", "model": CUSTOM_ARCHITECTURE},
        ]
    }
    voices_file = folder / "voices.yaml"
    voices_file.write_text(yaml.safe_dump(voices), encoding="utf-8")
    return Household(custom, voices_file)


def start(tmp_path: Path, household: Household, *models: str, extra: tuple[str, ...] = ()) -> ServerProcess:
    port = free_port()
    (tmp_path / "empty").mkdir(exist_ok=True)  # no voices folder: the voices file only
    log_path = tmp_path / f"server-{port}.log"
    cmd = [sys.executable, "-m", "wyoming_pocket_tts", "--uri", f"tcp://127.0.0.1:{port}",
           "--data-dir", str(tmp_path / "data"), "--voices", str(household.voices_file),
           "--voices-dir", str(tmp_path / "empty"), "--temperature", "0"]  # fmt: skip
    for model in models:
        cmd += ["--model", model]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([*cmd, *extra], stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})  # fmt: skip
    return ServerProcess(proc, port, log_path)


@pytest.fixture
def serving(tmp_path: Path, household: Household) -> Iterator:
    started: list[ServerProcess] = []

    def run(*models: str, extra: tuple[str, ...] = ()) -> ServerProcess:
        proc = start(tmp_path, household, *models, extra=extra)
        started.append(proc)
        deadline = time.monotonic() + 120
        while "Warm-up:" not in proc.log():  # the default model is loaded and warm
            assert proc.proc.poll() is None, proc.log()
            assert time.monotonic() < deadline, proc.log()
            time.sleep(0.2)
        return proc

    yield run
    for proc in started:
        stop_cleanly(proc, log_tail=4000)


def speak(proc: ServerProcess, voice: str) -> bytes:
    response = asyncio.run(one_shot(proc.port, TEXT, voice, timeout=120))
    assert response.error is None, proc.log()
    assert response.audio
    return response.audio


def same_audio(got: bytes, expected: bytes) -> bool:
    """Equal up to float rounding: the same model and voice at temperature 0 give the same
    samples, but a model loaded in another thread may round a last bit differently (one
    step of 16-bit PCM, 3e-5 of full scale); another voice or model differs everywhere."""
    a, b = np.frombuffer(got, np.int16).astype(np.int32), np.frombuffer(expected, np.int16).astype(np.int32)
    return a.shape == b.shape and int(np.abs(a - b).max()) <= ROUNDING_STEPS


def voice_languages(proc: ServerProcess) -> dict[str, list[str]]:
    info, _ = asyncio.run(describe(proc.port))
    return {voice.name: list(voice.languages) for voice in info.tts[0].voices}


def test_both_models_voices_in_one_describe_each_spoken_by_its_model(serving, household: Household) -> None:
    custom = str(household.custom.config_path)
    alone_demo = serving("demo")  # (--language would apply to the demo alone)
    demo_audio, papa_audio = speak(alone_demo, "demo"), speak(alone_demo, "papa")
    alone_demo.stop()
    alone_custom = serving(custom, extra=("--language", "de"))
    oma_audio = speak(alone_custom, "oma")
    alone_custom.stop()

    both = serving("demo", custom, extra=("--language", "de"))
    languages = voice_languages(both)
    # The default voice first; the demo's voices in English (the demo says its own language:
    # --language is for custom configs), the custom model's in German, one name per voice.
    assert list(languages)[0] == "demo"
    assert languages == {
        "demo": ["en"], "papa": ["en"], "oma": ["de"], f"demo ({CUSTOM_ARCHITECTURE})": ["de"],
    }  # fmt: skip
    assert same_audio(speak(both, "oma"), oma_audio)
    assert same_audio(speak(both, "demo"), demo_audio)
    assert same_audio(speak(both, "papa"), papa_audio)
    # The renamed voice is the custom model's recording of oma.wav: the same as oma.
    assert same_audio(speak(both, f"DEMO ({CUSTOM_ARCHITECTURE.upper()})"), oma_audio)
    log = both.log()
    assert f"Loading model {custom} for a request" in log
    assert " unloaded in " not in log  # two models fit the default bound


def test_one_model_loaded_at_a_time_alternates_with_audio_unchanged(serving, household: Household) -> None:
    custom = str(household.custom.config_path)
    proc = serving("demo", custom, extra=("--max-loaded-models", "1", "--language", "de"))
    first_demo, first_oma = speak(proc, "demo"), speak(proc, "oma")
    with_custom = rss_mb(proc)
    assert same_audio(speak(proc, "demo"), first_demo)  # the custom model is unloaded for it
    without_custom = rss_mb(proc)
    assert same_audio(speak(proc, "oma"), first_oma)
    assert not same_audio(first_oma, first_demo)  # (the comparison tells voices apart)
    log = proc.log()
    assert log.count(f"Model {custom} unloaded") == 1
    assert log.count("Model demo unloaded") == 2
    # Reloaded, oma comes from the disk cache: it was encoded once.
    assert log.count("'oma' encoded from the recording") == 1
    assert "'oma' loaded from the disk cache" in log
    # The custom model's weights (~30 MB here) are given back to the system when it is
    # unloaded (the demo model is a few hundred kB): a generous third of them.
    weights_mb = household.custom.weights_path.stat().st_size / 2**20
    assert without_custom < with_custom - weights_mb / 3, (with_custom, without_custom, weights_mb)
    # Every voice is still advertised while its model is not loaded.
    assert set(voice_languages(proc)) == {"demo", "papa", "oma", f"demo ({CUSTOM_ARCHITECTURE})"}
