"""The whole Pocket TTS network (FlowLM + Mimi), laid out like the released weights."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from .config import ModelConfig
from .errors import ModelLoadError
from .flow_lm import FlowLM
from .mimi import Mimi

# Weights only the voice-cloning release carries: without them a voice cannot be encoded.
CLONING_PREFIXES = ("mimi.encoder.", "mimi.encoder_transformer.", "mimi.downsample.", "flow_lm.speaker_proj_weight")


class PocketNetwork(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        mimi_cfg = config.mimi
        self.flow_lm = FlowLM(config.flow_lm, mimi_cfg.quantizer.dimension, mimi_cfg.inner_dim or mimi_cfg.seanet.dimension)
        self.mimi = Mimi(mimi_cfg)


def load_weights(network: PocketNetwork, path: Path) -> bool:
    """Load a released safetensors file into `network` (which may be on the meta device:
    the file's tensors become its parameters); True when it can clone voices."""
    from safetensors.torch import load_file

    try:
        weights = load_file(str(path))
    except Exception as err:  # noqa: BLE001 -- a truncated or foreign file raises many types
        raise ModelLoadError(f"weights file {path} is missing or corrupt: {err}") from None
    expected = network.state_dict()
    unexpected = sorted(set(weights) - set(expected))
    missing = sorted(set(expected) - set(weights))
    required_missing = [key for key in missing if not key.startswith(CLONING_PREFIXES)]
    if unexpected or required_missing:
        raise ModelLoadError(
            f"weights file {path} does not fit the model config: "
            f"{len(required_missing)} missing (e.g. {required_missing[:3]}), "
            f"{len(unexpected)} unexpected (e.g. {unexpected[:3]})"
        )
    for key, tensor in weights.items():
        if tensor.shape != expected[key].shape:
            raise ModelLoadError(
                f"weights file {path}: {key} has shape {tuple(tensor.shape)}, "
                f"the config needs {tuple(expected[key].shape)}"
            )
    for key in missing:  # the encoder of a release without cloning: present, never used
        weights[key] = torch.zeros(expected[key].shape, dtype=expected[key].dtype)
    network.load_state_dict(weights, strict=True, assign=True)
    return not missing


def random_weights(network: PocketNetwork, seed: int = 0) -> None:
    """Deterministic random weights (for the demo model, tests and benchmarks).

    PyTorch's default initialisation keeps activations in range; the few parameters it
    does not cover get small values so the random model stays numerically tame.
    """
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in network.named_parameters():
            if param.dim() >= 2:
                fan_in = param[0].numel()
                param.copy_(torch.randn(param.shape, generator=generator) / fan_in**0.5)
            elif name.endswith(("scale", "alpha")) or ".norm" in name or "in_ln.weight" in name or "out_norm.weight" in name:
                continue
            else:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.02)
