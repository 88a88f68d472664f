"""The Mimi codec: a SEANet convolutional encoder/decoder around a small transformer.

The encoder turns a voice recording into 12.5 Hz latents once per voice; the decoder
turns generated latents into audio frame by frame. Streaming convolutions keep the tail
of their input (or output, for transposed ones) between calls, in a `DecoderState`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from .config import MimiConfig, MimiTransformerConfig, SEANetConfig
from .layers import Transformer, WindowCache

# Per-module streaming memory: a conv's last input samples, a transposed conv's overlap.
ConvMemory = dict[nn.Module, torch.Tensor]


class StreamingConv1d(nn.Module):
    """Causal Conv1d: the first call is left-padded with zeros (or its first sample)."""

    def __init__(self, in_ch: int, out_ch: int, kernel: int, stride: int = 1, dilation: int = 1,
                 groups: int = 1, bias: bool = True, pad_mode: str = "constant") -> None:
        super().__init__()
        self.conv = nn.Conv1d(in_ch, out_ch, kernel, stride, dilation=dilation, groups=groups, bias=bias)
        self.pad_mode = pad_mode
        self.history = (kernel - 1) * dilation + 1 - stride

    def forward(self, x: torch.Tensor, memory: ConvMemory | None) -> torch.Tensor:
        if self.history:
            previous = None if memory is None else memory.get(self)
            if previous is None:
                if self.pad_mode == "replicate":
                    previous = x[..., :1].expand(-1, -1, self.history)
                else:
                    previous = x.new_zeros(x.shape[0], x.shape[1], self.history)
            x = torch.cat([previous, x], dim=-1)
            if memory is not None:
                memory[self] = x[..., -self.history :]
        return self.conv(x)


class StreamingConvTranspose1d(nn.Module):
    """Transposed Conv1d that carries its overlapping tail over to the next call.

    Every decoder layer has a kernel of twice its stride: each input step writes two
    blocks of `stride` samples, the first overlapping the previous step's second. That is
    computed as one matrix product (a broadcast multiply when depthwise) and an
    overlap-add, several times faster on CPU than PyTorch's transposed convolution for the
    few steps of a streamed frame (its grouped version even takes a slow path).
    """

    def __init__(self, in_ch: int, out_ch: int, kernel: int, stride: int, groups: int = 1, bias: bool = True) -> None:
        super().__init__()
        self.convtr = nn.ConvTranspose1d(in_ch, out_ch, kernel, stride, groups=groups, bias=bias)
        self.stride = stride
        self.overlap = kernel - stride
        self._blocks_weight: torch.Tensor | None = None  # derived from the weight, not saved

    def forward(self, x: torch.Tensor, memory: ConvMemory) -> torch.Tensor:
        blocks = self._blocks(x)  # [B, out, 2, stride, T]: each step's two halves
        if blocks is None:
            return self._forward_generic(x, memory)
        b, channels, _, _, steps = blocks.shape
        first, second = blocks[:, :, 0], blocks[:, :, 1]
        pending = memory.get(self)
        if pending is None:
            pending = x.new_zeros(b, channels, self.stride, 1)
        carried = torch.cat([pending, second], dim=-1)  # each step receives the previous one's
        memory[self] = carried[..., -1:]
        y = (first + carried[..., :-1]).transpose(-1, -2).reshape(b, channels, steps * self.stride)
        return y if self.convtr.bias is None else y + self.convtr.bias[:, None]

    def _blocks(self, x: torch.Tensor) -> torch.Tensor | None:
        conv = self.convtr
        if self.overlap != self.stride:
            return None
        b, _, steps = x.shape
        if conv.groups == conv.in_channels == conv.out_channels:  # depthwise
            taps = conv.weight[:, 0].view(-1, 2, self.stride, 1)
            return x[:, :, None, None, :] * taps
        if conv.groups != 1:
            return None
        weight = self._blocks_weight
        if weight is None:  # [out * kernel, in]: rows (channel, tap); weights are frozen
            weight = self._blocks_weight = conv.weight.permute(1, 2, 0).reshape(-1, conv.in_channels).contiguous()
        return (weight @ x).view(b, -1, 2, self.stride, steps)

    def _forward_generic(self, x: torch.Tensor, memory: ConvMemory) -> torch.Tensor:
        y = self.convtr(x)
        if not self.overlap:
            return y
        pending = memory.get(self)
        if pending is not None:
            y[..., : self.overlap] += pending
        tail = y[..., -self.overlap :]
        # The bias is added once, by the call that completes these samples.
        memory[self] = tail if self.convtr.bias is None else tail - self.convtr.bias[:, None]
        return y[..., : -self.overlap]


class ResnetBlock(nn.Module):
    def __init__(self, dim: int, kernel: int, dilation: int, pad_mode: str, compress: int) -> None:
        super().__init__()
        hidden = dim // compress
        self.block = nn.ModuleList([
            nn.ELU(), StreamingConv1d(dim, hidden, kernel, dilation=dilation, pad_mode=pad_mode),
            nn.ELU(), StreamingConv1d(hidden, dim, 1, pad_mode=pad_mode),
        ])  # fmt: skip

    def forward(self, x: torch.Tensor, memory: ConvMemory | None) -> torch.Tensor:
        v = x
        for layer in self.block:
            v = layer(v, memory) if isinstance(layer, StreamingConv1d) else layer(v)
        return x + v


def _apply(layers: nn.ModuleList, x: torch.Tensor, memory: ConvMemory | None) -> torch.Tensor:
    for layer in layers:
        x = layer(x) if isinstance(layer, nn.ELU) else layer(x, memory)
    return x


class SEANetEncoder(nn.Module):
    def __init__(self, cfg: SEANetConfig) -> None:
        super().__init__()
        self.hop_length = math.prod(cfg.ratios)
        mult = 1
        layers: list[nn.Module] = [StreamingConv1d(cfg.channels, cfg.n_filters, cfg.kernel_size, pad_mode=cfg.pad_mode)]
        for ratio in reversed(cfg.ratios):
            width = mult * cfg.n_filters
            for j in range(cfg.n_residual_layers):
                layers.append(ResnetBlock(width, cfg.residual_kernel_size, cfg.dilation_base**j, cfg.pad_mode, cfg.compress))
            layers += [nn.ELU(), StreamingConv1d(width, 2 * width, 2 * ratio, stride=ratio, pad_mode=cfg.pad_mode)]
            mult *= 2
        layers += [nn.ELU(), StreamingConv1d(mult * cfg.n_filters, cfg.dimension, cfg.last_kernel_size, pad_mode=cfg.pad_mode)]
        self.model = nn.ModuleList(layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _apply(self.model, x, None)


class SEANetDecoder(nn.Module):
    def __init__(self, cfg: SEANetConfig) -> None:
        super().__init__()
        mult = 2 ** len(cfg.ratios)
        layers: list[nn.Module] = [StreamingConv1d(cfg.dimension, mult * cfg.n_filters, cfg.kernel_size, pad_mode=cfg.pad_mode)]
        for ratio in cfg.ratios:
            width = mult * cfg.n_filters
            layers += [nn.ELU(), StreamingConvTranspose1d(width, width // 2, 2 * ratio, stride=ratio)]
            for j in range(cfg.n_residual_layers):
                layers.append(ResnetBlock(width // 2, cfg.residual_kernel_size, cfg.dilation_base**j, cfg.pad_mode, cfg.compress))
            mult //= 2
        layers += [nn.ELU(), StreamingConv1d(cfg.n_filters, cfg.channels, cfg.last_kernel_size, pad_mode=cfg.pad_mode)]
        self.model = nn.ModuleList(layers)

    def forward(self, x: torch.Tensor, memory: ConvMemory) -> torch.Tensor:
        return _apply(self.model, x, memory)


class ProjectedTransformer(nn.Module):
    """Transformer over [B, C, T] features, with linear projections in and out as needed."""

    def __init__(self, cfg: MimiTransformerConfig) -> None:
        super().__init__()
        self.transformer = Transformer(
            d_model=cfg.d_model, num_heads=cfg.num_heads, num_layers=cfg.num_layers,
            dim_feedforward=cfg.dim_feedforward, max_period=cfg.max_period,
            layer_scale=cfg.layer_scale, context=cfg.context,
        )  # fmt: skip
        self.input_proj = None if cfg.d_model == cfg.input_dimension else nn.Linear(cfg.input_dimension, cfg.d_model, bias=False)
        self.output_projs = nn.ModuleList(
            nn.Identity() if out == cfg.d_model else nn.Linear(cfg.d_model, out, bias=False)
            for out in cfg.output_dimensions
        )

    def forward(self, x: torch.Tensor, caches: list[WindowCache] | None) -> torch.Tensor:
        x = x.transpose(1, 2)
        if self.input_proj is not None:
            x = self.input_proj(x)
        x = self.transformer.forward_full(x) if caches is None else self.transformer.forward_window(x, caches)
        return self.output_projs[0](x).transpose(1, 2)


class Quantizer(nn.Module):
    """All that remains of Mimi's quantizer for TTS: the projection out of latent space."""

    def __init__(self, dimension: int, output_dimension: int) -> None:
        super().__init__()
        self.output_proj = nn.Conv1d(dimension, output_dimension, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.output_proj(x)


class Downsample(nn.Module):
    def __init__(self, stride: int, dimension: int, out_dimension: int) -> None:
        super().__init__()
        self.conv = StreamingConv1d(dimension, out_dimension, 2 * stride, stride=stride, bias=False, pad_mode="replicate")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x, None)


