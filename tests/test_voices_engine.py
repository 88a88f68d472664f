"""VoiceLibrary on the real engine's demo model (random weights, tiny, local)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import torch

from engine_fixtures import write_voice_recording
from wyoming_pocket_tts.engine import TTSModel, VoiceError, VoiceState, build_demo_model, load_model
from wyoming_pocket_tts.voices import VoiceLibrary, VoiceLibraryConfig


@pytest.fixture(scope="module")
def demo() -> TTSModel:
    return load_model("demo")


class Counting:
    """Counts the engine's encodings of recordings on one model instance."""

    def __init__(self, model: TTSModel, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        original = model.voice_from_recording

        def counted(path: Path) -> VoiceState:
            self.count += 1
            return original(path)

        monkeypatch.setattr(model, "voice_from_recording", counted)


def same_state(a: VoiceState, b: VoiceState) -> bool:
    return a.model_id == b.model_id and all(
        torch.equal(ka, kb) and torch.equal(va, vb) for (ka, va), (kb, vb) in zip(a.layers, b.layers)
    )


def test_demo_model_end_to_end(demo: TTSModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_voice_recording(tmp_path / "voices" / "tone.wav")
    config = VoiceLibraryConfig(data_dir=tmp_path / "data", voices_dir=tmp_path / "voices", default_voice="tone")
    counter = Counting(demo, monkeypatch)

    lib = VoiceLibrary(demo, config)
    assert [v.name for v in lib.voices] == ["tone", "demo"]  # the default, then the built-in one
    lib.start_preencoding()
    assert lib.wait_preencoding(60)
    name, state = lib.get(None)
    assert name == "tone" and counter.count == 1
    assert state.model_id == demo.model_id and state.prompt_length > 0
    assert state.nbytes == lib.cached_bytes()
    assert lib.get("tone")[1] is state

    frames = demo.synthesize("Hello there.", state)
    first = next(frames)
    frames.close()
    assert first.shape == (demo.frame_size,) and first.dtype == np.float32

    # a restart: loaded from the disk cache, identical, no encoding
    lib2 = VoiceLibrary(demo, config)
    _, loaded = lib2.get("tone")
    assert counter.count == 1
    assert same_state(loaded, state)


def test_demo_model_state_file_and_foreign_state(
    demo: TTSModel, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    voices = tmp_path / "voices"
    state = demo.voice_from_recording(write_voice_recording(tmp_path / "src.wav", seconds=1.0))
    demo.save_voice(state, voices / "exported.safetensors")
    other = build_demo_model(seed=1)
    assert other.model_id != demo.model_id
    other.save_voice(other.voice_from_recording(tmp_path / "src.wav"), voices / "foreign.safetensors")

    lib = VoiceLibrary(demo, VoiceLibraryConfig(data_dir=tmp_path / "data", voices_dir=voices,
                                                default_voice="exported"))
    assert same_state(lib.get("exported")[1], state)
    # A voice chosen by name that cannot be used is an error for the client, not another voice.
    with caplog.at_level(logging.WARNING), pytest.raises(VoiceError, match="made for model"):
        lib.get("foreign")
    assert "foreign.safetensors" in caplog.text and "made for model" in caplog.text
