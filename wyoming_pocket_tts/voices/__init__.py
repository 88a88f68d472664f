"""Household voices: a voices file and directory, an in-memory LRU and a disk cache.

The configuration (`config.py`) and the listing of the voices (`catalog.py`) import no
torch, so the server and the command line use them directly; `VoiceLibrary` encodes voices
with the engine and is imported on first use (PEP 562), which only the model loader does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core import VoiceInfo
from .catalog import preview_voices
from .config import VoiceConfigError, VoiceLibraryConfig

if TYPE_CHECKING:
    from .library import VoiceLibrary

__all__ = ["VoiceConfigError", "VoiceInfo", "VoiceLibrary", "VoiceLibraryConfig", "preview_voices"]


def __getattr__(name: str) -> Any:
    if name == "VoiceLibrary":
        from .library import VoiceLibrary

        return VoiceLibrary
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
