"""What the engine, the voices library and the server share, without torch.

The server, the command line and the voices configuration import these modules directly, so
`--help`, the first `describe` and the tests of the server never load the engine.
`wyoming_pocket_tts.engine` re-exports them next to its own public API.
"""

from .contract import ModelLike, SessionLike, VoiceSource, VoiceStateLike
from .errors import EngineError, ModelLoadError, TextError, VoiceError
from .model_names import MODEL_CONFIG_SUFFIXES, names_config_file
from .options import GenerationOptions
from .voices import VoiceInfo, VoiceKind

__all__ = [
    "EngineError",
    "GenerationOptions",
    "MODEL_CONFIG_SUFFIXES",
    "ModelLike",
    "ModelLoadError",
    "SessionLike",
    "TextError",
    "VoiceError",
    "VoiceInfo",
    "VoiceKind",
    "VoiceSource",
    "VoiceStateLike",
    "names_config_file",
]
