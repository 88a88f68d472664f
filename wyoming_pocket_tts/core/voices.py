"""How one voice is described to clients: the voices library makes it, `describe` sends it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

VoiceKind = Literal["predefined", "recording", "state"]


@dataclass(frozen=True)
class VoiceInfo:
    """One voice as the server advertises it, and the settings it carries.

    `settings` holds the per-voice values of the voices file (e.g. temperature), keyed by
    setting name (see `wyoming_pocket_tts.settings`), already validated.
    """

    name: str
    description: str
    languages: tuple[str, ...]
    kind: VoiceKind = "predefined"
    attribution_name: str | None = None
    attribution_url: str | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Callers pass lists; a tuple and a read-only mapping keep the frozen object frozen.
        object.__setattr__(self, "languages", tuple(self.languages))
        object.__setattr__(self, "settings", MappingProxyType(dict(self.settings)))

    def __hash__(self) -> int:
        return hash((self.name, self.kind, self.languages))
