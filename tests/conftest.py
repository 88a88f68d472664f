"""Shared fixtures: offline models and recordings (see engine_fixtures.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine_fixtures import write_voice_recording
from wyoming_pocket_tts.engine import TTSModel, build_demo_model


@pytest.fixture(scope="session")
def demo_model() -> TTSModel:
    return build_demo_model()


@pytest.fixture(scope="session")
def voice_recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_voice_recording(tmp_path_factory.mktemp("voices") / "speaker.wav")
