"""The released Pocket TTS models by name, and the predefined voices each one offers."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

_CATALOG_FILE = Path(__file__).with_name("catalog.json")

# Exported states of the predefined voices live beside the open weights, one folder per model.
_VOICE_STATES_REPO = "hf://kyutai/pocket-tts-without-voice-cloning"
_VOICE_STATES_REVISION = "a7056f505a4a8ca72d8b5fb1440071d6f1a35739"

ENGLISH_VOICES = (
    "alba", "marius", "javert", "jean", "fantine", "cosette", "eponine", "azelma", "anna",
    "vera", "charles", "paul", "george", "mary", "jane", "michael", "eve", "bill_boerst",
    "peter_yearsley", "stuart_bell", "caro_davy",
)  # fmt: skip
# language prefix of a model name -> (ISO 639-1 code, predefined voices, the first is the default)
_LANGUAGES: dict[str, tuple[str, tuple[str, ...]]] = {
    "english": ("en", ENGLISH_VOICES),
    "french": ("fr", ("estelle",)),
    "german": ("de", ("juergen",)),
    "italian": ("it", ("giovanni",)),
    "portuguese": ("pt", ("rafael",)),
    "spanish": ("es", ("lola",)),
    "dutch": ("nl", ("daan",)),
}


@dataclass(frozen=True)
class CatalogEntry:
    name: str
    language: str
    voices: tuple[str, ...]
    config: dict[str, Any]

    def voice_state_path(self, voice: str) -> str:
        return (
            f"{_VOICE_STATES_REPO}/languages/{self.name}/embeddings/{voice}.safetensors"
            f"@{_VOICE_STATES_REVISION}"
        )


@cache
def catalog() -> dict[str, CatalogEntry]:
    """Every released model, by the name upstream gives its config."""
    raw: dict[str, dict[str, Any]] = json.loads(_CATALOG_FILE.read_text(encoding="utf-8"))
    entries = {}
    for name, config in raw.items():
        language, voices = _LANGUAGES[name.split("_")[0]]
        entries[name] = CatalogEntry(name, language, voices, config)
    return entries


def language_of(name: str) -> str | None:
    """ISO code for a model or config name that starts with a language ("german_24l")."""
    entry = _LANGUAGES.get(Path(name).stem.split("_")[0].lower())
    return entry[0] if entry else None