class Upsample(nn.Module):
    """Depthwise transposed convolution from the frame rate to the encoder rate."""

    def __init__(self, stride: int, dimension: int, in_dimension: int) -> None:
        super().__init__()
        self.convtr = StreamingConvTranspose1d(in_dimension, dimension, 2 * stride, stride, groups=dimension, bias=False)

    def forward(self, x: torch.Tensor, memory: ConvMemory) -> torch.Tensor:
        return self.convtr(x, memory)


@dataclass
class DecoderState:
    """Everything the decoder carries from one frame to the next, for one response."""

    conv_memory: ConvMemory = field(default_factory=dict)
    attention: list[WindowCache] = field(default_factory=list)
    frames_decoded: int = 0


class Mimi(nn.Module):
    def __init__(self, cfg: MimiConfig) -> None:
        super().__init__()
        decoder_seanet = cfg.decoder_seanet or cfg.seanet
        self.sample_rate = cfg.sample_rate
        self.frame_rate = cfg.frame_rate
        self.encoder = SEANetEncoder(cfg.seanet)
        self.decoder = SEANetDecoder(decoder_seanet)
        self.encoder_transformer = ProjectedTransformer(cfg.transformer)
        self.decoder_transformer = ProjectedTransformer(cfg.decoder_transformer or cfg.transformer)
        self.quantizer = Quantizer(cfg.quantizer.dimension, cfg.quantizer.output_dimension)
        encoder_rate = cfg.sample_rate / self.encoder.hop_length
        stride = encoder_rate / cfg.frame_rate
        if stride != int(stride):
            raise ValueError(f"codec frame rate {cfg.frame_rate} must divide {encoder_rate}")
        self.stride = int(stride)
        self.downsample = Downsample(self.stride, cfg.seanet.dimension, cfg.inner_dim or cfg.seanet.dimension)
        self.upsample = Upsample(self.stride, decoder_seanet.dimension, cfg.outer_dim or decoder_seanet.dimension)

    @property
    def frame_size(self) -> int:
        return int(self.sample_rate / self.frame_rate)

    def encode(self, audio: torch.Tensor) -> torch.Tensor:
        """Audio [B, 1, samples] -> latents [B, frames, inner_dim], padded to whole frames."""
        frame = self.frame_size
        audio = F.pad(audio, (0, -audio.shape[-1] % frame))
        features = self.encoder_transformer(self.encoder(audio), None)
        return self.downsample(features).transpose(1, 2)

    def new_decoder_state(self) -> DecoderState:
        return DecoderState(attention=self.decoder_transformer.transformer.new_window_caches())

    def decode(self, latents: torch.Tensor, state: DecoderState) -> torch.Tensor:
        """Latents [B, frames, dim] (denormalised) -> audio [B, 1, frames * frame_size]."""
        x = self.quantizer(latents.transpose(1, 2))
        x = self.upsample(x, state.conv_memory)
        x = self.decoder_transformer(x, state.attention)
        state.frames_decoded += latents.shape[1]
        return self.decoder(x, state.conv_memory)
