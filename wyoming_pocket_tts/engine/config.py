"""The model description read from an upstream-format YAML config.

Field names follow the released YAML files so a config loads unchanged; unknown keys are
rejected, as upstream does, so a typo in a community config is caught at load time.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..core.errors import ModelLoadError
from .samplers import SAMPLERS
from .tokenizer import TOKENIZERS


@dataclass(frozen=True)
class SamplerConfig:
    dim: int
    depth: int
    type: str = "lsd"  # a kind of `samplers.SAMPLERS`


@dataclass(frozen=True)
class FlowTransformerConfig:
    d_model: int
    num_heads: int
    num_layers: int
    hidden_scale: int = 4
    max_period: float = 10000.0
    attn_dim: int | None = None
    num_kv_heads: int | None = None
    dim_feedforward: int | None = None

    @property
    def ffn_dim(self) -> int:
        return self.dim_feedforward or int(self.d_model * self.hidden_scale)


@dataclass(frozen=True)
class LookupTableConfig:
    dim: int
    n_bins: int
    tokenizer: str
    tokenizer_path: str
    rank: int | None = None


@dataclass(frozen=True)
class FlowLMConfig:
    dtype: str
    flow: SamplerConfig
    transformer: FlowTransformerConfig
    lookup_table: LookupTableConfig
    z_dim: int | None = None
    weights_path: str | None = None
    insert_bos_before_voice: bool = False


@dataclass(frozen=True)
class SEANetConfig:
    dimension: int
    channels: int
    n_filters: int
    n_residual_layers: int
    ratios: tuple[int, ...]
    kernel_size: int
    residual_kernel_size: int
    last_kernel_size: int
    dilation_base: int
    pad_mode: str
    compress: int


@dataclass(frozen=True)
class MimiTransformerConfig:
    d_model: int
    input_dimension: int
    output_dimensions: tuple[int, ...]
    num_heads: int
    num_layers: int
    layer_scale: float
    context: int
    dim_feedforward: int
    max_period: float = 10000.0


@dataclass(frozen=True)
class QuantizerConfig:
    dimension: int
    output_dimension: int


@dataclass(frozen=True)
class MimiConfig:
    dtype: str
    sample_rate: int
    channels: int
    frame_rate: float
    seanet: SEANetConfig
    transformer: MimiTransformerConfig
    quantizer: QuantizerConfig
    weights_path: str | None = None
    inner_dim: int | None = None
    outer_dim: int | None = None
    decoder_seanet: SEANetConfig | None = None
    decoder_transformer: MimiTransformerConfig | None = None


@dataclass(frozen=True)
class ModelConfig:
    flow_lm: FlowLMConfig
    mimi: MimiConfig
    weights_path: str | None = None
    weights_path_without_voice_cloning: str | None = None
    pad_with_spaces_for_short_inputs: bool = False
    remove_semicolons: bool = False
    append_terminal_punctuation: bool = True
    capitalize_first_letter: bool = True
    replace_characters: dict[str, str] = field(default_factory=dict)
    model_recommended_frames_after_eos: int | None = None
    default_temperature: float = 0.3
    default_eos_threshold: float = -4.0


def _build(cls: type, data: Any, where: str) -> Any:
    """Build the dataclass `cls` from a YAML mapping, nested dataclasses included."""
    if not isinstance(data, dict):
        raise ModelLoadError(f"config section {where!r} should be a mapping, got {data!r}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ModelLoadError(f"unknown key(s) {unknown} in config section {where!r}")
    kwargs: dict[str, Any] = {}
    for name, value in data.items():
        annotation = str(fields[name].type)
        nested = _NESTED.get(annotation.replace(" | None", ""))
        if nested is not None and value is not None:
            value = _build(nested, value, f"{where}.{name}" if where else name)
        elif isinstance(value, list):
            value = tuple(value)
        kwargs[name] = value
    try:
        return cls(**kwargs)
    except TypeError as err:
        raise ModelLoadError(f"config section {where or 'root'!r} is incomplete: {err}") from None


_NESTED: dict[str, type] = {
    "SamplerConfig": SamplerConfig,
    "FlowTransformerConfig": FlowTransformerConfig,
    "LookupTableConfig": LookupTableConfig,
    "FlowLMConfig": FlowLMConfig,
    "SEANetConfig": SEANetConfig,
    "MimiTransformerConfig": MimiTransformerConfig,
    "QuantizerConfig": QuantizerConfig,
    "MimiConfig": MimiConfig,
}


def parse_config(data: dict[str, Any]) -> ModelConfig:
    config: ModelConfig = _build(ModelConfig, data, "")
    if config.flow_lm.flow.type not in SAMPLERS:
        raise ModelLoadError(f"unknown sampler type {config.flow_lm.flow.type!r} in flow_lm.flow.type "
                             f"(known: {', '.join(SAMPLERS)})")
    if config.flow_lm.lookup_table.tokenizer not in TOKENIZERS:
        raise ModelLoadError(f"unknown tokenizer kind {config.flow_lm.lookup_table.tokenizer!r} "
                             f"(known: {', '.join(TOKENIZERS)})")
    return config


def read_config_file(path: Path) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as file:
            data = yaml.safe_load(file)
    except FileNotFoundError:
        raise ModelLoadError(f"model config not found: {path}") from None
    except yaml.YAMLError as err:
        raise ModelLoadError(f"model config {path} is not valid YAML: {err}") from None
    if not isinstance(data, dict):
        raise ModelLoadError(f"model config {path} should be a YAML mapping")
    return data
