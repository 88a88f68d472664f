"""Spoken-text normalisation: what Home Assistant and LLM replies write, as words to say.

`normalize(text, language)` runs before the engine's own text preparation. It imports no
torch and keeps no state between calls beyond caches of number words.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from .abbreviations import expand_abbreviations, expand_weekdays
from .languages import LANGUAGES, Language, language_rules
from .markup import markdown_to_text, remove_emoji, shorten_urls, speak_addresses
from .numerals import rewrite_numerals
from .sentences import SentenceSplitter

__all__ = ["LANGUAGES", "MAX_PIECE_CHARS", "SentenceSplitter", "normalize", "warm_up"]

_SPACE_RUNS = re.compile(r"[ \t\u00a0]{2,}")
_SUBSCRIPTS = str.maketrans("₀₁₂₃₄₅₆₇₈₉μ", "0123456789µ")
# A full stop left before a comma ("1 min., then" once the unit is read): not an ellipsis.
_STOP_BEFORE_COMMA = re.compile(r"(?<![.…])\.[ \t]*(?=,)")
# Longer text is read in pieces of at most this many characters (see `_pieces`).
MAX_PIECE_CHARS = 2_000
# Where a piece may end, best first: after a sentence end, a clause mark, any space.
_PIECE_ENDS = (re.compile(r"[.!?…][\"'”’»)\]]*\s+|\n"), re.compile(r"[,;:]\s+"), re.compile(r"\s+"))


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
    if len(spoken) > MAX_PIECE_CHARS:
        spoken = "".join(_words(piece, rules) for piece in _pieces(spoken, MAX_PIECE_CHARS))
    else:
        spoken = _words(spoken, rules)
    if spoken is text:
        return text
    if "," in spoken:
        spoken = _STOP_BEFORE_COMMA.sub("", spoken)
    return _SPACE_RUNS.sub(" ", spoken).strip()


def _words(text: str, rules: Language) -> str:
    """Addresses, abbreviations and numbers of plain text in words."""
    spoken = shorten_urls(text, rules)
    spoken = speak_addresses(spoken, rules)
    spoken = spoken.translate(_SUBSCRIPTS)
    spoken = expand_weekdays(spoken, rules)
    spoken = expand_abbreviations(spoken, rules)
    spoken = rewrite_numerals(spoken, rules)
    return speak_addresses(spoken, rules)  # those that numbers glued to them hid


def _pieces(text: str, limit: int) -> Iterator[str]:
    """`text` in pieces of at most `limit` characters, cut after a sentence end where the
    second half of a piece has one, else after a clause mark or a space, else anywhere.

    The reason: whatever a pattern costs on one piece, a text costs the sum, so the time
    is linear in the text's length whatever it holds. A reply is a few hundred characters:
    only degenerate text is cut (a number or a date across a cut is read in two parts).
    """
    start = 0
    while len(text) - start > limit:
        end = start + limit
        cut = end
        for pattern in _PIECE_ENDS:
            last = None
            for last in pattern.finditer(text, start + limit // 2, end):
                pass
            if last is not None:
                cut = last.end()
                break
        yield text[start:cut]
        start = cut
    yield text[start:]


def warm_up(language: str) -> None:
    """Import the libraries and build the patterns now (~0.3 s), not on the first reply.

    The package imports them lazily so that `--version` and `--help` stay fast; a server
    calls this once while its model loads.
    """
    normalize("**Warm-up** 🙂: 19.5 °C, 4:10 PM, 2027-03-14, 4,20 €, https://example.com", language)
