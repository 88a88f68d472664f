"""Number words: num2words for the words, plus the per-language glue it lacks.

num2words reads cardinals, ordinals and years in all seven languages; what it does not
do is agree a number with the noun after it ("ein Grad", "une heure", "veintiún euros"),
read decimals as people say them, or spell codes digit by digit. That glue is here.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

from .languages import Language


@functools.lru_cache(maxsize=4096)
def cardinal(number: int, language: str) -> str:
    # Cached: num2words takes 10-300 µs per call, and replies repeat the same few numbers.
    words = _num2words()(number, lang=language)
    # num2words writes "one thousand, two hundred": the comma would be read as a pause.
    return words.replace(",", "") if language == "en" else words


@functools.lru_cache(maxsize=1024)
def ordinal(number: int, language: str) -> str:
    return _num2words()(number, lang=language, to="ordinal")


@functools.lru_cache(maxsize=1024)
def year(number: int, language: str) -> str:
    return _num2words()(number, lang=language, to="year")


def _num2words() -> Callable[..., str]:
    # Imported on first use, not with the server: `--version` and `--help` must stay fast.
    from num2words import num2words

    return num2words


def digits(text: str, rules: Language) -> str:
    """Each digit on its own: phone numbers, codes, leading zeros."""
    return " ".join(cardinal(int(digit), rules.code) for digit in text if digit.isdigit())


def before_noun(number: int, rules: Language, feminine: bool = False, *, case: str = "nom",
                masculine: bool = False) -> str:
    """A cardinal agreeing with the noun after it: "ein Grad", "une heure", "veintiún euros",
    "duas horas", "doscientas personas"; German "eins" also with the noun's case ("in einer
    Stunde", "für einen Tag": `case` is "nom", "acc" or "dat")."""
    words = cardinal(number, rules.code)
    code = rules.code
    if code == "de" and words == "eins":
        return _GERMAN_ONE[(case, "f" if feminine else "m" if masculine else "n")]
    if code == "de" and words.endswith("eins"):
        return words[:-1] + ("e" if feminine else "")
    if code == "fr" and feminine and words.endswith("un"):
        return words + "e"
    if code == "it" and words.endswith("uno"):
        # "un minuto", "una porta"; "ventun ore" (not "ventuna"), "ventun gradi".
        return "una" if feminine and words == "uno" else words[:-1]
    if code == "es" and words.endswith("uno"):
        if feminine:
            words = words[:-1] + "a"
        elif words == "uno" or words.endswith(" uno"):
            words = words[:-1]  # "un", "treinta y un", "ciento un"
        else:
            words = words[:-3] + "ún"  # "veintiún"
    if code == "pt" and feminine:
        if words.endswith("um"):
            words += "a"
        elif words.endswith("dois"):
            words = words[:-4] + "duas"
    if feminine and code in ("es", "pt"):
        # Hundreds agree too: "doscientas horas", "duzentas pessoas"; not those that count
        # millions ("doscientos millones", masculine).
        millions = _MILLIONS.search(words)
        head, tail = (words[:millions.end()], words[millions.end():]) if millions else ("", words)
        words = head + _FEMININE_HUNDREDS.sub(lambda match: match.group(1) + "as", tail)
    return words


# The German "one" before a noun, by case and gender.
_GERMAN_ONE = {("nom", "m"): "ein", ("nom", "n"): "ein", ("nom", "f"): "eine",
               ("acc", "m"): "einen", ("acc", "n"): "ein", ("acc", "f"): "eine",
               ("dat", "m"): "einem", ("dat", "n"): "einem", ("dat", "f"): "einer"}
# "doscientos", "quinientos", "duzentos", "quinhentos": not "cientos" nor "cento".
_MILLIONS = re.compile(r".*\b(?:mill|bill|milh|bilh|bili)\w*")
_FEMININE_HUNDREDS = re.compile(r"\b(\w+(?:ient|ent))os\b")


def feminine_ordinal(words: str, code: str) -> str:
    """Romance ordinals are masculine in num2words: "primeiro" -> "primeira"."""
    if code in ("it", "pt", "es"):
        return " ".join(word[:-1] + "a" if word.endswith("o") else word for word in words.split())
    if code == "fr" and words == "premier":
        return "première"
    return words


def decimal(negative: bool, whole: int, fraction: str, rules: Language) -> str:
    """A number with its fraction as written ("19.5", "0.05"), in words.

    English, German and Dutch read the fraction digit by digit ("neunzehn Komma fünf");
    the Romance languages read a short fraction without leading zero as a number
    ("quatre virgule vingt").
    """
    sign = rules.minus_word + " " if negative else ""
    whole_words = cardinal(whole, rules.code)
    if rules.code in ("fr", "it", "es", "pt") and len(fraction) <= 2 and fraction[0] != "0":
        fraction_words = cardinal(int(fraction), rules.code)
    else:
        fraction_words = digits(fraction, rules)
    return f"{sign}{whole_words} {rules.decimal_word} {fraction_words}"
