"""Our CPU streaming implementation of the Pocket TTS model family.

    model = load_model("english")                 # or "demo", or a YAML config path
    voice = model.voice_from_predefined("alba")   # or voice_from_recording / voice_from_file
    for frame in model.synthesize("Hello there.", voice):
        ...                                       # float32 [1920] at 24 kHz, as decoded

The torch-free core (errors, options, the contract the classes below implement) is
imported at once. The rest is imported on first use (PEP 562): the torch-free parts
(`catalog`, `demo`) can then be used without importing torch, which takes seconds; the
server lists its voices from them while the model is still loading.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from ..core import (
    EngineError,
    GenerationOptions,
    ModelLike,
    ModelLoadError,
    SessionLike,
    TextError,
    VoiceError,
    VoiceStateLike,
)

if TYPE_CHECKING:
    from .catalog import catalog
    from .loading import build_demo_model, build_model, load_model, quantize_model
    from .model import SpeechSession, TTSModel
    from .precision import measure_precisions, runtime_identity
    from .voice import VoiceState

# public name -> the submodule that defines it
_LAZY_EXPORTS = {
    "catalog": "catalog",
    "build_demo_model": "loading",
    "build_model": "loading",
    "load_model": "loading",
    "quantize_model": "loading",
    "measure_precisions": "precision",
    "runtime_identity": "precision",
    "SpeechSession": "model",
    "TTSModel": "model",
    "VoiceState": "voice",
}


def __getattr__(name: str) -> Any:
    if name == "CATALOG":
        return import_module(".catalog", __name__).catalog()
    module = _LAZY_EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{module}", __name__), name)


__all__ = [
    "CATALOG",
    "EngineError",
    "GenerationOptions",
    "ModelLike",
    "ModelLoadError",
    "SessionLike",
    "TextError",
    "VoiceError",
    "VoiceStateLike",
    *_LAZY_EXPORTS,
]
