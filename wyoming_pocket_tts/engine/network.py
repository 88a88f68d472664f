"""The whole Pocket TTS network (FlowLM + Mimi), laid out like the released weights."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch
from torch import nn

from .config import ModelConfig
from ..core.errors import ModelLoadError
from .flow_lm import FlowLM
from .mimi import Mimi
from .safetensors_reader import read_safetensors, safetensors_shapes

# Weights only the voice-cloning release carries: without them a voice cannot be encoded.
CLONING_PREFIXES = ("mimi.encoder.", "mimi.encoder_transformer.", "mimi.downsample.", "flow_lm.speaker_proj_weight")
# Weights only the voice encoder reads (~40 MB): loaded when a voice is first encoded, so a
# server speaking with saved voices never holds them.
ENCODER_PREFIXES = CLONING_PREFIXES[:3]
# Read through a memory map of the file: a request looks up a few dozen rows of the text
# table (16 MB for English), so only their pages are ever resident.
MAPPED_KEYS = frozenset({"flow_lm.conditioner.embed.weight"})


class PocketNetwork(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        mimi_cfg = config.mimi
        self.flow_lm = FlowLM(config.flow_lm, mimi_cfg.quantizer.dimension, mimi_cfg.inner_dim or mimi_cfg.seanet.dimension)
        self.mimi = Mimi(mimi_cfg)


def load_weights(network: PocketNetwork, path: Path) -> bool:
    """Load a released safetensors file into `network` (built on the meta device: the
    file's tensors become its parameters), all but the encoder's (see `load_encoder`);
    True when the file can clone voices."""
    expected = {key: tuple(tensor.shape) for key, tensor in network.state_dict().items()}
    try:
        shapes = safetensors_shapes(path)
        weights = read_safetensors(path, lambda key: not key.startswith(ENCODER_PREFIXES), mapped=MAPPED_KEYS)
    except (OSError, ValueError, KeyError) as err:
        raise ModelLoadError(f"weights file {path} is missing or corrupt: {err}") from None
    unexpected = sorted(set(shapes) - set(expected))
    missing = sorted(set(expected) - set(shapes))
    required_missing = [key for key in missing if not key.startswith(CLONING_PREFIXES)]
    if unexpected or required_missing:
        raise ModelLoadError(
            f"weights file {path} does not fit the model config: "
            f"{len(required_missing)} missing (e.g. {required_missing[:3]}), "
            f"{len(unexpected)} unexpected (e.g. {unexpected[:3]})"
        )
    for key, shape in shapes.items():
        if shape != expected[key]:
            raise ModelLoadError(f"weights file {path}: {key} has shape {shape}, the config needs {expected[key]}")
    for key in missing:  # a release without cloning: unused, but a real tensor like every non-encoder weight
        if not key.startswith(ENCODER_PREFIXES):
            weights[key] = torch.zeros(expected[key])
    _assign(network, weights, expected_keys={key for key in expected if not key.startswith(ENCODER_PREFIXES)})
    return not missing


def load_encoder(network: PocketNetwork, path: Path) -> None:
    """Load the encoder's weights (left out by `load_weights`) from the same file."""
    expected = {key for key in network.state_dict() if key.startswith(ENCODER_PREFIXES)}
    try:
        weights = read_safetensors(path, lambda key: key.startswith(ENCODER_PREFIXES))
    except (OSError, ValueError, KeyError) as err:
        raise ModelLoadError(f"weights file {path} is missing or corrupt: {err}") from None
    _assign(network, weights, expected)


def _assign(network: PocketNetwork, weights: dict[str, torch.Tensor], expected_keys: set[str]) -> None:
    if set(weights) != expected_keys:
        raise ModelLoadError(f"the weights file changed since loading: {sorted(expected_keys ^ set(weights))[:3]}")
    with torch.inference_mode(False):
        network.load_state_dict(weights, strict=False, assign=True)
        network.requires_grad_(False)


# Four 16-bit uniform integers summed (Irwin-Hall): bell-shaped, within 3.5 standard
# deviations, and exact integer arithmetic on any CPU.
_FIELD = 0xFFFF
_FIELD_SUM_MEAN = 2 * _FIELD
_FIELD_SUM_STD = math.sqrt(4 * ((_FIELD + 1) ** 2 - 1) / 12)


def portable_normal(shape: tuple[int, ...], bits: np.random.BitGenerator) -> torch.Tensor:
    """Near-normal float32 noise (mean 0, standard deviation 1) that is bit-identical on
    every platform, unlike `torch.randn`, whose CPU kernels give other values on aarch64
    than on x86_64.

    Written here rather than taken from numpy's `standard_normal`: that one goes through
    `exp`/`log` from the C library for its tail, which need not round alike everywhere.
    Here only the bit generator's stream (specified exactly), integer sums and one
    correctly rounded float32 multiplication are involved.
    """
    raw = torch.from_numpy(bits.random_raw(math.prod(shape)).view(np.int64))
    fields = (raw & _FIELD) + ((raw >> 16) & _FIELD) + ((raw >> 32) & _FIELD) + ((raw >> 48) & _FIELD)
    # the centred sum (at most 2^18 in size) is exact in float32
    return ((fields - _FIELD_SUM_MEAN).to(torch.float32) * (1.0 / _FIELD_SUM_STD)).reshape(shape)


def random_weights(network: PocketNetwork, seed: int = 0) -> None:
    """Deterministic random weights (for the demo model, tests and benchmarks), the same
    on every platform (`portable_normal`).

    PyTorch's default initialisation keeps activations in range; the few parameters it
    does not cover get small values so the random model stays numerically tame.
    """
    bits = np.random.PCG64(seed)
    with torch.no_grad():
        for name, param in network.named_parameters():
            if param.dim() >= 2:
                fan_in = param[0].numel()
                param.copy_(portable_normal(tuple(param.shape), bits) / math.sqrt(fan_in))
            elif name.endswith(("scale", "alpha")) or ".norm" in name or "in_ln.weight" in name or "out_norm.weight" in name:
                continue
            else:
                param.copy_(portable_normal(tuple(param.shape), bits) * 0.02)
