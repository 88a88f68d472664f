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
        original = model.voice_from_audio

        def counted(audio: np.ndarray) -> VoiceState:
            self.count += 1
            return original(audio)

        monkeypatch.setattr(model, "voice_from_audio", counted)


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


def test_the_servers_models_share_one_voice_memory(tmp_path: Path) -> None:
    """The server's loader gives every model's library the same voice memory: with
    --voice-cache-size 2 the server holds two voices, whichever models they belong to."""
    from engine_fixtures import local_architecture
    from wyoming_pocket_tts.__main__ import build_parser, config_from_args
    from wyoming_pocket_tts.server.app import load_backend
    from wyoming_pocket_tts.voices.memory import SharedVoiceCache

    custom = local_architecture("english_7m_2026-10", tmp_path / "model")
    for name in ("mum", "dad"):
        write_voice_recording(tmp_path / "voices" / f"{name}.wav", seed=len(name))
    voices_file = tmp_path / "voices.yaml"
    voices_file.write_text(f"voices:\n  - {{name: oma, audio: voices/mum.wav, model: {custom.config_path}}}\n")
    args = build_parser().parse_args(["--model", "demo", "--model", str(custom.config_path), "--language", "de",
                                      "--data-dir", str(tmp_path / "data"), "--voices-dir", str(tmp_path / "voices"),
                                      "--voices", str(voices_file), "--voice-cache-size", "2", "--voice", "mum"])  # fmt: skip
    config = config_from_args(args)
    memory = SharedVoiceCache(config.library.cache_size, config.library.cache_mb)
    english = load_backend(config, ("en",), 0, memory)
    german = load_backend(config, ("de",), 1, memory)
    try:
        english.voices.wait_preencoding(60)
        german.voices.wait_preencoding(60)
        # Each model's default voice (pre-encoded, pinned) fills the server's two places.
        assert set(memory.keys()) == {(config.model, "mum"), (config.more_models[0], "oma")}
        name, _ = english.voices.get("dad")
        assert name == "dad" and len(memory.keys()) == 2  # served, but not kept: the bound holds
        german.voices.close()  # the custom model is unloaded: its voices leave memory
        assert memory.keys() == [(config.model, "mum")]
        english.voices.get("dad")
        assert memory.keys() == [(config.model, "mum"), (config.model, "dad")]
    finally:
        german.voices.close()
        english.voices.close()
    assert memory.keys() == []
