"""Transformer building blocks shared by the FlowLM and the Mimi codec.

Module and parameter names follow the released weight files, so their state dicts load
without renaming. Attention comes in two flavours, one per way the model is run:

* `attend_cached` (FlowLM): a request's preallocated cache, which starts with a copy of
  the voice prompt's keys and values.
* `attend_window` (Mimi encoder and decoder, streamed): a sliding window of the last
  `context` positions.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .kernels import Linear


class RotaryTable:
    """Rotations of the rotary embedding for positions [0, size), as unit complex numbers
    [size, 1, head_dim // 2], grown on demand.

    The angles are computed in float32 exactly as position * frequency, so a table lookup
    gives the same values as computing them per step.
    """

    def __init__(self, head_dim: int, max_period: float) -> None:
        # Explicitly on the CPU: the network may be built on the meta device before loading.
        steps = torch.arange(head_dim // 2, dtype=torch.float32, device="cpu")
        self.frequencies = torch.exp(steps * (-math.log(max_period) * 2 / head_dim))
        self._rotations = torch.empty(0, 1, head_dim // 2, dtype=torch.complex64, device="cpu")

    def lookup(self, start: int, length: int) -> torch.Tensor:
        end = start + length
        rotations = self._rotations  # one read: another thread may swap in a bigger table
        if rotations.shape[0] < end:
            size = max(end, 2 * rotations.shape[0], 512)
            angles = self.frequencies * torch.arange(size, dtype=torch.float32).view(-1, 1, 1)
            rotations = self._rotations = torch.polar(torch.ones_like(angles), angles)
        return rotations[start:end]


def apply_rotary(x: torch.Tensor, rotations: torch.Tensor) -> torch.Tensor:
    """Rotate interleaved (real, imaginary) pairs of float32 x [B, T, H, D]: one complex product."""
    pairs = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(pairs * rotations).flatten(-2)


@dataclass
class KVCache:
    """One FlowLM layer's keys and values for one request, [B, H_kv, capacity, D], of which
    the first `length` positions are filled: the voice prompt's (copied in when the request
    starts: a few MB, and attention then reads one contiguous buffer), then the request's.
    """

    k: torch.Tensor
    v: torch.Tensor
    length: int = 0

    @property
    def position(self) -> int:
        return self.length


@dataclass
class WindowCache:
    """Keys and values of a sliding-window layer, [B, H, capacity, D], of which positions
    [start, end) are live: at most the last `context - 1`, plus the ones being added.

    New positions are written after the live ones; only when the buffer is full are the
    live ones moved back to the front, so most steps copy nothing but their own keys.
    """

    k: torch.Tensor
    v: torch.Tensor
    start: int = 0
    end: int = 0
    position: int = 0

    def append(self, k: torch.Tensor, v: torch.Tensor, context: int) -> tuple[torch.Tensor, torch.Tensor, int]:
        """Add t positions; returns the live keys and values and how many came before."""
        t = k.shape[2]
        keep = min(self.end - self.start, context - 1)
        start = self.end - keep
        if self.end + t > self.k.shape[2]:
            capacity = max(2 * (context - 1 + t), self.k.shape[2])
            shape = (k.shape[0], k.shape[1], capacity, k.shape[3])
            new_k, new_v = self.k.new_empty(shape), self.v.new_empty(shape)
            new_k[:, :, :keep] = self.k[:, :, start : self.end]
            new_v[:, :, :keep] = self.v[:, :, start : self.end]
            self.k, self.v, start = new_k, new_v, 0
        self.k[:, :, start + keep : start + keep + t] = k
        self.v[:, :, start + keep : start + keep + t] = v
        self.start, self.end = start, start + keep + t
        self.position += t
        return self.k[:, :, start : self.end], self.v[:, :, start : self.end], keep


def attend_cached(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """Causal attention over everything cached and t new positions, for queries at the
    last n of them. q [B, H, n, D]; k, v [B, H_kv, t, D]; query heads are grouped over the
    key/value heads (head h reads kv head h // group)."""
    t, queries = k.shape[2], q.shape[2]
    start, end = cache.length, cache.length + t
    cache.k[:, :, start:end] = k
    cache.v[:, :, start:end] = v
    cache.length = end
    mask = None
    if queries > 1:  # query i sits at position end - n + i and may read keys up to it
        mask = torch.arange(end).view(1, -1) <= torch.arange(end - queries, end).view(-1, 1)
    return F.scaled_dot_product_attention(
        q, cache.k[:, :, :end], cache.v[:, :, :end], attn_mask=mask, enable_gqa=q.shape[1] != k.shape[1]
    )


def attend_window(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cache: WindowCache, context: int) -> torch.Tensor:
    """Attention of t new positions over the previous `context - 1` positions and themselves."""
    t = q.shape[2]
    keys, values, history = cache.append(k, v, context)
    return F.scaled_dot_product_attention(q, keys, values, attn_mask=_window_mask(t, history, context))


@functools.lru_cache(maxsize=64)
def _window_mask(t: int, history: int, context: int) -> torch.Tensor:
    # query i (absolute position p + i) reads key j (absolute p - history + j) when
    # 0 <= distance < context
    distance = torch.arange(t).view(-1, 1) + history - torch.arange(history + t).view(1, -1)
    return (distance >= 0) & (distance < context)


class LayerScale(nn.Module):
    def __init__(self, channels: int, init: float) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.full((channels,), init))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scale * x


