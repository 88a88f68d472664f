"""Household voices: a voices file and directory, an in-memory LRU and a disk cache."""

from .config import VoiceConfigError, VoiceInfo, VoiceLibraryConfig
from .library import VoiceLibrary, preview_voices

__all__ = ["VoiceConfigError", "VoiceInfo", "VoiceLibrary", "VoiceLibraryConfig", "preview_voices"]
