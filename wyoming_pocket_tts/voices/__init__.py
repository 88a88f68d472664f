"""Household voices: a voices file and directory, an in-memory LRU and a disk cache.

`VoiceLibrary` (it needs the engine, hence torch) is imported on first use (PEP 562), so
that the torch-free listing of the voices (`catalog`, `config`) is quick to import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .catalog import preview_voices
from .config import VoiceConfigError, VoiceInfo, VoiceLibraryConfig

if TYPE_CHECKING:
    from .library import VoiceLibrary


def __getattr__(name: str) -> Any:
    if name == "VoiceLibrary":
        from .library import VoiceLibrary

        return VoiceLibrary
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["VoiceConfigError", "VoiceInfo", "VoiceLibrary", "VoiceLibraryConfig", "preview_voices"]
