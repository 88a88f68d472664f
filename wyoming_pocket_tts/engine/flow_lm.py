"""The FlowLM: a causal transformer over text tokens and audio latents, with a flow
sampler head that turns each output into the next 32-dim latent and an EOS head."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .config import FlowLMConfig
from .kernels import Linear
from .layers import KVCache, Transformer
from .samplers import SAMPLERS


class TextEmbedding(nn.Module):
    """Lookup table over token ids (one extra row for padding), optionally low-rank."""

    def __init__(self, n_bins: int, dim: int, rank: int | None) -> None:
        super().__init__()
        # Given an (uninitialised) weight, the embedding skips its random init: on the meta
        # device that init would pull in PyTorch's Python meta kernels, 75 MB of RSS.
        self.embed = nn.Embedding(n_bins + 1, rank or dim, _weight=torch.empty(n_bins + 1, rank or dim))
        self.proj = None if rank is None else Linear(rank, dim, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        return x if self.proj is None else self.proj(x)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.alpha = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The released weights were trained with the (unbiased) variance here, not the
        # mean square: keep it, or the time embeddings drift.
        return x * (self.alpha * torch.rsqrt(self.eps + x.var(dim=-1, keepdim=True)))


class TimeEmbedding(nn.Module):
    def __init__(self, hidden: int, frequency_dim: int = 256, max_period: float = 10000.0) -> None:
        super().__init__()
        half = frequency_dim // 2
        # Explicitly on the CPU: arithmetic on the meta device (where the network is built
        # before loading) would pull in PyTorch's Python meta kernels.
        steps = torch.arange(half, dtype=torch.float32, device="cpu")
        self.register_buffer("freqs", torch.exp(-math.log(max_period) * steps / half))
        self.mlp = nn.Sequential(
            Linear(frequency_dim, hidden), nn.SiLU(), Linear(hidden, hidden), RMSNorm(hidden)
        )

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        angles = t * self.freqs
        return self.mlp(torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1))


def _modulate(x: torch.Tensor, shift: torch.Tensor, one_plus_scale: torch.Tensor) -> torch.Tensor:
    """adaLN's x * (1 + scale) + shift, the 1 already added (see `fuse_modulations`)."""
    return torch.addcmul(shift, x, one_plus_scale)


class ResBlock(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.in_ln = nn.LayerNorm(channels, eps=1e-6)
        self.mlp = nn.Sequential(Linear(channels, channels), nn.SiLU(), Linear(channels, channels))
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), Linear(channels, 3 * channels))

    def forward(self, x: torch.Tensor, modulation: torch.Tensor) -> torch.Tensor:
        """`modulation`: this block's rows of the stacked adaLN projection of the condition."""
        shift, one_plus_scale, gate = modulation.chunk(3, dim=-1)
        return torch.addcmul(x, gate, self.mlp(_modulate(self.in_ln(x), shift, one_plus_scale)))


class FinalLayer(nn.Module):
    def __init__(self, channels: int, out_channels: int) -> None:
        super().__init__()
        self.channels = channels
        self.linear = Linear(channels, out_channels)
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), Linear(channels, 2 * channels))

    def forward(self, x: torch.Tensor, modulation: torch.Tensor) -> torch.Tensor:
        shift, one_plus_scale = modulation.chunk(2, dim=-1)
        return self.linear(_modulate(F.layer_norm(x, (self.channels,), eps=1e-6), shift, one_plus_scale))


