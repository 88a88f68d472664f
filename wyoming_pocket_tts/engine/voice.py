"""Voice states: the FlowLM's keys and values after the voice prompt.

A state is computed once per voice and read, never written, by every request. On disk
it uses upstream's exported layout, one safetensors file with, per attention layer,
`<module>/cache` [2, 1, T, kv_heads, head_dim], `<module>/offset` and `<module>/pad`,
so states move freely between upstream and us. We add metadata naming the model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..core.errors import VoiceError
from ..core.files import read_regular, unreadable
from ..core.logsafe import escape

FORMAT = "wyoming-pocket-tts/1"
# A state holds the keys and values of at most a 30 s prompt: tens of megabytes for the
# largest models. A bigger file is not a voice state, and is not read into memory.
MAX_STATE_BYTES = 512 << 20


@dataclass(frozen=True)
class VoiceState:
    model_id: str
    # Per FlowLM layer: keys and values [1, kv_heads, prompt_length, head_dim].
    layers: tuple[tuple[torch.Tensor, torch.Tensor], ...]

    @property
    def prompt_length(self) -> int:
        return self.layers[0][0].shape[2]

    @property
    def nbytes(self) -> int:
        return sum(k.nbytes + v.nbytes for k, v in self.layers)


def _layer_key(index: int) -> str:
    return f"transformer.layers.{index}.self_attn"


def save_voice_state(state: VoiceState, path: Path) -> None:
    from safetensors.torch import save_file

    tensors = {}
    length = state.prompt_length
    for index, (k, v) in enumerate(state.layers):
        name = _layer_key(index)
        tensors[f"{name}/cache"] = torch.stack([k, v]).transpose(2, 3).contiguous()
        tensors[f"{name}/offset"] = torch.tensor([length], dtype=torch.long)
        tensors[f"{name}/pad"] = torch.zeros(1, dtype=torch.long)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Written beside and renamed, so a crash never leaves half a file under the real name.
    partial = path.with_name(path.name + ".partial")
    save_file(tensors, str(partial), metadata={"format": FORMAT, "model_id": state.model_id})
    partial.replace(path)


def load_voice_state(path: Path, model_id: str, num_layers: int, kv_heads: int, head_dim: int) -> VoiceState:
    """Read an exported state (ours or upstream's) and check it fits this model."""
    from safetensors.torch import load

    data = _read_state_file(path)
    shown = escape(path)  # a file name may hold a newline: one log line
    try:
        tensors = load(data)
        metadata = _metadata(data)
    except Exception as err:  # noqa: BLE001 -- safetensors raises several unrelated types
        raise VoiceError(f"voice state {shown} is not a readable safetensors file: {escape(err)}") from None
    del data
    made_for = metadata.get("model_id")
    if made_for is not None and made_for != model_id:
        raise VoiceError(f"voice state {shown} was made for model {made_for!r}, not {model_id!r}")
    layers = []
    for index in range(num_layers):
        name = _layer_key(index)
        cache = tensors.get(f"{name}/cache")
        if cache is None:
            raise VoiceError(f"voice state {shown} has no layer {index}: it was made for another model")
        if cache.dim() != 5 or cache.shape[0] != 2 or cache.shape[1] != 1 or tuple(cache.shape[3:]) != (kv_heads, head_dim):
            raise VoiceError(
                f"voice state {shown} has layers of shape {tuple(cache.shape)}: it was made for another model"
            )
        offset = tensors.get(f"{name}/offset")
        # Older exports kept the length as the size of a `current_end` tensor.
        legacy_end = tensors.get(f"{name}/current_end")
        length = int(offset.view(-1)[0]) if offset is not None else (
            legacy_end.shape[0] if legacy_end is not None else cache.shape[2])
        pad = tensors.get(f"{name}/pad")
        start = int(pad.view(-1)[0]) if pad is not None else 0
        kv = cache[:, :, start:length].float().transpose(2, 3).contiguous()
        if kv.shape[2] == 0 or not torch.isfinite(kv).all():
            raise VoiceError(f"voice state {shown} is empty or corrupt")
        layers.append((kv[0], kv[1]))
    if f"{_layer_key(num_layers)}/cache" in tensors:
        raise VoiceError(f"voice state {shown} has more than {num_layers} layers: it was made for another model")
    return VoiceState(model_id, tuple(layers))


def _read_state_file(path: Path) -> bytes:
    """The file's bytes, read once through a regular-file check (a FIFO or a device named
    as a state never blocks the reader, see `core.files`), at most MAX_STATE_BYTES."""
    try:
        return read_regular(path, MAX_STATE_BYTES)
    except OSError as err:
        raise VoiceError(unreadable("voice state", path, err)) from None


def _metadata(data: bytes) -> dict[str, Any]:
    """The `__metadata__` of a safetensors file's header (8 bytes of length, then JSON)."""
    size = int.from_bytes(data[:8], "little")
    metadata = json.loads(data[8 : 8 + size]).get("__metadata__") or {}
    return dict(metadata)
