"""Reading recordings bounded and only from regular files (engine.recording, core.files)."""

from __future__ import annotations

import os
import stat
import threading
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import soundfile
import soxr

from voices_attack_fixtures import RATE, absurd_wav, long_flac, lying_wav, sparse_wav, special_files, voice_samples
from wyoming_pocket_tts.core import VoiceError
from wyoming_pocket_tts.core import files
from wyoming_pocket_tts.core.files import FileTooLargeError, NotRegularFileError, open_regular, read_regular
from wyoming_pocket_tts.engine.recording import MAX_PROMPT_SECONDS, read_prompt, recording_info


def in_thread(work, timeout: float = 5.0):
    """Run `work` in a thread; fail (instead of hanging the suite) if it blocks."""
    outcome: dict = {}

    def target() -> None:
        try:
            outcome["value"] = work()
        except BaseException as err:  # noqa: BLE001
            outcome["error"] = err

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), "blocked"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


@pytest.mark.parametrize("kind", ["fifo", "device", "socket"])
def test_special_files_are_refused_without_blocking(tmp_path: Path, kind: str) -> None:
    path = special_files(tmp_path)[kind]
    with pytest.raises(VoiceError, match="not a regular file"):
        in_thread(lambda: recording_info(path))
    with pytest.raises(VoiceError, match="not a regular file"):
        in_thread(lambda: read_prompt(path, RATE))


def test_a_fifo_swapped_in_after_the_stat_is_refused_by_fstat_without_blocking(tmp_path, monkeypatch) -> None:
    fifo = tmp_path / "pipe.wav"
    os.mkfifo(fifo)
    regular = os.stat(__file__)
    real_stat = os.stat
    # The stat sees a regular file: the FIFO takes its place just after (the race).
    monkeypatch.setattr(files.os, "stat", lambda path, *a, **k: regular if Path(path) == fifo else real_stat(path))
    with pytest.raises(NotRegularFileError, match="FIFO"):
        in_thread(lambda: open_regular(fifo))


def test_a_symlink_to_a_recording_is_read(tmp_path: Path) -> None:
    target = tmp_path / "real.wav"
    soundfile.write(str(target), voice_samples(1.0), RATE)
    os.symlink(target, tmp_path / "link.wav")
    assert read_prompt(tmp_path / "link.wav", RATE).size == RATE


def test_read_regular_bounds_the_size(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_bytes(b"x" * 2000)
    assert read_regular(path, 2000) == b"x" * 2000
    with pytest.raises(FileTooLargeError, match="2000 bytes"):
        read_regular(path, 1999)


def test_a_sparse_six_hour_wav_is_read_as_30_s_in_bounded_memory(tmp_path: Path) -> None:
    path = sparse_wav(tmp_path / "sparse.wav")
    assert recording_info(path).seconds > 6 * 3600
    tracemalloc.start()
    try:
        prompt = read_prompt(path, RATE)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert prompt.size == MAX_PROMPT_SECONDS * RATE
    # 30 s of output (2.9 MB) plus a block or two: the old reader held 6 hours (2 GB).
    assert peak < 16 * 1024 * 1024


def test_a_long_flac_is_read_as_30_s_resampled_as_it_is_read(tmp_path: Path) -> None:
    path = long_flac(tmp_path / "hour.flac", hours=0.2, rate=16000)
    prompt = read_prompt(path, RATE)
    assert prompt.size == MAX_PROMPT_SECONDS * RATE
    # Streaming resampling gives what resampling the kept 30 s at once gives.
    kept, _ = soundfile.read(str(path), frames=int(MAX_PROMPT_SECONDS * 16000), dtype="float32")
    assert np.array_equal(prompt, soxr.resample(kept, 16000, RATE).astype(np.float32))


def test_a_header_claiming_more_than_the_file_holds_reads_what_is_there(tmp_path: Path) -> None:
    path = lying_wav(tmp_path / "liar.wav", voice_seconds=4.0)
    assert read_prompt(path, RATE).size == 4 * RATE


@pytest.mark.parametrize(("header", "message"), [
    ({"channels": 1000}, "1000 channels; at most 32"),
    ({"rate": 2_000_000_000}, "sample rate is 2000000000 Hz"),
    ({"rate": 1000}, "sample rate is 1000 Hz"),
])  # fmt: skip
def test_absurd_headers_are_refused_clearly(tmp_path: Path, header: dict, message: str) -> None:
    path = absurd_wav(tmp_path / "absurd.wav", **header)
    with pytest.raises(VoiceError, match=message):
        recording_info(path)
    with pytest.raises(VoiceError, match=message):
        read_prompt(path, RATE)


def test_stereo_is_averaged_and_samples_that_are_not_numbers_are_refused(tmp_path: Path) -> None:
    left, right = voice_samples(1.0), voice_samples(1.0, gain=0.5)
    soundfile.write(str(tmp_path / "stereo.wav"), np.stack([left, right], axis=1), RATE, subtype="FLOAT")
    assert np.allclose(read_prompt(tmp_path / "stereo.wav", RATE), (left + right) / 2)
    broken = left.copy()
    broken[100] = np.nan
    soundfile.write(str(tmp_path / "nan.wav"), broken, RATE, subtype="FLOAT")
    with pytest.raises(VoiceError, match="not numbers"):
        read_prompt(tmp_path / "nan.wav", RATE)


def test_messages_name_the_file_on_one_line(tmp_path: Path) -> None:
    path = tmp_path / "evil\n\x1b[31m.wav"
    soundfile.write(str(path), voice_samples(0.2), RATE)
    with pytest.raises(VoiceError) as failure:
        recording_info(path)
    assert "\n" not in str(failure.value) and "\x1b" not in str(failure.value)
    assert "evil\\n\\x1b[31m.wav lasts 0.20 s" in str(failure.value)


def test_a_directory_named_as_a_recording_is_refused(tmp_path: Path) -> None:
    (tmp_path / "folder.wav").mkdir()
    with pytest.raises(VoiceError, match="is a folder, not a regular file"):
        recording_info(tmp_path / "folder.wav")
    assert stat.S_ISDIR(os.stat(tmp_path / "folder.wav").st_mode)