class SamplerHead(nn.Module):
    """MLP with adaptive layer norm: (condition, time(s), x_t) -> flow or sample.

    Per frame the head is small but many-layered, so two things are computed once rather
    than per call: the time embeddings (the sampler always asks for the same few times)
    and the product of the condition with every layer's adaLN projection, which
    `fuse_modulations` stacks into one linear (read in a single product).
    """

    def __init__(self, latent_dim: int, width: int, cond_dim: int, depth: int, num_time_conds: int) -> None:
        super().__init__()
        self.time_embed = nn.ModuleList(TimeEmbedding(width) for _ in range(num_time_conds))
        self.cond_embed = Linear(cond_dim, width)
        self.input_proj = Linear(latent_dim, width)
        self.res_blocks = nn.ModuleList(ResBlock(width) for _ in range(depth))
        self.final_layer = FinalLayer(width, latent_dim)
        self._time_conditions: dict[tuple[float, ...], torch.Tensor] = {}
        self.modulation: nn.Module | None = None
        self.modulation_sizes: list[int] = []

    def forward(self, condition: torch.Tensor, times: list[float], x: torch.Tensor) -> torch.Tensor:
        y = self.cond_embed(condition)
        if times:
            y = y + self._time_condition(tuple(times))
        if self.modulation is None:
            raise RuntimeError("SamplerHead.fuse_modulations() must run once the weights are loaded")
        modulations = self.modulation(F.silu(y)).split(self.modulation_sizes, dim=-1)
        h = self.input_proj(x)
        for block, modulation in zip(self.res_blocks, modulations):
            h = block(h, modulation)
        return self.final_layer(h, modulations[-1])

    def fuse_modulations(self) -> None:
        """Stack every layer's adaLN projection into `modulation`, once the weights are
        loaded; the per-layer linears (unused by `forward`) are dropped, so the weights
        are held once and a quantizer sees the stacked linear like any other.

        Each layer's "1 +" of its scale goes into the stacked bias: one operation less
        per layer and frame, for a rounding difference of one float32 ulp of 1.
        """
        owners = [module for module in (*self.res_blocks, self.final_layer) if hasattr(module, "adaLN_modulation")]
        if not owners:
            return
        linears = [owner.adaLN_modulation[1] for owner in owners]
        with torch.inference_mode(False), torch.no_grad():  # plain tensors, usable in any mode
            weight = torch.cat([linear.weight.detach() for linear in linears])
            bias = torch.cat([linear.bias.detach() for linear in linears])
            start = 0
            for linear in linears:  # rows: shift, scale(, gate), `width` each
                width = linear.in_features
                bias[start + width : start + 2 * width] += 1
                start += linear.out_features
        self.modulation = Linear.around(weight, bias)
        self.modulation_sizes = [linear.out_features for linear in linears]
        for owner in owners:
            del owner.adaLN_modulation

    def _time_condition(self, times: tuple[float, ...]) -> torch.Tensor:
        cached = self._time_conditions.get(times)
        if cached is None:
            with torch.inference_mode(False), torch.no_grad():  # a plain tensor, usable in any mode
                total = sum(emb(torch.tensor([[t]])) for emb, t in zip(self.time_embed, times))
                cached = self._time_conditions[times] = total / len(times)
        return cached


@dataclass
class StepOutput:
    latent: torch.Tensor  # [B, 1, latent_dim]
    eos_logits: torch.Tensor  # [B, 1]

    @property
    def eos_logit(self) -> float:
        """The EOS logit of a one-row step."""
        return float(self.eos_logits)


