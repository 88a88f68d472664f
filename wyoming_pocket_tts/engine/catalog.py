"""The released Pocket TTS models by name, and the predefined voices each one offers."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

_CATALOG_FILE = Path(__file__).with_name("catalog.json")

# Exported states of the predefined voices live beside the open weights, one folder per model
# (`languages/<model>/embeddings/<voice>.safetensors`), at the revision upstream pocket-tts
# 4.0.1 pins in `get_predefined_voice` for every model.
_VOICE_STATES_REPO = "hf://kyutai/pocket-tts-without-voice-cloning"
_VOICE_STATES_REVISION = "a7056f505a4a8ca72d8b5fb1440071d6f1a35739"

# Every released model has a state of each of these voices: upstream exports each voice of
# `_ORIGINS_OF_PREDEFINED_VOICES` for each config (scripts/generate_default_voices.py) and
# serves any of them on any model (`get_predefined_voice(config, name)`); the release's
# folders list the same 27 files (languages/german/embeddings, as a German peer,
# marco-taylor/pocket-tts-german-wyoming, pins them; german_24l and the english_2026-09
# models too, per go-pocket-tts's checksums). The recordings behind them: English speakers
# first, then one voice for each other language, in upstream's order.
PREDEFINED_VOICES = (
    "alba", "marius", "javert", "jean", "fantine", "cosette", "eponine", "azelma", "anna",
    "vera", "charles", "paul", "george", "mary", "jane", "michael", "eve", "bill_boerst",
    "peter_yearsley", "stuart_bell", "caro_davy",
    "giovanni", "lola", "juergen", "rafael", "daan", "estelle",
)  # fmt: skip
# language prefix of a model name -> (ISO 639-1 code, its default voice, upstream's
# DEFAULT_VOICE_FOR_LANGUAGE): the voice recorded in that language.
_LANGUAGES: dict[str, tuple[str, str]] = {
    "english": ("en", "alba"),
    "french": ("fr", "estelle"),
    "german": ("de", "juergen"),
    "italian": ("it", "giovanni"),
    "portuguese": ("pt", "rafael"),
    "spanish": ("es", "lola"),
    "dutch": ("nl", "daan"),
}
# The language each voice was recorded in: the 21 English speakers, and each default.
_NATIVE_LANGUAGE = {voice: "en" for voice in PREDEFINED_VOICES[:21]} | {
    voice: code for code, voice in _LANGUAGES.values()}  # fmt: skip


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
        language, default = _LANGUAGES[name.split("_")[0]]
        voices = (default, *(voice for voice in PREDEFINED_VOICES if voice != default))
        entries[name] = CatalogEntry(name, language, voices, config)
    return entries


def native_language(voice: str) -> str | None:
    """The language a predefined voice was recorded in (None for any other name)."""
    return _NATIVE_LANGUAGE.get(voice)


def language_of(name: str) -> str | None:
    """ISO code for a model or config name that starts with a language ("german_24l")."""
    entry = _LANGUAGES.get(Path(name).stem.split("_")[0].lower())
    return entry[0] if entry else None
