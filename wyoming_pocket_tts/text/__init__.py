"""Spoken-text normalisation: what Home Assistant and LLM replies write, as words to say.

`normalize(text, language)` runs before the engine's own text preparation. It imports no
torch and keeps no state between calls beyond caches of number words.
"""

from __future__ import annotations

import re

from .abbreviations import expand_abbreviations
from .languages import LANGUAGES, language_rules
from .markup import markdown_to_text, remove_emoji, shorten_urls, speak_addresses
from .numerals import rewrite_numerals
from .sentences import SentenceSplitter

__all__ = ["LANGUAGES", "SentenceSplitter", "normalize", "warm_up"]

_SPACE_RUNS = re.compile(r"[ \t\u00a0]{2,}")
_SUBSCRIPTS = str.maketrans("₀₁₂₃₄₅₆₇₈₉μ", "0123456789µ")


def normalize(text: str, language: str) -> str:
    """`text` as a person would say it in `language` (en fr de it pt es nl; else English).

    Markdown becomes sentences, emoji and URLs are removed or shortened, e-mail addresses
    are read in words, abbreviations are expanded and numbers (with their units,
    currencies, dates and times) become words.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, not {type(text).__name__}")
    if not isinstance(language, str):
        raise TypeError(f"language must be a str such as 'en', not {type(language).__name__}")
    rules = language_rules(language)
    spoken = remove_emoji(text)  # first: a block ending in an emoji still ends a sentence
    spoken = markdown_to_text(spoken)
    spoken = shorten_urls(spoken, rules)
    spoken = speak_addresses(spoken, rules)
    spoken = spoken.translate(_SUBSCRIPTS)
    spoken = expand_abbreviations(spoken, rules)
    spoken = rewrite_numerals(spoken, rules)
    spoken = speak_addresses(spoken, rules)  # those that numbers glued to them hid
    if spoken is text:
        return text
    return _SPACE_RUNS.sub(" ", spoken).strip()


def warm_up(language: str) -> None:
    """Import the libraries and build the patterns now (~0.3 s), not on the first reply.

    The package imports them lazily so that `--version` and `--help` stay fast; a server
    calls this once while its model loads.
    """
    normalize("**Warm-up** 🙂: 19.5 °C, 4:10 PM, 2027-03-14, 4,20 €, https://example.com", language)
