"""The Mimi codec: a SEANet convolutional encoder/decoder around a small transformer.

The encoder turns a voice recording into 12.5 Hz latents once per voice; the decoder
turns generated latents into audio frame by frame. Streaming convolutions keep the tail
of their input (or output, for transposed ones) between calls, in a `DecoderState`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from .config import MimiConfig, MimiTransformerConfig, SEANetConfig
from .layers import Transformer, WindowCache

# Per-module streaming memory: a conv's last input steps, a transposed conv's overlap.
ConvMemory = dict[nn.Module, torch.Tensor]
# The encoder reads a recording this many frames (80 ms each) at a time.
ENCODER_CHUNK_FRAMES = 4
# Below this many input channels (the encoder's first layer, on raw audio) a product per
# tap is too thin to pay: such a convolution copies its windows instead.
MIN_CHANNELS_PER_TAP = 16


def _lay_out_as_matrix(conv: nn.Module, to_matrix: Callable[[torch.Tensor], torch.Tensor],
                     to_weight: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """Lay a conv's frozen weight out in memory as the contiguous matrix its product reads
    (`to_matrix`), and make the weight a view of that matrix (`to_weight`): held once."""
    with torch.inference_mode(False):  # a plain tensor, usable in any mode
        matrix = to_matrix(conv.weight.detach()).contiguous()
    conv.weight = nn.Parameter(to_weight(matrix), requires_grad=False)
    return matrix


def _laid_out(matrix: torch.Tensor | None) -> torch.Tensor:
    if matrix is None:
        raise RuntimeError("lay_out_convolutions() must run once the weights are loaded")
    return matrix


def lay_out_convolutions(module: nn.Module) -> None:
    """Lay out every loaded streaming convolution's weight as the matrix its product
    reads, once, when the weights are loaded: never on a first forward pass, from
    whichever request's thread gets there, in a model that requests share. Weights still
    on the meta device (the encoder's until a voice is first encoded) are left for later;
    laying out a convolution again is a no-op, its weight already being a view of it."""
    for conv in module.modules():
        if isinstance(conv, (StreamingConv1d, StreamingConvTranspose1d)):
            weight = conv.conv.weight if isinstance(conv, StreamingConv1d) else conv.convtr.weight
            if not weight.is_meta:
                conv.lay_out()


class StreamingConv1d(nn.Module):
    """Causal Conv1d over time-major steps [B, T, C], keeping its last input steps in
    `memory` for the next call; the first call is left-padded with zeros (or its first
    step)."""

    def __init__(self, in_ch: int, out_ch: int, kernel: int, stride: int = 1, dilation: int = 1,
                 groups: int = 1, bias: bool = True, pad_mode: str = "constant") -> None:
        super().__init__()
        self.conv = nn.Conv1d(in_ch, out_ch, kernel, stride, dilation=dilation, groups=groups, bias=bias)
        self.pad_mode = pad_mode
        self.history = (kernel - 1) * dilation + 1 - stride
        self._weight_matrix: torch.Tensor | None = None

    def forward(self, x: torch.Tensor, memory: ConvMemory) -> torch.Tensor:
        if self.history:
            previous = memory.get(self)
            if previous is None:
                if self.pad_mode == "replicate":
                    previous = x[:, :1].expand(-1, self.history, -1)
                else:
                    previous = x.new_zeros(x.shape[0], self.history, x.shape[2])
            x = torch.cat([previous, x], dim=1)
            # A copy, not a view: a view would keep the whole input alive until the next
            # call, megabytes per layer that the allocator then cannot reuse.
            memory[self] = x[:, -self.history :].clone()
        conv = self.conv
        if conv.groups != 1:
            return conv(x.transpose(1, 2)).transpose(1, 2)
        kernel, dilation, stride = conv.kernel_size[0], conv.dilation[0], conv.stride[0]
        if kernel == 1:
            return F.linear(x[:, ::stride], self._matrix(), conv.bias)
        if stride == 1 and conv.in_channels >= MIN_CHANNELS_PER_TAP:
            return self._sum_over_taps(x)
        # One matrix product over the input's windows: in time-major layout the window of
        # step t is k consecutive rows, flattened tap by tap.
        windows = x.unfold(1, (kernel - 1) * dilation + 1, stride)[..., ::dilation].transpose(2, 3)
        # [B, T, k * in]; a view whose rows overlap, which no matrix product takes
        windows = windows.reshape(*windows.shape[:2], -1).contiguous()
        return F.linear(windows, self._matrix(), conv.bias)

    def _sum_over_taps(self, x: torch.Tensor) -> torch.Tensor:
        """A stride-1 convolution as one product per tap, accumulated in place: tap j
        reads the input rows shifted by j * dilation, a view. The windows of the other
        path copy the input k times over (14 MB for the decoder's last layer at four
        frames), which costs more than the thinner products: per decoder layer, one
        thread, these took 0.5x (the last layer) to 0.98x the windows' time."""
        conv = self.conv
        kernel, dilation, in_ch = conv.kernel_size[0], conv.dilation[0], conv.in_channels
        matrix = self._matrix()  # [out, k * in], tap-major
        b, steps = x.shape[0], x.shape[1] - (kernel - 1) * dilation
        y = F.linear(x[:, :steps], matrix[:, :in_ch], conv.bias)
        rows = y.view(b * steps, -1)
        for tap in range(1, kernel):
            shifted = x[:, tap * dilation : tap * dilation + steps].reshape(b * steps, in_ch)  # a view when b == 1
            rows.addmm_(shifted, matrix[:, tap * in_ch : (tap + 1) * in_ch].t())
        return y

    def lay_out(self) -> None:
        """Hold the loaded weight [out, in, k] as the matrix [out, k * in], tap-major like
        the windows (see `lay_out_convolutions`)."""
        out_ch, in_ch, kernel = self.conv.weight.shape
        self._weight_matrix = _lay_out_as_matrix(
            self.conv,
            lambda weight: weight.permute(0, 2, 1).reshape(out_ch, -1),
            lambda matrix: matrix.view(out_ch, kernel, in_ch).permute(0, 2, 1),
        )

    def _matrix(self) -> torch.Tensor:
        return _laid_out(self._weight_matrix)


class StreamingConvTranspose1d(nn.Module):
    """Transposed Conv1d over time-major steps [B, T, C], carrying its overlapping tail
    over to the next call.

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
        self._weight_matrix: torch.Tensor | None = None

    def forward(self, x: torch.Tensor, memory: ConvMemory) -> torch.Tensor:
        blocks = self._blocks(x)  # [B, T, out, 2, stride]: each step's two halves
        if blocks is None:
            return self._forward_generic(x, memory)
        b, steps, channels = blocks.shape[:3]
        first, second = blocks[..., 0, :], blocks[..., 1, :]
        pending = memory.get(self)
        # Each step's first half receives the previous step's second half.
        y = torch.empty(b, steps, self.stride, channels)
        y_blocks = y.transpose(2, 3)  # [B, T, out, stride], a view of y
        torch.add(first[:, 1:], second[:, :-1], out=y_blocks[:, 1:])
        if pending is None:
            y_blocks[:, 0] = first[:, 0]
        else:
            torch.add(first[:, 0], pending, out=y_blocks[:, 0])
        memory[self] = second[:, -1].clone()  # not a view of the whole product (see StreamingConv1d)
        y = y.view(b, steps * self.stride, channels)
        return y if self.convtr.bias is None else y.add_(self.convtr.bias)  # y is ours: no new buffer

    def _blocks(self, x: torch.Tensor) -> torch.Tensor | None:
        conv = self.convtr
        if self.overlap != self.stride:
            return None
        b, steps, _ = x.shape
        if conv.groups == conv.in_channels == conv.out_channels:  # depthwise
            return x[..., None, None] * conv.weight[:, 0].view(-1, 2, self.stride)
        if conv.groups != 1:
            return None
        return F.linear(x, self._matrix()).view(b, steps, -1, 2, self.stride)

    def lay_out(self) -> None:
        """Hold the loaded weight [in, out, kernel] as the matrix [out * kernel, in]: rows
        (channel, tap) (see `lay_out_convolutions`)."""
        in_ch, out_ch, kernel = self.convtr.weight.shape
        self._weight_matrix = _lay_out_as_matrix(
            self.convtr,
            lambda weight: weight.reshape(in_ch, -1).t(),
            lambda matrix: matrix.t().view(in_ch, out_ch, kernel),
        )

    def _matrix(self) -> torch.Tensor:
        return _laid_out(self._weight_matrix)

    def _forward_generic(self, x: torch.Tensor, memory: ConvMemory) -> torch.Tensor:
        y = self.convtr(x.transpose(1, 2))
        if self.overlap:
            pending = memory.get(self)
            if pending is not None:
                y[..., : self.overlap] += pending
            tail = y[..., -self.overlap :]
            # The bias is added once, by the call that completes these samples.
            memory[self] = tail.clone() if self.convtr.bias is None else tail - self.convtr.bias[:, None]
            y = y[..., : -self.overlap]
        return y.transpose(1, 2)


class ResnetBlock(nn.Module):
    def __init__(self, dim: int, kernel: int, dilation: int, pad_mode: str, compress: int) -> None:
        super().__init__()
        hidden = dim // compress
        self.block = nn.ModuleList([
            nn.ELU(), StreamingConv1d(dim, hidden, kernel, dilation=dilation, pad_mode=pad_mode),
            nn.ELU(), StreamingConv1d(hidden, dim, 1, pad_mode=pad_mode),
        ])  # fmt: skip

    def forward(self, x: torch.Tensor, memory: ConvMemory) -> torch.Tensor:
        return _stream(self.block, x, memory).add_(x)  # the block's output is a fresh tensor


def _stream(layers: nn.ModuleList, x: torch.Tensor, memory: ConvMemory) -> torch.Tensor:
    for layer in layers:
        x = elu(x) if isinstance(layer, nn.ELU) else layer(x, memory)
    return x


def elu(x: torch.Tensor) -> torch.Tensor:
    """ELU (alpha 1): x where x > 0, else exp(x) - 1.

    Written as exp(min(x, 0)) - 1 + max(x, 0) because PyTorch's `F.elu` computes
    `expm1`, which on this kind of CPU (AVX2) costs twice an `exp`: the codec decoder
    runs ten ELUs per frame over half a million values, and this form takes 0.6x the
    time. The two differ by about a float32 rounding of 1 (1e-7) at most.
    """
    return torch.clamp(x, max=0).exp_().sub_(1).add_(torch.relu(x))  # one buffer less: exp in place


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

    def forward(self, x: torch.Tensor, memory: ConvMemory) -> torch.Tensor:
        """Time-major audio [B, T * hop, channels] -> steps [B, T, dimension]."""
        return _stream(self.model, x, memory)


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
        """Time-major steps [B, T, C] -> audio [B, T * hop, channels]."""
        return _stream(self.model, x, memory)


class ProjectedTransformer(nn.Module):
    """Transformer over time-major features [B, T, C], with linear projections in and out as needed."""

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

    def forward(self, x: torch.Tensor, caches: list[WindowCache]) -> torch.Tensor:
        if self.input_proj is not None:
            x = self.input_proj(x)
        x = self.transformer.forward_window(x, caches)
        return self.output_projs[0](x)


class Quantizer(nn.Module):
    """All that remains of Mimi's quantizer for TTS: the projection out of latent space."""

    def __init__(self, dimension: int, output_dimension: int) -> None:
        super().__init__()
        self.output_proj = nn.Conv1d(dimension, output_dimension, 1, bias=False)

    def forward(self, latents: torch.Tensor) -> torch.Tensor:
        """Time-major [B, T, dimension] -> [B, T, output_dimension]."""
        return F.linear(latents, self.output_proj.weight[:, :, 0])


class Downsample(nn.Module):
    def __init__(self, stride: int, dimension: int, out_dimension: int) -> None:
        super().__init__()
        self.conv = StreamingConv1d(dimension, out_dimension, 2 * stride, stride=stride, bias=False, pad_mode="replicate")

    def forward(self, x: torch.Tensor, memory: ConvMemory) -> torch.Tensor:
        return self.conv(x, memory)


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
        """Audio [B, 1, samples] -> latents [B, frames, inner_dim], padded to whole frames.

        Streamed through the encoder a second at a time, exactly as one pass would compute
        it: a 30 s recording at full rate would otherwise hold several 180 MB activations
        (and its transformer a score matrix growing with the square of its length).
        """
        frame = self.frame_size
        audio = F.pad(audio, (0, -audio.shape[-1] % frame)).transpose(1, 2)  # time-major
        memory: ConvMemory = {}
        attention = self.encoder_transformer.transformer.new_window_caches(audio.shape[0])
        latents = []
        for start in range(0, audio.shape[1], ENCODER_CHUNK_FRAMES * frame):
            x = self.encoder(audio[:, start : start + ENCODER_CHUNK_FRAMES * frame], memory)
            x = self.encoder_transformer(x, attention)
            latents.append(self.downsample(x, memory))
        return torch.cat(latents, dim=1)

    def new_decoder_state(self) -> DecoderState:
        return DecoderState(attention=self.decoder_transformer.transformer.new_window_caches())

    def decode(self, latents: torch.Tensor, state: DecoderState) -> torch.Tensor:
        """Latents [B, frames, dim] (denormalised) -> audio [B, 1, frames * frame_size]."""
        # Time-major all the way ([B, T, C]): every layer is a matrix product over rows.
        x = self.quantizer(latents)
        x = self.upsample(x, state.conv_memory)
        x = self.decoder_transformer(x, state.attention)
        state.frames_decoded += latents.shape[1]
        return self.decoder(x, state.conv_memory).transpose(1, 2)
