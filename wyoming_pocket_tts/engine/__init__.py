"""Our CPU streaming implementation of the Pocket TTS model family.

    model = load_model("english")                 # or "demo", or a YAML config path
    voice = model.voice_from_predefined("alba")   # or voice_from_recording / voice_from_file
    for frame in model.synthesize("Hello there.", voice):
        ...                                       # float32 [1920] at 24 kHz, as decoded
"""

# The torch-free core: errors, options and the contract the classes below implement.
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
from .catalog import catalog
from .loading import build_demo_model, build_model, load_model
from .model import SpeechSession, TTSModel
from .voice import VoiceState

CATALOG = catalog()

__all__ = [
    "CATALOG",
    "EngineError",
    "GenerationOptions",
    "ModelLike",
    "ModelLoadError",
    "SessionLike",
    "SpeechSession",
    "TTSModel",
    "TextError",
    "VoiceError",
    "VoiceState",
    "VoiceStateLike",
    "build_demo_model",
    "build_model",
    "load_model",
]
