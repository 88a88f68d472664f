"""Household voices: a voices file and directory, an in-memory LRU and a disk cache.

The configuration (`config.py`) imports no torch, so the server and the command line use
it directly; the library itself encodes voices with the engine and is imported on first
use of `VoiceLibrary` / `preview_voices` (PEP 562), which only the model loader does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core import VoiceInfo
from .config import VoiceConfigError, VoiceLibraryConfig

if TYPE_CHECKING:
    from .library import VoiceLibrary, preview_voices

__all__ = ["VoiceConfigError", "VoiceInfo", "VoiceLibrary", "VoiceLibraryConfig", "preview_voices"]


def __getattr__(name: str) -> Any:
    if name in ("VoiceLibrary", "preview_voices"):
        from . import library

        return getattr(library, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
