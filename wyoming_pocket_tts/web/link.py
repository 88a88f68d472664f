"""What the voices page needs from the server it runs in, as plain data and a Protocol.

The page imports nothing from `wyoming_pocket_tts.server`: the server implements
`VoiceServer` (server/web_link.py) and hands it over when it starts the page, so the
layers stay core <- voices <- web <- server. The voices are the very list `describe`
answers with (names as advertised, unique across the server's models).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from ..core import VoiceInfo
from ..voices.config import ModelScope

# How far a voice is from being spoken: in memory; being encoded; its encoding failed;
# not in memory (encoded, or loaded from the disk cache, at its first use); its model is
# loading; or its model is not loaded (it loads at the voice's first use).
EncodingState = Literal["ready", "encoding", "failed", "pending", "model_loading", "model_unloaded"]


@dataclass(frozen=True)
class ServedModel:
    index: int
    name: str
    label: str
    languages: tuple[str, ...]
    # Which voices-file entries are its (None: the server's only model).
    scope: ModelScope | None
    loaded: bool


@dataclass(frozen=True)
class ServedVoice:
    """One voice of `describe`, with what the page shows beyond it."""

    name: str  # as advertised: what requests (and the page's URLs) name it by
    model: int  # index into `VoiceServer.models()`
    library_name: str  # its name in its model's voice library
    info: VoiceInfo
    default: bool
    encoding: EncodingState
    # Why its encoding failed (encoding == "failed").
    error: str | None = None


class VoiceServer(Protocol):
    """The server, as the page uses it. Methods run on the event loop."""

    @property
    def wyoming_uri(self) -> str:
        """Where the server's Wyoming listener is (the page's previews connect there)."""
        ...

    @property
    def voices_file(self) -> Path:
        """The voices file the page writes (the server reads it)."""
        ...

    @property
    def voices_dir(self) -> Path: ...

    @property
    def fixed_default(self) -> str | None:
        """The default voice given on the command line (--voice), which the voices
        file's `default:` cannot override; None if not given."""
        ...

    def models(self) -> Sequence[ServedModel]: ...

    def voices(self) -> list[ServedVoice]:
        """The voices as `describe` lists them now, default first."""
        ...

    async def refresh(self) -> None:
        """Re-read the voices file and folder now (the next `describe` lists the change)."""
        ...
