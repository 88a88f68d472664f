"""Turning a model name, config file or hub path into a ready `TTSModel`."""

from __future__ import annotations

import hashlib
import json
import logging
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from .catalog import catalog, language_of
from .config import ModelConfig, parse_config, read_config_file
from .demo import DEMO_LANGUAGES, DEMO_NAME, DEMO_VOICE, demo_config, demo_voice_audio, make_tokenizer_json
from ..core.errors import HubUnavailableError, ModelLoadError
from ..core.model_names import names_config_file
from .hub import HubAccess, is_hub_path, resolve
from .model import ModelInfo, TTSModel
from .network import PocketNetwork, load_weights, random_weights
from .quantize import QuantizedEngine, machine_engine, quantize_network
from .tokenizer import load_tokenizer

logger = logging.getLogger(__name__)

DEMO_VOCAB = 512


def load_model(
    name_or_path: str = "english",
    *,
    hf_token: str | None = None,
    quantize: bool = False,
    threads: int | None = None,
    cache_dir: Path | None = None,
) -> TTSModel:
    """Load a catalog model, the built-in demo model, or an upstream-format YAML config.

    Weights come from `weights_path` (the gated cloning release) when the token grants
    access, otherwise from `weights_path_without_voice_cloning`.
    """
    if threads is not None:
        torch.set_num_threads(threads)
    hub = HubAccess(token=hf_token, cache_dir=cache_dir)
    started = time.monotonic()
    if name_or_path == DEMO_NAME:
        model = build_demo_model()
    else:
        entry = catalog().get(name_or_path)
        if entry is not None:
            raw, base_dir, name = entry.config, None, entry.name
            voices = {voice: entry.voice_state_path(voice) for voice in entry.voices}
            languages: tuple[str, ...] = (entry.language,)
        else:
            raw, base_dir, name = _read_custom_config(name_or_path, hub), None, name_or_path
            if not is_hub_path(name_or_path):
                base_dir = Path(name_or_path).expanduser().resolve().parent
            voices = {}
            language = language_of(name_or_path)
            languages = (language,) if language else ()
        model = build_model(raw, name=name, hub=hub, base_dir=base_dir, voices=voices, languages=languages)
    if quantize:
        quantize_model(model)
    logger.info("model %s ready in %.1f s (id %s)", model.name, time.monotonic() - started, model.model_id)
    return model


def quantize_model(model: TTSModel, engine: QuantizedEngine | None = None) -> None:
    """Run the model's main layers in int8 from now on (see `quantize`), with `engine`'s
    kernels (None: the machine's); before any request."""
    engine = engine or machine_engine()
    count = quantize_network(model.network, engine)
    model.precision = f"int8/{engine.name}"
    logger.info("int8: quantized %d linears", count)


def _read_custom_config(name_or_path: str, hub: HubAccess) -> dict[str, Any]:
    if not names_config_file(name_or_path):
        known = ", ".join(sorted(catalog()))
        raise ModelLoadError(f"unknown model {name_or_path!r}; known models: {known}, {DEMO_NAME}, or a path to a YAML config")
    return read_config_file(resolve(name_or_path, hub))


def build_model(
    raw: dict[str, Any],
    *,
    name: str,
    hub: HubAccess = HubAccess(),
    base_dir: Path | None = None,
    voices: dict[str, str] | None = None,
    languages: tuple[str, ...] = (),
    random_seed: int | None = None,
    model_id: str | None = None,
) -> TTSModel:
    """Build from a parsed config. With `random_seed`, weights are random and not loaded."""
    config = parse_config(raw)
    lookup = config.flow_lm.lookup_table
    tokenizer = load_tokenizer(resolve(lookup.tokenizer_path, hub, base_dir), lookup.tokenizer, lookup.n_bins)
    if random_seed is not None:
        network = PocketNetwork(config)
        random_weights(network, random_seed)
        weights_id, can_clone, encoder_file = f"random-{random_seed}", True, None
    else:
        # Built without memory (meta device); the loaded tensors become the parameters, so
        # the weights are held once, not initialised and then overwritten.
        with torch.device("meta"):
            network = PocketNetwork(config)
        weights_id, encoder_file = _load_released_weights(network, config, hub, base_dir)
        can_clone = encoder_file is not None
    model_id = model_id or _model_id(name, raw, weights_id)
    info = ModelInfo(name, model_id, languages, tuple(voices or {}), can_clone)
    return TTSModel(network, tokenizer, config, info, dict(voices or {}), hub, encoder_file)


def _load_released_weights(network: PocketNetwork, config: ModelConfig, hub: HubAccess,
                           base_dir: Path | None) -> tuple[str, Path | None]:
    """Load the first weights file available; returns its config path and, when it can
    clone voices, the local file that `load_encoder` reads the encoder from later."""
    candidates = [p for p in (config.weights_path, config.weights_path_without_voice_cloning) if p]
    if not candidates:
        raise ModelLoadError("the model config names no weights (weights_path)")
    failures = []
    unreachable = False
    for path in candidates:
        try:
            local = resolve(path, hub, base_dir)
        except ModelLoadError as err:
            failures.append(str(err))
            unreachable |= isinstance(err, HubUnavailableError)
            logger.info("weights %s unavailable: %s", path, err)
            continue
        logger.info("loading weights %s", local)
        if not load_weights(network, local):
            logger.warning("these weights cannot clone voices; predefined voices and exported states still work")
            return str(path), None
        return str(path), local
    # One weights file the hub could not deliver for want of a connection: a later attempt may load it.
    raise (HubUnavailableError if unreachable else ModelLoadError)("; ".join(failures))


def _model_id(name: str, raw: dict[str, Any], weights_id: str) -> str:
    """Stable identity of (architecture, weights): voice states are only valid for it."""
    shape = {key: raw[key] for key in ("flow_lm", "mimi") if key in raw}
    digest = hashlib.sha256(json.dumps([shape, weights_id], sort_keys=True, default=str).encode()).hexdigest()
    return f"{Path(name).stem}-{digest[:12]}"


def build_demo_model(seed: int = 0) -> TTSModel:
    """A tiny random-weight model made locally in well under a second."""
    logger.warning("demo model: random weights, it produces noise, not speech")
    tokenizer_dir = Path(tempfile.mkdtemp(prefix="pocket-tts-demo-"))
    tokenizer = make_tokenizer_json(tokenizer_dir / "tokenizer.json", DEMO_VOCAB)
    raw = demo_config(str(tokenizer), DEMO_VOCAB)
    # The temporary tokenizer path must not change the model's identity between runs.
    identity = _model_id(DEMO_NAME, demo_config("demo-tokenizer", DEMO_VOCAB), f"random-{seed}")
    # One built-in voice, so that `--model demo` runs with no files at all.
    state_path = tokenizer_dir / f"{DEMO_VOICE}.safetensors"
    model = build_model(raw, name=DEMO_NAME, random_seed=seed, languages=DEMO_LANGUAGES, model_id=identity,
                        voices={DEMO_VOICE: str(state_path)})
    model.save_voice(model.voice_from_audio(demo_voice_audio(model.sample_rate)), state_path)
    return model
