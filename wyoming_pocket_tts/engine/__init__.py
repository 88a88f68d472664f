"""Our CPU streaming implementation of the Pocket TTS model family.

    model = load_model("english")                 # or "demo", or a YAML config path
    voice = model.voice_from_predefined("alba")   # or voice_from_recording / voice_from_file
    for frame in model.synthesize("Hello there.", voice):
        ...                                       # float32 [1920] at 24 kHz, as decoded

The names below are imported on first use (PEP 562): the torch-free parts (`catalog`,
`errors`, `demo`) can then be used without importing torch, which takes seconds; the server
lists its voices from them while the model is still loading.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .catalog import catalog
    from .errors import EngineError, ModelLoadError, TextError, VoiceError
    from .loading import build_demo_model, build_model, load_model
    from .model import SpeechSession, TTSModel
    from .options import GenerationOptions
    from .voice import VoiceState

# public name -> the submodule that defines it
_EXPORTS = {
    "catalog": "catalog",
    "EngineError": "errors",
    "ModelLoadError": "errors",
    "TextError": "errors",
    "VoiceError": "errors",
    "build_demo_model": "loading",
    "build_model": "loading",
    "load_model": "loading",
    "SpeechSession": "model",
    "TTSModel": "model",
    "GenerationOptions": "options",
    "VoiceState": "voice",
}


def __getattr__(name: str) -> Any:
    if name == "CATALOG":
        return import_module(".catalog", __name__).catalog()
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{module}", __name__), name)


__all__ = ["CATALOG", *_EXPORTS]
