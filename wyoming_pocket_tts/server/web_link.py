"""The server as the voices page sees it (`web.link.VoiceServer`), and the page's start.

The page lists the very voices `describe` answers with (the model pool's advertised
names), asks each model's library how far a voice is encoded, and after each change
re-reads the voices the way a `describe` does, so the next `describe` lists the change.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..voices.config import VoiceConfigError, VoiceLibraryConfig, page_voices_file
from ..web.link import EncodingState, ServedModel, ServedVoice
from .models import ModelEntry

if TYPE_CHECKING:
    from .app import ServerConfig
    from .service import TtsService


def with_page_voices_file(library: VoiceLibraryConfig) -> VoiceLibraryConfig:
    """The library config the page writes to: the given voices file, or else the voices
    folder's own (created, empty, if missing), which the library then reads."""
    from ..web.store import ensure_voices_file

    if library.voices_file is not None:
        return library
    path = page_voices_file(library.effective_voices_dir)
    ensure_voices_file(path)
    return replace(library, voices_file=path)


@dataclass
class ServiceLink:
    """`VoiceServer` over a running `TtsService`. Methods run on the event loop."""

    config: ServerConfig
    service: TtsService

    @property
    def wyoming_uri(self) -> str:
        return self.config.uri

    @property
    def voices_file(self) -> Path:
        path = self.config.library.voices_file
        if path is None:
            raise VoiceConfigError("the voices page needs a voices file (see with_page_voices_file)")
        return path

    @property
    def voices_dir(self) -> Path:
        return self.config.library.effective_voices_dir

    @property
    def fixed_default(self) -> str | None:
        return self.config.library.default_voice

    def _entries(self) -> Sequence[ModelEntry]:
        return self.service.pool.entries

    def models(self) -> list[ServedModel]:
        return [
            ServedModel(index=index, name=entry.name, label=entry.label, languages=_languages(entry),
                        scope=self.config.library_for(index).scope, loaded=entry.backend is not None)
            for index, entry in enumerate(self._entries())
        ]  # fmt: skip

    def voices(self) -> list[ServedVoice]:
        pool = self.service.pool
        entries = list(self._entries())
        listed = []
        for position, voice in enumerate(pool.voices()):
            route = pool.route(voice.name)
            index = entries.index(route.entry)
            name = route.voice or voice.name
            loading = route.entry.loading is not None or (index == 0 and self.service.loading)
            encoding, error = _encoding(route.entry, name, loading)
            listed.append(ServedVoice(name=voice.name, model=index, library_name=name, info=voice,
                                      default=position == 0, encoding=encoding, error=error))  # fmt: skip
        return listed

    async def refresh(self) -> None:
        await asyncio.to_thread(self.service.pool.refresh)


def _languages(entry: ModelEntry) -> tuple[str, ...]:
    """The model's languages (the default model's entry leaves them to its voices)."""
    if entry.languages:
        return tuple(entry.languages)
    voices = entry.voices
    return tuple(voices[0].languages) if voices else ()


def _encoding(entry: ModelEntry, name: str, loading: bool) -> tuple[EncodingState, str | None]:
    if entry.backend is None:
        return ("model_loading" if loading else "model_unloaded"), None
    state = getattr(entry.backend.voices, "encoding_state", None)
    if state is None:
        return "pending", None
    found, error = state(name)
    return found, error
