"""Builders of offline stand-ins: random-weight models of released architectures, their
tokenizers, and voice recordings, all made locally in seconds."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile
import torch
import yaml
from safetensors.torch import save_file

from wyoming_pocket_tts.engine import TTSModel
from wyoming_pocket_tts.engine.catalog import catalog
from wyoming_pocket_tts.engine.config import parse_config
from tokenizer_fixtures import make_sentencepiece_model
from wyoming_pocket_tts.engine.demo import demo_voice_audio, make_tokenizer_json
from wyoming_pocket_tts.engine.network import PocketNetwork, random_weights

SENTENCEPIECE_VOCAB = 256
FEEDBACK_DAMPING = 0.2


@dataclass(frozen=True)
class LocalModel:
    """A released architecture with random weights, as files upstream and we both read."""

    config_path: Path
    weights_path: Path


def local_architecture(name: str, folder: Path, overrides: dict[str, Any] | None = None, seed: int = 0,
                       feedback_damping: float = FEEDBACK_DAMPING) -> LocalModel:  # fmt: skip
    """Catalog config `name`, with local tokenizer and random weights; `overrides` shrink it
    (nested keys like {"flow_lm": {"transformer": {"d_model": 256}}})."""
    raw = copy.deepcopy(catalog()[name].config)
    raw.pop("weights_path", None)
    raw.pop("weights_path_without_voice_cloning", None)
    _merge(raw, overrides or {})
    lookup = raw["flow_lm"]["lookup_table"]
    folder.mkdir(parents=True, exist_ok=True)
    if lookup["tokenizer"] == "sentencepiece":
        lookup["tokenizer_path"] = str(make_sentencepiece_model(folder / "tokenizer.model", SENTENCEPIECE_VOCAB))
        lookup["n_bins"] = SENTENCEPIECE_VOCAB
    else:
        lookup["tokenizer_path"] = str(make_tokenizer_json(folder / "tokenizer.json", lookup["n_bins"]))
    network = PocketNetwork(parse_config(raw))
    random_weights(network, seed)
    # Random weights make the latent feedback loop chaotic (a 1e-6 rounding difference
    # doubles every two frames with the drifting head); trained models are not. Damping
    # the feedback keeps a 25-frame comparison about the code, not about the chaos.
    with torch.no_grad():
        network.flow_lm.input_linear.weight.mul_(feedback_damping)
    weights_path = folder / "model.safetensors"
    save_file({k: v.contiguous() for k, v in network.state_dict().items()}, str(weights_path))
    raw["weights_path"] = str(weights_path)
    config_path = folder / f"{name}.yaml"
    config_path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    return LocalModel(config_path, weights_path)


def _merge(target: dict[str, Any], changes: dict[str, Any]) -> None:
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = value


def write_voice_recording(path: Path, seconds: float = 3.0, rate: int = 24000, channels: int = 1,
                          seed: int = 0) -> Path:
    """The demo model's speech-like signal (see `demo_voice_audio`), plus a little noise."""
    rng = np.random.default_rng(seed)
    signal = demo_voice_audio(rate, seconds)[0].numpy().astype(np.float64)
    signal = signal + 0.01 * rng.standard_normal(signal.size)
    signal = np.repeat(signal[:, None], channels, axis=1)
    path.parent.mkdir(parents=True, exist_ok=True)
    soundfile.write(str(path), signal.astype(np.float32), rate, subtype="PCM_16")
    return path


def observe_steps_and_decodes(model: TTSModel, monkeypatch: pytest.MonkeyPatch,
                               observe: Callable[[str], Any]) -> list[Any]:
    """Patch the model's FlowLM steps (a reply's first, and the batched ones) and its Mimi
    decode so that each call first appends `observe("step")` or `observe("decode")`, made
    in the calling thread, to the list returned."""
    seen: list[Any] = []
    flow_lm, mimi = model.network.flow_lm, model.network.mimi

    def spying(kind: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def spy(*args: Any, **kwargs: Any) -> Any:
            seen.append(observe(kind))
            return method(*args, **kwargs)
        return spy

    monkeypatch.setattr(flow_lm, "step", spying("step", flow_lm.step))
    monkeypatch.setattr(flow_lm, "step_rows", spying("step", flow_lm.step_rows))
    monkeypatch.setattr(mimi, "decode", spying("decode", mimi.decode))
    return seen
