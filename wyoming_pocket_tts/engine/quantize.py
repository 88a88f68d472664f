"""int8 linears for the FlowLM transformer, in a few lines.

Weights are stored as int8 with one scale per output channel and multiplied by the
quantized engine's dynamic kernel (FBGEMM on x86, QNNPACK on ARM), which quantizes the
activations per call. On this kind of CPU it beats both float32 and the int8
weight-only kernel (`_weight_int8pack_mm`) several times over for batch-1 products.

Applied to the attention (in_proj, out_proj) and feed-forward (linear1, linear2) layers
of the FlowLM transformer (~85% of the weights read per frame) and of the Mimi decoder's
transformer (a third of the decoder's time), and to the square MLP layers and stacked
adaLN projection of the sampler head (the other ~10%: float32, it took a third of an
int8 step). The head's small input and output layers, the embeddings, the convolutions
and the encoder stay float32: at their sizes the int8 kernel's per-call work outweighs
what it saves.
"""

from __future__ import annotations

import platform
import warnings

import torch
from torch import nn

from .flow_lm import SamplerHead
from .layers import Transformer


# The operator itself, looked up once: resolving `torch.ops.quantized.linear_dynamic` and
# its overload on every call costs ~10 us, against ~30 us for a whole small product. Its
# compiled entry point (`_op`, where present) also skips the Python-side check for traced
# stand-ins of the packed weights, which never occur here: 5-10 us more per call.
_OVERLOAD = torch.ops.quantized.linear_dynamic.default
_LINEAR_DYNAMIC = getattr(_OVERLOAD, "_op", _OVERLOAD)


def _select_engine() -> None:
    wanted = "qnnpack" if platform.machine().lower() in ("arm64", "aarch64") else "fbgemm"
    if wanted in torch.backends.quantized.supported_engines:
        torch.backends.quantized.engine = wanted


class Int8Linear(nn.Module):
    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        weight = linear.weight.detach().float()
        scales = (weight.abs().amax(dim=1) / 127.0).clamp(min=1e-12).double()
        with warnings.catch_warnings():
            # Quantized tensor creation is deprecated in favour of torchao, which is not on
            # every platform we ship to; the packed kernel itself is current.
            warnings.simplefilter("ignore", UserWarning)
            qweight = torch.quantize_per_channel(weight, scales, torch.zeros_like(scales, dtype=torch.long), 0, torch.qint8)
        bias = None if linear.bias is None else linear.bias.detach().float()
        self.packed = torch.ops.quantized.linear_prepack(qweight, bias)
        self.in_features, self.out_features = linear.in_features, linear.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _LINEAR_DYNAMIC(x, self.packed, True)


def quantize_transformer(transformer: Transformer) -> int:
    """Swap a transformer's linears for int8 ones in place; returns how many."""
    _select_engine()
    count = 0
    for layer in transformer.layers:
        for owner, attr in ((layer.self_attn, "in_proj"), (layer.self_attn, "out_proj"), (layer, "linear1"), (layer, "linear2")):
            setattr(owner, attr, Int8Linear(getattr(owner, attr)))
            count += 1
    return count


def quantize_sampler_head(head: SamplerHead) -> int:
    """Swap the sampler head's MLP linears and its stacked adaLN projection for int8
    ones in place; returns how many."""
    _select_engine()
    if head.modulation is None:
        head.fuse_modulations()
    head.modulation = Int8Linear(head.modulation)
    for block in head.res_blocks:
        block.mlp[0], block.mlp[2] = Int8Linear(block.mlp[0]), Int8Linear(block.mlp[2])
    return 1 + 2 * len(head.res_blocks)
