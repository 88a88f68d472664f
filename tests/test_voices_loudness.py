"""Loudness normalisation of a voice prompt before it is encoded (issue 29)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile
import torch

from voices_attack_fixtures import RATE, voice_samples
from wyoming_pocket_tts.engine import TTSModel
from wyoming_pocket_tts.voices import VoiceLibrary, VoiceLibraryConfig, library
from wyoming_pocket_tts.voices.loudness import (
    MAX_GAIN_DB,
    PEAK_CEILING_DBFS,
    TARGET_LUFS,
    integrated_loudness,
    k_weighting,
    normalize_loudness,
)
from wyoming_pocket_tts.voices.recording import prepare_recording


# ITU-R BS.1770-4, table 1 and 2: the K-weighting filter's coefficients at 48 kHz.
STANDARD_48K = [([1.53512485958697, -2.69169618940638, 1.19839281085285], [1.0, -1.69065929318241, 0.73248077421585]),
                ([1.0, -2.0, 1.0], [1.0, -1.99004745483398, 0.99007225036621])]  # fmt: skip


def db(ratio: float) -> float:
    return 20 * np.log10(ratio)


def test_the_k_weighting_filter_is_the_standards() -> None:
    for (b, a), (b_std, a_std) in zip(k_weighting(48000), STANDARD_48K):
        assert np.allclose(b, b_std, atol=1e-9) and np.allclose(a, a_std, atol=1e-9)


@pytest.mark.parametrize("rate", [16000, 24000, 48000])
def test_the_measure_agrees_with_pyloudnorm_and_with_filtering_in_time(rate: int) -> None:
    pyloudnorm = pytest.importorskip("pyloudnorm", reason="the oracle is in the test extra")
    signal = pytest.importorskip("scipy.signal")
    rng = np.random.default_rng(0)
    for samples in (voice_samples(6.0, rate), np.concatenate([voice_samples(2.0, rate), np.zeros(rate * 5, np.float32)]),
                    (0.05 * rng.standard_normal(rate * 10)).astype(np.float32)):
        ours = integrated_loudness(samples, rate)
        # pyloudnorm builds its filter from rounded parameters: a constant offset per rate.
        assert ours == pytest.approx(pyloudnorm.Meter(rate).integrated_loudness(samples.astype(np.float64)), abs=0.15)
        # The same measure with the filter applied in time (scipy) as the standard writes it.
        weighted = samples.astype(np.float64)
        for b, a in k_weighting(rate):
            weighted = signal.lfilter(b, a, weighted)
        block, step = int(0.4 * rate), int(0.1 * rate)
        power = np.array([np.mean(weighted[i : i + block] ** 2) for i in range(0, samples.size - block + 1, step)])
        with np.errstate(divide="ignore"):
            loud = -0.691 + 10 * np.log10(power)
        gated = power[loud > -70]
        relative = -0.691 + 10 * np.log10(gated.mean()) - 10
        expected = -0.691 + 10 * np.log10(power[(loud > -70) & (loud > relative)].mean())
        assert ours == pytest.approx(expected, abs=0.01)


@pytest.mark.parametrize("gain", [0.05, 0.3, 2.5])
def test_a_voice_is_brought_to_the_target_whatever_its_level(gain: float) -> None:
    voice = voice_samples(6.0, gain=gain)
    assert abs(integrated_loudness(voice, RATE) - TARGET_LUFS) > 5
    normalised, change = normalize_loudness(voice, RATE)
    assert integrated_loudness(normalised, RATE) == pytest.approx(TARGET_LUFS, abs=0.1)
    assert normalised.dtype == np.float32 and normalised.shape == voice.shape
    assert change.gain_db == pytest.approx(TARGET_LUFS - change.measured_lufs)


def test_silence_and_pauses_are_not_amplified() -> None:
    # Digital silence and near-silence (below the absolute gate): left as they are.
    for quiet in (np.zeros(RATE * 3, np.float32), 1e-5 * np.random.default_rng(0).standard_normal(RATE * 3)):
        samples = quiet.astype(np.float32)
        normalised, change = normalize_loudness(samples, RATE)
        assert change.gain_db == 0.0 and np.array_equal(normalised, samples)
    # A voice followed by a long pause gets the gain of the voice alone (the gate).
    voice = voice_samples(4.0, gain=0.1)
    with_pause = np.concatenate([voice, np.zeros(RATE * 20, np.float32)])
    assert normalize_loudness(with_pause, RATE)[1].gain_db == pytest.approx(normalize_loudness(voice, RATE)[1].gain_db,
                                                                             abs=0.2)  # fmt: skip


def test_the_gain_is_bounded_and_never_clips() -> None:
    faint = voice_samples(4.0, gain=0.002)  # about -75 dB below the target... nearly noise
    _, change = normalize_loudness(faint, RATE)
    assert change.gain_db <= MAX_GAIN_DB
    clicky = voice_samples(4.0, gain=0.05)
    clicky[RATE] = 0.95  # one loud click
    normalised, change = normalize_loudness(clicky, RATE)
    assert db(np.abs(normalised).max()) == pytest.approx(PEAK_CEILING_DBFS, abs=0.01)
    assert integrated_loudness(normalised, RATE) < TARGET_LUFS  # the peak limited it


def test_the_same_voice_recorded_quietly_gives_the_same_voice_state(demo_model: TTSModel, tmp_path: Path) -> None:
    """What the encoder gets, and so the voice, no longer depends on the recording level."""
    normal, quiet = tmp_path / "normal.wav", tmp_path / "quiet.wav"
    soundfile.write(str(normal), voice_samples(4.0), RATE, subtype="FLOAT")
    soundfile.write(str(quiet), voice_samples(4.0, gain=0.05), RATE, subtype="FLOAT")

    def distance(a, b) -> float:
        return max(float((ka - kb).abs().max()) for (ka, _), (kb, _) in zip(a.layers, b.layers))

    raw = distance(demo_model.voice_from_recording(normal), demo_model.voice_from_recording(quiet))
    prepared = [prepare_recording(path, RATE) for path in (normal, quiet)]
    assert np.allclose(prepared[0].samples, prepared[1].samples, atol=1e-5)
    normalised = distance(*(demo_model.voice_from_audio(p.samples) for p in prepared))
    assert raw > 0.05 and normalised < raw / 100, (raw, normalised)
    # The encoded state is that of the normalised prompt, not of the raw recording.
    lib = VoiceLibrary(demo_model, VoiceLibraryConfig(data_dir=tmp_path / "data", voices_dir=tmp_path,
                                                      default_voice="demo"))  # fmt: skip
    state = lib.get("quiet")[1]
    expected = demo_model.voice_from_audio(prepared[1].samples)
    assert all(torch.equal(k, e) for (k, _), (e, _) in zip(state.layers, expected.layers))


def test_the_disk_cache_key_changes_with_the_normalisation(demo_model: TTSModel, tmp_path: Path, monkeypatch,
                                                           caplog) -> None:  # fmt: skip
    soundfile.write(str(tmp_path / "voice.wav"), voice_samples(2.0), RATE)
    config = VoiceLibraryConfig(data_dir=tmp_path / "data", voices_dir=tmp_path, default_voice="demo")
    VoiceLibrary(demo_model, config).get("voice")
    with caplog.at_level("INFO"):
        VoiceLibrary(demo_model, config).get("voice")
    assert "voice 'voice' loaded from the disk cache" in caplog.text
    monkeypatch.setattr(library, "PROMPT_VERSION", "prompt-1/another-normalisation")
    caplog.clear()
    with caplog.at_level("INFO"):
        VoiceLibrary(demo_model, config).get("voice")
    assert "voice 'voice' encoded from the recording (2.0 s read" in caplog.text