def _add_scaled(x: torch.Tensor, update: torch.Tensor, layer_scale: LayerScale | None) -> torch.Tensor:
    """The residual x + layer_scale(update), in one operation (a step runs hundreds)."""
    return x + update if layer_scale is None else torch.addcmul(x, layer_scale.scale, update)


class SelfAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int, attn_dim: int | None = None, num_kv_heads: int | None = None) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.attn_dim = attn_dim or d_model
        self.num_kv_heads = num_kv_heads or num_heads
        self.head_dim = self.attn_dim // num_heads
        kv_dim = self.head_dim * self.num_kv_heads
        self.in_proj = Linear(d_model, self.attn_dim + 2 * kv_dim, bias=False)
        self.out_proj = Linear(self.attn_dim, d_model, bias=False)

    def project(self, x: torch.Tensor, rotations: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q [B, H, t, D] and k, v [B, H_kv, t, D] of x [B, t, C], rotated by `rotations`
        ([t, 1, D/2] for one reply's positions, or [B, 1, 1, D/2]: one position per row)."""
        b, t, _ = x.shape
        projected = self.in_proj(x)
        # q and k are adjacent in the projection: one rotation for both
        heads = projected[..., : self.attn_dim + self.head_dim * self.num_kv_heads].view(b, t, -1, self.head_dim)
        rotated = apply_rotary(heads, rotations)
        q, k = rotated[:, :, : self.num_heads], rotated[:, :, self.num_heads :]
        v = projected[..., self.attn_dim + self.head_dim * self.num_kv_heads :].view(b, t, self.num_kv_heads, self.head_dim)
        return q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)

    def output(self, attended: torch.Tensor) -> torch.Tensor:
        b, _, t, _ = attended.shape
        return self.out_proj(attended.transpose(1, 2).reshape(b, t, self.attn_dim))


class TransformerLayer(nn.Module):
    """Pre-norm layer: x + attention(norm1(x)), then x + FFN(norm2(x)), GELU (tanh)."""

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dim_feedforward: int,
        layer_scale: float | None = None,
        attn_dim: int | None = None,
        num_kv_heads: int | None = None,
    ) -> None:
        super().__init__()
        self.self_attn = SelfAttention(d_model, num_heads, attn_dim, num_kv_heads)
        self.norm1 = nn.LayerNorm(d_model, eps=1e-5)
        self.norm2 = nn.LayerNorm(d_model, eps=1e-5)
        self.linear1 = Linear(d_model, dim_feedforward, bias=False)
        self.linear2 = Linear(dim_feedforward, d_model, bias=False)
        self.layer_scale_1 = None if layer_scale is None else LayerScale(d_model, layer_scale)
        self.layer_scale_2 = None if layer_scale is None else LayerScale(d_model, layer_scale)

    def feed_forward(self, x: torch.Tensor) -> torch.Tensor:
        update = self.linear2(F.gelu(self.linear1(self.norm2(x)), approximate="tanh"))
        return _add_scaled(x, update, self.layer_scale_2)


