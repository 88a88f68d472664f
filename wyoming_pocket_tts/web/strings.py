"""The page's text, one translations file per language (`translations/<code>.yaml`),
English first: like the add-on's own translations, a flat mapping of keys to strings.

A language's file may leave keys out: English fills them. The browser's Accept-Language
chooses the language (Home Assistant's ingress passes it on).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

import yaml

FALLBACK = "en"


@dataclass(frozen=True)
class Strings:
    by_language: dict[str, dict[str, str]]

    @classmethod
    def load(cls) -> Strings:
        folder = resources.files(__package__).joinpath("translations")
        found: dict[str, dict[str, str]] = {}
        for entry in folder.iterdir():
            if entry.name.endswith(".yaml"):
                data = yaml.safe_load(entry.read_text(encoding="utf-8")) or {}
                found[entry.name.removesuffix(".yaml")] = {str(key): str(value) for key, value in data.items()}
        return cls(found)

    def choose(self, accept_language: str) -> str:
        """The best of our languages for an Accept-Language header (by its q values)."""
        wanted: list[tuple[float, int, str]] = []
        for position, item in enumerate(accept_language.split(",")):
            code, _, params = item.strip().partition(";")
            quality = 1.0
            if params.strip().startswith("q="):
                try:
                    quality = float(params.strip()[2:])
                except ValueError:
                    quality = 0.0
            if code:
                wanted.append((-quality, position, code.strip().lower()))
        for _, _, code in sorted(wanted):
            for candidate in (code, code.split("-", 1)[0]):
                if candidate in self.by_language:
                    return candidate
        return FALLBACK

    def merged(self, language: str) -> dict[str, str]:
        return {**self.by_language[FALLBACK], **self.by_language.get(language, {})}