class FlowLM(nn.Module):
    emb_std: torch.Tensor
    emb_mean: torch.Tensor

    def __init__(self, config: FlowLMConfig, latent_dim: int, voice_dim: int) -> None:
        super().__init__()
        tcfg = config.transformer
        d_model = tcfg.d_model
        self.sampler = SAMPLERS[config.flow.type]
        self.latent_dim = latent_dim
        self.conditioner = TextEmbedding(config.lookup_table.n_bins, config.lookup_table.dim, config.lookup_table.rank)
        self.flow_net = SamplerHead(
            latent_dim, config.flow.dim, config.z_dim or d_model, config.flow.depth, self.sampler.time_conditions
        )
        self.register_buffer("emb_std", torch.ones(latent_dim))
        self.register_buffer("emb_mean", torch.zeros(latent_dim))
        # Filled by the weights (or `random_weights`). Not torch.randn: on the meta device
        # that draws in sympy through a Python decomposition, 34 MB resident for good.
        self.bos_emb = nn.Parameter(torch.empty(latent_dim))
        if config.insert_bos_before_voice:
            self.bos_before_voice = nn.Parameter(torch.empty(1, 1, d_model))
        self.insert_bos_before_voice = config.insert_bos_before_voice
        self.speaker_proj_weight = nn.Parameter(torch.zeros(d_model, voice_dim))
        self.input_linear = Linear(latent_dim, d_model, bias=False)
        self.transformer = Transformer(
            d_model=d_model,
            num_heads=tcfg.num_heads,
            num_layers=tcfg.num_layers,
            dim_feedforward=tcfg.ffn_dim,
            max_period=float(tcfg.max_period),
            attn_dim=tcfg.attn_dim,
            num_kv_heads=tcfg.num_kv_heads,
        )
        self.out_norm = nn.LayerNorm(d_model, eps=1e-5)
        self.z_proj = None if config.z_dim is None else Linear(d_model, config.z_dim, bias=False)
        self.out_eos = Linear(config.z_dim or d_model, 1)

    def voice_prompt(self, voice_latents: torch.Tensor) -> torch.Tensor:
        """The embeddings the FlowLM reads for a voice: [bos] + projected codec latents."""
        prompt = F.linear(voice_latents, self.speaker_proj_weight)
        if self.insert_bos_before_voice:
            prompt = torch.cat([self.bos_before_voice.expand(prompt.shape[0], -1, -1), prompt], dim=1)
        return prompt

    def prefill(self, embeddings: torch.Tensor, caches: list[KVCache]) -> None:
        """Run a prompt (voice or text embeddings) through the transformer into the caches."""
        self.transformer.forward_cached(embeddings, caches, outputs=1)  # only the caches are read

    def embed_text(self, ids: torch.Tensor) -> torch.Tensor:
        return self.conditioner(ids)

    def step(
        self,
        previous: torch.Tensor | None,
        caches: list[KVCache],
        noise: torch.Tensor,
        decode_steps: int,
        prompt: torch.Tensor | None = None,
    ) -> StepOutput:
        """One autoregressive step: the previous latent (None at the start) -> next latent.

        A `prompt` (text embeddings not yet in the caches) goes through the transformer in
        the same pass: the first step then reads the weights once, not twice. B rows step
        at once given caches of batch B, `previous` [B, 1, latent_dim] and noise
        [B, latent_dim] (the precision measurement times four).
        """
        if previous is None:
            previous = self.bos_emb.view(1, 1, -1)
        x = self.input_linear(previous)
        if prompt is not None:
            x = torch.cat([prompt, x], dim=1)
        return self._sample(self.transformer.forward_cached(x, caches, outputs=1), noise, decode_steps)

    def step_rows(self, previous: torch.Tensor, row_caches: Sequence[list[KVCache]], noise: torch.Tensor,
                  decode_steps: int) -> StepOutput:  # fmt: skip
        """One step of B replies at once, each after its own caches (of any lengths):
        previous [B, 1, latent_dim] (each reply's last latent), noise [B, latent_dim]. Each
        row's result is bit for bit the one-row step's (see `Transformer.forward_rows`)."""
        hidden = self.transformer.forward_rows(self.input_linear(previous), row_caches)
        return self._sample(hidden, noise, decode_steps)

    def _sample(self, hidden: torch.Tensor, noise: torch.Tensor, decode_steps: int) -> StepOutput:
        """The next latent and the EOS logits from the transformer's last output per row."""
        hidden = self.out_norm(hidden[:, -1])
        if self.z_proj is not None:
            hidden = self.z_proj(hidden)
        eos_logits = self.out_eos(hidden)
        latent = self.sampler.sample(self.flow_net, hidden, noise, decode_steps)
        return StepOutput(latent[:, None, :], eos_logits)