class Transformer(nn.Module):
    """A stack of layers sharing one rotary table; run in one of two attention modes."""

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        num_layers: int,
        dim_feedforward: int,
        max_period: float = 10000.0,
        layer_scale: float | None = None,
        context: int | None = None,
        attn_dim: int | None = None,
        num_kv_heads: int | None = None,
    ) -> None:
        super().__init__()
        self.context = context
        self.layers = nn.ModuleList(
            TransformerLayer(d_model, num_heads, dim_feedforward, layer_scale, attn_dim, num_kv_heads)
            for _ in range(num_layers)
        )
        first = self.layers[0].self_attn
        self.num_kv_heads, self.head_dim = first.num_kv_heads, first.head_dim
        self.rotary = RotaryTable(first.head_dim, max_period)

    def forward_cached(self, x: torch.Tensor, caches: list[KVCache], outputs: int | None = None) -> torch.Tensor:
        """x [B, t, C] after what `caches` hold; returns the last `outputs` positions'
        outputs (all with None). Every position's keys and values go into the caches, but
        the last layer's attention and feed-forward, which only make outputs, run for
        the wanted positions alone: an eighth of a prompt's work with six layers."""
        rotations = self.rotary.lookup(caches[0].position, x.shape[1])
        return self._layers(x, rotations, lambda i, q, k, v: attend_cached(q, k, v, caches[i]), outputs)

    def forward_rows(self, x: torch.Tensor, row_caches: Sequence[list[KVCache]]) -> torch.Tensor:
        """One new position for each of B replies, x [B, 1, C], each after what its own
        caches hold (of any lengths). The products take the B rows at once (each as it
        would be alone, see `kernels.rows_linear`); attention runs per reply, over its own
        cache, exactly as for that reply alone."""
        rotations = torch.cat([self.rotary.lookup(caches[0].position, 1) for caches in row_caches])
        rows = range(len(row_caches))

        def attend(i: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            return torch.cat([attend_cached(q[r : r + 1], k[r : r + 1], v[r : r + 1], row_caches[r][i]) for r in rows])

        return self._layers(x, rotations.unsqueeze(1), attend)

    def forward_window(self, x: torch.Tensor, caches: list[WindowCache]) -> torch.Tensor:
        context = self.context
        assert context is not None
        rotations = self.rotary.lookup(caches[0].position, x.shape[1])
        return self._layers(x, rotations, lambda i, q, k, v: attend_window(q, k, v, caches[i], context))

    def _layers(self, x: torch.Tensor, rotations: torch.Tensor,
                attend: Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
                outputs: int | None = None) -> torch.Tensor:  # fmt: skip
        """Run every layer; `attend(layer index, q, k, v)` is the mode's attention, and
        the last layer computes only the last `outputs` positions (None: all)."""
        last = len(self.layers) - 1
        for index, layer in enumerate(self.layers):
            q, k, v = layer.self_attn.project(layer.norm1(x), rotations)
            if index == last and outputs is not None and outputs < x.shape[1]:
                x, q = x[:, x.shape[1] - outputs :], q[:, :, q.shape[2] - outputs :]
            x = _add_scaled(x, layer.self_attn.output(attend(index, q, k, v)), layer.layer_scale_1)
            x = layer.feed_forward(x)
        return x

    def new_window_caches(self, batch: int = 1) -> list[WindowCache]:
        empty = torch.zeros(batch, self.num_kv_heads, 0, self.head_dim)
        return [WindowCache(empty, empty.clone()) for _ in self.layers]

    def new_caches(self, prefix: list[tuple[torch.Tensor, torch.Tensor]], capacity: int) -> list[KVCache]:
        """Per-layer caches holding `prefix` (k, v per layer), with room for `capacity` more."""
        caches = []
        for prefix_k, prefix_v in prefix:
            filled = prefix_k.shape[2]
            shape = (prefix_k.shape[0], self.num_kv_heads, filled + capacity, self.head_dim)
            cache = KVCache(torch.empty(shape), torch.empty(shape), filled)
            cache.k[:, :, :filled] = prefix_k
            cache.v[:, :, :filled] = prefix_v
            caches.append(cache)
        return caches
