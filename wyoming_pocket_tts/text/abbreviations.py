"""Written abbreviations ("z. B.", "approx.", "Nr. 5") expanded to the words said for them.

The tables are in `languages.py`; this module turns them into one pattern per language.
"""

from __future__ import annotations

import functools
import re

from .languages import LANGUAGES, Abbreviation, Language

# A full stop that also ended the sentence is kept: "lights, fans, etc. Then" -> "et cetera.".
_ENDS_SENTENCE = re.compile(r"\s*(?:$|\n|[A-ZÄÖÜÀ-Þ])")
# How far back the sentence start before an abbreviation is looked for (more space than
# this before it: taken for a sentence start).
_LOOK_BEHIND_CHARS = 32


def _key(written: str) -> str:
    return re.sub(r"\s+", "", written).lower()


def _pattern(abbreviation: Abbreviation) -> str:
    chars = []
    for index, char in enumerate(abbreviation.written):
        chars.append(re.escape(char))
        if char == "." and index < len(abbreviation.written) - 1:
            chars.append(r"\s?")  # "z. B." and "z.B."
    pattern = "".join(chars)
    if abbreviation.written[-1].isalnum() or abbreviation.written[-1] in "°º":
        pattern += r"(?!\w)"
    if abbreviation.before_number:
        pattern += r"(?=\s?\d)"
    if abbreviation.not_after_number:
        pattern = r"(?<![\d/])(?<!\d\s)" + pattern
    return pattern


@functools.cache
def _compiled(code: str) -> tuple[re.Pattern[str], dict[str, Abbreviation]]:
    rules = LANGUAGES[code]
    ordered = sorted(rules.abbreviations, key=lambda item: len(item.written), reverse=True)
    alternatives = "|".join(f"(?:{_pattern(item)})" for item in ordered)
    table = {_key(item.written): item for item in ordered}
    return re.compile(rf"(?<![\w.])(?:{alternatives})", re.IGNORECASE), table


@functools.cache
def _weekday_patterns(code: str) -> tuple[re.Pattern[str], re.Pattern[str]] | None:
    """A run of abbreviated weekdays ("Mo–Fr", "Sa/So", "lun., mer., ven."), and one before
    a date or time ("Mo 14.03.", "sáb. 10:00"): only there are they weekdays for sure
    ("So" alone is a word)."""
    days = LANGUAGES[code].weekday_abbreviations
    if not days:
        return None
    day = "(?:" + "|".join(sorted(map(re.escape, days), key=len, reverse=True)) + r")\.?"
    joint = r"\s*(?:[–—/&,-]|\s(?:" + re.escape(LANGUAGES[code].to_word) + r")\s)\s*"
    run = re.compile(rf"(?<![\w.])(?i:{day}(?:{joint}{day})+)(?![\w.])")
    dated = re.compile(rf"(?<![\w.])(?i:{day}),?(?=\s\d)")
    return run, dated


_DAY_OR_JOINT = re.compile(r"(?P<day>[^\W\d_]+)\.?|(?P<joint>\s*[–—/&,-]\s*|\s\w+\s)")


def expand_weekdays(text: str, rules: Language) -> str:
    """Abbreviated weekdays in schedules as their names: "Mo–Fr" -> "Montag bis Freitag"."""
    patterns = _weekday_patterns(rules.code)
    if patterns is None:
        return text
    run, dated = patterns
    days = {key.lower(): name for key, name in rules.weekday_abbreviations.items()}

    def say_run(match: re.Match[str]) -> str:
        spoken = []
        for part in _DAY_OR_JOINT.finditer(match.group(0)):
            if part.group("day"):
                spoken.append(days[part.group("day").lower()])
            else:
                joint = part.group("joint").strip()
                spoken.append(", " if joint == "," else f" {rules.and_word} " if joint in "/&" else
                              f" {rules.to_word} ")
        return "".join(spoken)

    text = run.sub(say_run, text)
    return dated.sub(lambda match: days[match.group(0).rstrip(",.").lower()] + (
        "," if match.group(0).endswith(",") else ""), text)


def expand_abbreviations(text: str, rules: Language) -> str:
    if "." not in text and "°" not in text and "º" not in text and "/" not in text:
        return text
    pattern, table = _compiled(rules.code)

    def expand(match: re.Match[str]) -> str:
        abbreviation = table[_key(match.group(0))]
        spoken = abbreviation.spoken
        # The last character before it, in a bounded window: one look per abbreviation.
        before = text[max(0, match.start() - _LOOK_BEHIND_CHARS):match.start()].rstrip()
        if match.group(0)[0].isupper() and (not before or before[-1] in ".!?…:"):
            # "Approx. 3 kWh" starting a sentence is said "Approximately", and stays a start.
            spoken = spoken[0].upper() + spoken[1:]
        if abbreviation.may_end_sentence and _ENDS_SENTENCE.match(text, match.end()):
            return spoken + "."
        return spoken

    return pattern.sub(expand, text)
