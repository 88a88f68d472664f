"""SSML `<say-as interpret-as=...>`: the enclosed text read as the client says it is.

Each reading goes through the normaliser's own number words (`numbers.py`) or through
`normalize` itself, given the text rewritten into the form it already reads: a date as ISO
("2027-03-14"), a time as "14:30" or "2:30 PM". So a date or a time sounds the same
whether it comes in a `say-as` or in plain text, in each of the seven languages.

What cannot be read as asked (a "cardinal" with no number in it, a date with a 13th month)
is read as plain text instead: the words are never lost.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from . import normalize
from .languages import Language, language_rules
from .numbers import cardinal, digits, ordinal, year

_INTEGER = re.compile(r"\s*(?P<sign>[-−+])?\s*(?P<digits>\d{1,3}(?:[ .,'’\u00a0\u202f]\d{3})+|\d+)\s*")
_ORDINAL = re.compile(r"\s*(?P<digits>\d+)\s*(?:\.|st|nd|rd|th|er|re|ère|ème|e|de|ste|º|ª|°)?\s*", re.IGNORECASE)
_DIGIT_GROUPS = re.compile(r"\d+")
_TIME = re.compile(r"\s*(?P<h>\d{1,2})(?:[:.h](?P<m>\d{2})(?::(?P<s>\d{2}))?)?\s*"
                   r"(?P<ampm>[AaPp]\.?\s?[Mm]\.?)?\s*")
# SSML's date formats: the order of day, month and year in the text.
_DATE_FORMATS = {"mdy", "dmy", "ymd", "md", "dm", "ym", "my", "d", "m", "y"}


def say_as(text: str, interpret_as: str, language: str, date_format: str | None = None,
           word_before: str = "") -> str:  # fmt: skip
    """`text` read as `interpret_as` says, in `language`'s words; an unknown kind as plain text.

    `word_before`: the word in front of it, which some readings agree with (German "am
    vierzehnten März", "der vierzehnte März")."""
    kind = interpret_as.strip().lower()
    reading = _READINGS.get(kind)
    if reading is None:
        return text
    rules = language_rules(language)
    spoken = reading(text, _Context(rules, (date_format or "").strip().lower(), word_before))
    return spoken if spoken is not None else normalize(text, rules.code)


@dataclass(frozen=True)
class _Context:
    rules: Language
    date_format: str
    word_before: str

    def normalize(self, text: str) -> str:
        """`normalize` with the word before in front (and taken off again) where the
        language's rules read a date by it (German ordinals)."""
        word = self.word_before
        if not word or word.lower() not in self.rules.ordinal_case_words:
            return normalize(text, self.rules.code)
        spoken = normalize(f"{word} {text}", self.rules.code)
        return spoken[len(word) + 1:] if spoken.startswith(f"{word} ") else normalize(text, self.rules.code)


def _characters(text: str, context: _Context) -> str | None:
    """Letter by letter, digits as digit words: "ABC12" -> "A B C one two"."""
    spoken = [cardinal(int(char), context.rules.code) if char.isdigit() else char.upper()
              for char in text if char.isalnum()]
    return " ".join(spoken) if spoken else None


def _cardinal(text: str, context: _Context) -> str | None:
    rules = context.rules
    match = _INTEGER.fullmatch(text)
    if match is None:
        return None
    number = int(re.sub(r"\D", "", match.group("digits")))
    words = cardinal(number, rules.code)
    sign = match.group("sign")
    if sign in ("-", "−"):
        return f"{rules.minus_word} {words}"
    return f"{rules.plus_word} {words}" if sign == "+" else words


def _ordinal(text: str, context: _Context) -> str | None:
    match = _ORDINAL.fullmatch(text)
    return ordinal(int(match.group("digits")), context.rules.code) if match else None


def _digits(text: str, context: _Context) -> str | None:
    return digits(text, context.rules) if any(char.isdigit() for char in text) else None


def _telephone(text: str, context: _Context) -> str | None:
    """Each group of digits read digit by digit, the groups parted by a comma (a pause)."""
    rules = context.rules
    groups = _DIGIT_GROUPS.findall(text)
    if not groups:
        return None
    spoken = ", ".join(digits(group, rules) for group in groups)
    return f"{rules.plus_word} {spoken}" if text.lstrip().startswith("+") else spoken


def _date(text: str, context: _Context) -> str | None:
    """The date's fields in the order `date_format` gives (SSML's "dmy", "mdy", "ymd", ...;
    by default year first for a four-digit first group, else the language's order)."""
    rules, date_format = context.rules, context.date_format
    groups = _DIGIT_GROUPS.findall(text)
    if not groups:
        return None
    if date_format not in _DATE_FORMATS:
        date_format = "ymd" if len(groups[0]) == 4 else ("mdy" if rules.code == "en" else "dmy")
    if len(groups) != len(date_format):
        return None
    fields = {letter: int(group) for letter, group in zip(date_format, groups)}
    day, month, year_number = fields.get("d"), fields.get("m"), fields.get("y")
    if (day is not None and not 1 <= day <= 31) or (month is not None and not 1 <= month <= 12):
        return None
    if day and month and year_number is not None:
        spoken = context.normalize(f"{year_number:04d}-{month:02d}-{day:02d}")
        return None if any(char.isdigit() for char in spoken) else spoken
    month_name = rules.months[month - 1] if month else ""
    if day and month:
        # "14 March" is a date in every language's rules ("14. März" would be too).
        return context.normalize(f"{day} {month_name}")
    if month and year_number is not None:
        return f"{month_name} {year(year_number, rules.code)}"
    if day:
        return ordinal(day, rules.code)
    if month:
        return month_name
    return year(year_number, rules.code) if year_number is not None else None


def _time(text: str, context: _Context) -> str | None:
    """ "14:30", "2:30pm", "9 h", "14.30": rewritten as "14:30" (or "2:30 PM") and read by
    `normalize` as a time of day; seconds, if any, follow in words."""
    rules = context.rules
    match = _TIME.fullmatch(text)
    if match is None:
        return None
    hour, minute = int(match.group("h")), int(match.group("m") or 0)
    ampm = re.sub(r"[.\s]", "", match.group("ampm") or "").upper()
    if minute > 59 or hour > 24 or (ampm and not 1 <= hour <= 12):
        return None
    spoken = normalize(f"{hour}:{minute:02d}" + (f" {ampm}" if ampm else ""), rules.code)
    seconds = int(match.group("s") or 0)
    if seconds:
        spoken += f" {rules.and_word} {normalize(f'{seconds} s', rules.code)}"
    return None if any(char.isdigit() for char in spoken) else spoken


_READINGS: dict[str, Callable[[str, _Context], str | None]] = {
    "characters": _characters,
    "spell-out": _characters,
    "verbatim": _characters,
    "cardinal": _cardinal,
    "number": _cardinal,
    "ordinal": _ordinal,
    "digits": _digits,
    "telephone": _telephone,
    "date": _date,
    "time": _time,
}
