"""Listing the voices stays cheap and bounded: thousands of files, special files, a huge or
special voices file, concurrent re-reads, names with control characters."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

import pytest

from voices_attack_fixtures import many_files, special_files
from wyoming_pocket_tts.core.logsafe import clip, escape
from wyoming_pocket_tts.voices import VoiceLibraryConfig, catalog, config
from wyoming_pocket_tts.voices.catalog import VoicePreview, build_catalog, sources_signature
from wyoming_pocket_tts.voices.config import (
    MAX_DECLARED_VOICES,
    MAX_VOICES_FILE_BYTES,
    VoiceConfigError,
    parse_voices_file,
)

PREDEFINED = ("alba", "marius")


def config_for(tmp_path: Path, **kwargs) -> VoiceLibraryConfig:
    kwargs.setdefault("voices_dir", tmp_path / "voices")
    return VoiceLibraryConfig(data_dir=tmp_path / "data", **kwargs)


def test_only_the_first_voices_by_name_are_offered_and_checked(tmp_path: Path, caplog, monkeypatch) -> None:
    many_files(tmp_path / "voices", 1000)
    opened: list[Path] = []
    real_info = catalog.recording_info
    monkeypatch.setattr(catalog, "recording_info", lambda path: opened.append(path) or real_info(path))
    with caplog.at_level(logging.WARNING):
        built = build_catalog(config_for(tmp_path), PREDEFINED, "m")
    declared = [spec.name for spec in built.voices if spec.kind == "recording"]
    assert declared == [f"voice{index:05d}" for index in range(MAX_DECLARED_VOICES)]
    assert len(opened) == MAX_DECLARED_VOICES  # the others are never opened
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "1000 voices declared" in warning and f"{1000 - MAX_DECLARED_VOICES} are left out" in warning


def test_the_signature_stats_only_the_files_that_can_be_offered(tmp_path: Path, monkeypatch) -> None:
    folder = many_files(tmp_path / "voices", 1000)
    stats: list[str] = []
    real_stat = os.stat
    monkeypatch.setattr(catalog.os, "stat", lambda path, *a, **k: stats.append(path) or real_stat(path, *a, **k))
    first = sources_signature(config_for(tmp_path))
    assert len(stats) <= MAX_DECLARED_VOICES + 3
    assert sources_signature(config_for(tmp_path)) == first
    (folder / "voice00999.wav").unlink()  # beyond the offered ones, but the names changed
    assert sources_signature(config_for(tmp_path)) != first


def test_special_files_in_the_folder_are_skipped_with_an_error(tmp_path: Path, caplog) -> None:
    many_files(tmp_path / "voices", 1)
    made = special_files(tmp_path / "voices")
    with caplog.at_level(logging.ERROR):
        built = build_catalog(config_for(tmp_path, include_predefined=False), PREDEFINED, "m")
    assert [spec.name for spec in built.voices] == ["voice00000"]
    for path in made.values():
        assert f"{path} is a" in caplog.text


def test_a_voices_file_that_is_special_or_huge_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "voices.yaml"
    os.mkfifo(fifo)
    with pytest.raises(VoiceConfigError, match="FIFO"):
        parse_voices_file(fifo)
    huge = tmp_path / "huge.yaml"
    huge.write_text("voices:\n" + "  - alba\n" * (MAX_VOICES_FILE_BYTES // 8))
    with pytest.raises(VoiceConfigError, match=f"at most {MAX_VOICES_FILE_BYTES}"):
        parse_voices_file(huge)


def test_a_voices_file_with_too_many_entries_is_read_up_to_the_bound(tmp_path: Path, caplog) -> None:
    path = tmp_path / "voices.yaml"
    path.write_text("voices:\n" + "".join(f"  - name: v{n}\n" for n in range(MAX_DECLARED_VOICES + 50)))
    with caplog.at_level(logging.WARNING):
        parsed = parse_voices_file(path)
    assert len(parsed.voices) == MAX_DECLARED_VOICES
    assert f"declares {MAX_DECLARED_VOICES + 50} voices; only the first {MAX_DECLARED_VOICES}" in caplog.text


def test_a_fifo_named_as_a_voice_state_is_skipped(tmp_path: Path, caplog) -> None:
    (tmp_path / "voices").mkdir()
    os.mkfifo(tmp_path / "voices" / "state.safetensors")
    with caplog.at_level(logging.ERROR):
        built = build_catalog(config_for(tmp_path), PREDEFINED, "m")
    assert "state" not in [spec.name for spec in built.voices]
    assert "state.safetensors is a FIFO (named pipe), not a regular file" in caplog.text


def hold(monkeypatch, module, name: str) -> tuple[threading.Event, threading.Event]:
    """Make `module.name` wait until released: (entered, release)."""
    entered, release = threading.Event(), threading.Event()
    real = getattr(module, name)

    def held(*args):
        entered.set()
        assert release.wait(10)
        return real(*args)

    monkeypatch.setattr(module, name, held)
    return entered, release


def test_concurrent_previews_take_the_last_list_instead_of_queueing(tmp_path: Path, monkeypatch) -> None:
    many_files(tmp_path / "voices", 2)
    preview = VoicePreview(config_for(tmp_path), "m", PREDEFINED, ("en",))
    first = preview.voices()
    entered, release = hold(monkeypatch, catalog, "preview_voices")
    (tmp_path / "voices" / "voice00000.wav").unlink()
    rereading = threading.Thread(target=preview.voices)
    rereading.start()
    assert entered.wait(10)
    assert preview.voices() == first  # at once: the last list, while the re-read runs
    release.set()
    rereading.join(10)
    assert [v.name for v in preview.voices()] == ["alba", "voice00001", "marius"]


def test_the_library_refreshes_once_at_a_time(tmp_path: Path, monkeypatch) -> None:
    from test_voices_library import FakeModel

    from wyoming_pocket_tts.voices import VoiceLibrary, library

    many_files(tmp_path / "voices", 2)
    lib = VoiceLibrary(FakeModel(), config_for(tmp_path))
    entered, release = hold(monkeypatch, library, "build_catalog")
    (tmp_path / "voices" / "voice00000.wav").unlink()
    outcome: list[bool] = []
    rereading = threading.Thread(target=lambda: outcome.append(lib.refresh()))
    rereading.start()
    assert entered.wait(10)
    assert lib.refresh() is False and "voice00000" in [v.name for v in lib.voices]  # not queued
    release.set()
    rereading.join(10)
    assert outcome == [True] and "voice00000" not in [v.name for v in lib.voices]
    # A writer that must see its own change waits for the re-read in progress.
    entered.clear()
    release.clear()
    (tmp_path / "voices" / "voice00001.wav").unlink()
    rereading = threading.Thread(target=lambda: outcome.append(lib.refresh()))
    rereading.start()
    assert entered.wait(10)
    threading.Timer(0.2, release.set).start()
    outcome.append(lib.refresh(wait=True))  # waits, then finds nothing more changed
    rereading.join(10)
    assert outcome[0] is True and sorted(outcome[1:]) == [False, True]
    assert "voice00001" not in [v.name for v in lib.voices]
    lib.close()


def test_escape_covers_what_terminals_and_log_viewers_act_on() -> None:
    text = "a\nb\r\t\x1b[31m\x9b2J\u2028\u202edone"
    shown = escape(text)
    assert shown == "a\\nb\\r\\t\\x1b[31m\\x9b2J\\u2028\\u202edone"
    assert escape("grandma é 日本") == "grandma é 日本"  # letters stay as they are
    assert clip("\x1b" * 200, limit=10).startswith("\\x1b" * 10)


def test_names_from_files_are_escaped_in_the_catalogs_messages(tmp_path: Path, caplog) -> None:
    folder = tmp_path / "voices"
    many_files(folder, 1)
    (folder / "dup\n\x1b[2J.wav").write_bytes((folder / "voice00000.wav").read_bytes())
    path = tmp_path / "voices.yaml"
    path.write_text("voices:\n  - name: \"dup\\n\\e[2J\"\n    audio: voices/voice00000.wav\n")
    with caplog.at_level(logging.ERROR):
        build_catalog(config_for(tmp_path, voices_file=path), PREDEFINED, "m")
    assert "duplicate voice name" in caplog.text
    assert "\x1b" not in caplog.text and "dup\\n\\x1b[2J.wav" in caplog.text
    assert config.escape is escape
