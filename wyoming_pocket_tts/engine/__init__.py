"""Our CPU streaming implementation of the Pocket TTS model family.

    model = load_model("english")                 # or "demo", or a YAML config path
    voice = model.voice_from_predefined("alba")   # or voice_from_recording / voice_from_file
    for frame in model.synthesize("Hello there.", voice):
        ...                                       # float32 [1920] at 24 kHz, as decoded
"""

from .catalog import catalog
from .errors import EngineError, ModelLoadError, TextError, VoiceError
from .loading import build_demo_model, build_model, load_model
from .model import SpeechSession, TTSModel
from .options import GenerationOptions
from .voice import VoiceState

CATALOG = catalog()

__all__ = [
    "CATALOG",
    "EngineError",
    "GenerationOptions",
    "ModelLoadError",
    "SpeechSession",
    "TTSModel",
    "TextError",
    "VoiceError",
    "VoiceState",
    "build_demo_model",
    "build_model",
    "load_model",
]
