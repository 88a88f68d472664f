"""The real server from the instant its port opens: what `describe` says, for every kind of
model (catalog, demo, a local config), and what a request gets when the model cannot load.

Home Assistant builds its TTS entity from the first `describe` it gets; an answer without
voices, or with voices in no language, leaves it broken until the user reloads it.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest
import soundfile
from engine_fixtures import local_architecture, write_voice_recording
from server_fixtures import ServerProcess, describe, one_shot, start_server_process
from wyoming.info import Info

from wyoming_pocket_tts.engine.catalog import catalog


def run(coro):
    return asyncio.run(coro)


def poll_describes(server: ServerProcess, until_ready: bool, timeout: float = 120.0) -> list[Info]:
    """Describe again and again from the moment the port accepts, until the model is ready
    (`until_ready`) or the process has exited; every answer is returned."""
    answers: list[Info] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            info, _ = run(describe(server.port, timeout=5.0))
        except (OSError, AssertionError, asyncio.TimeoutError):
            if server.proc.poll() is not None:
                return answers
            time.sleep(0.01)  # not listening yet, or gone meanwhile
            continue
        answers.append(info)
        if until_ready and "(loading)" not in (info.tts[0].description or ""):
            return answers
    raise AssertionError(f"no end after {timeout} s:\n{server.log()[-3000:]}")


def voices_of(info: Info) -> list[tuple[str, list[str]]]:
    return [(voice.name, list(voice.languages)) for voice in info.tts[0].voices]


@pytest.fixture
def household(tmp_path: Path) -> Path:
    folder = tmp_path / "voices"
    write_voice_recording(folder / "grandma.wav", seed=0)
    return folder


def test_demo_model_describes_its_voices_from_the_first_answer(tmp_path, household):
    server = start_server_process(tmp_path, "--voices-dir", str(household))
    try:
        answers = poll_describes(server, until_ready=True)
    finally:
        assert server.stop() == 0, server.log()
    loading = [info for info in answers if "(loading)" in info.tts[0].description]
    assert loading, "no describe was answered while the model loaded"
    expected = [("demo", ["en"]), ("grandma", ["en"])]
    for info in answers:
        assert voices_of(info) == expected, server.log()[-3000:]


def test_describe_is_answered_while_the_precision_is_measured(tmp_path):
    """--quantize auto (the default) times both precisions at the first start, in the
    loader thread: describe keeps answering, each within a second, meanwhile."""
    server = start_server_process(tmp_path)
    answered: list[tuple[float, float]] = []  # (sent, seconds to the answer)
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and "runs in" not in server.log():
            sent = time.time()
            try:
                run(describe(server.port, timeout=5.0))
            except (OSError, AssertionError, asyncio.TimeoutError):
                time.sleep(0.01)  # not listening yet
                continue
            answered.append((sent, time.time() - sent))
    finally:
        assert server.stop() == 0, server.log()
    log = server.log()
    began, ended = (_log_time(line) for line in log.splitlines() if "timing float32 and int8" in line or " runs in " in line)
    during = [seconds for sent, seconds in answered if began <= sent <= ended]
    assert during, f"no describe while measuring ({began:.3f}-{ended:.3f}):\n{log[-3000:]}"
    assert max(during) < 1.0  # (the very first describes may wait for the voice preview)
    assert (tmp_path / "data" / "precision.json").is_file()


def _log_time(line: str) -> float:
    """The time of a log line ("2026-12-01 21:51:22,964 INFO ...") as a Unix time."""
    return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()


def test_local_config_without_a_language_gets_english_and_says_so(tmp_path, household):
    local = local_architecture("english_2m_refl_2026-10", tmp_path / "mymodel")
    config = local.config_path.with_name("model.yaml")
    local.config_path.rename(config)
    server = start_server_process(tmp_path, "--model", str(config), "--voices-dir", str(household))
    try:
        answers = poll_describes(server, until_ready=True)
        # The model is ready: the household voice speaks.
        response = run(one_shot(server.port, "Hello there.", voice="grandma", timeout=120))
    finally:
        code = server.stop()
    log = server.log()
    assert code == 0, log
    assert response.error is None, response.error
    assert len(answers) >= 2, log  # some while loading, one ready
    for info in answers:
        assert voices_of(info) == [("grandma", ["en"])], log[-3000:]
    assert "its language is not known" in log and "--language" in log


def test_catalog_model_that_cannot_download_lists_its_voices_and_fails_requests(tmp_path, household, monkeypatch):
    # No network and nothing cached: the download fails at once, without retries.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-hf-home"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    server = start_server_process(tmp_path, "--model", "english", "--voices-dir", str(household),
                                  "--voice", "grandma")  # fmt: skip
    try:
        # A request sent as soon as the port accepts, then describes until the process ends.
        answers: list[Info] = []
        started = None
        while server.proc.poll() is None and started is None:
            try:
                answers.append(run(describe(server.port, timeout=5.0))[0])
                started = time.monotonic()
            except OSError:
                time.sleep(0.01)
        assert started is not None, server.log()
        response = run(one_shot(server.port, "Hello there.", timeout=60))
        waited = time.monotonic() - started
        answers += poll_describes(server, until_ready=False, timeout=60)
        code = server.proc.wait(30)
    finally:
        server.stop()
    log = server.log()
    assert code == 1, log
    assert response.error is not None, log
    assert "model not available" in response.error and "could not download" in response.error
    assert "\n" not in response.error
    assert waited < 20, log  # well before the ~25 s of retries a network failure costs
    expected = [("grandma", ["en"])] + [(name, ["en"]) for name in catalog()["english"].voices]
    assert answers
    for info in answers:
        assert voices_of(info) == expected


def test_recording_added_to_the_folder_shows_at_the_next_describe(tmp_path, household):
    server = start_server_process(tmp_path, "--voices-dir", str(household))
    try:
        poll_describes(server, until_ready=True)
        write_voice_recording(household / "newcomer.wav", seed=3)
        names = [name for name, _ in voices_of(run(describe(server.port))[0])]
        assert names == ["demo", "grandma", "newcomer"]
        response = run(one_shot(server.port, "Hello there.", voice="newcomer", timeout=60))
        assert response.error is None, response.error

        (household / "grandma.wav").unlink()
        names = [name for name, _ in voices_of(run(describe(server.port))[0])]
        assert names == ["demo", "newcomer"]
        # A name no longer offered: the default voice, with a warning naming it.
        response = run(one_shot(server.port, "Hello there.", voice="grandma", timeout=60))
        assert response.error is None, response.error
    finally:
        code = server.stop()
    log = server.log()
    assert code == 0, log
    assert "added newcomer" in log and "removed grandma" in log
    assert "unknown voice 'grandma' requested; using the default voice demo" in log


def test_a_voice_that_cannot_be_made_gets_an_error_event(tmp_path):
    folder = tmp_path / "voices"
    write_voice_recording(folder / "good.wav", seed=0)
    server = start_server_process(tmp_path, "--voices-dir", str(folder))
    try:
        poll_describes(server, until_ready=True)
        # A recording whose header is fine but that holds no voice: the describe finds it,
        # its encoding (started at once, in the background) fails.
        soundfile.write(str(folder / "broken.wav"), np.zeros(48000, dtype=np.float32), 24000)
        run(describe(server.port))
        response = run(one_shot(server.port, "Hello there.", voice="broken", timeout=60))
        assert response.error is not None
        assert "voice unavailable" in response.error and "broken" in response.error
        assert "silent" in response.error
        # The server carries on.
        assert run(one_shot(server.port, "Hello there.", voice="good", timeout=60)).error is None
    finally:
        assert server.stop() == 0, server.log()
