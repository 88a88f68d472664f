"""Numbers in context: money, dates, times, durations, ranges, units, ordinals, codes.

Each kind of written number is one regular expression and one function that says it.
They run in a fixed order, most specific first ("2027-03-14" is a date before it is
three numbers), and each turns its digits into words, so later passes never see them.
The patterns are hand-written: no pure-Python library reads these forms in seven
languages (heavy normalisers such as NeMo are out), and num2words only names numbers.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from .languages import LANGUAGES, Language
from .genders import DUTCH_NEUTER, FEMININE, GERMAN_CASES, MASCULINE, NEUTER, NOMINATIVE, noun_gender
from .numbers import before_noun, cardinal, decimal, digits, feminine_ordinal, ordinal, year
from .unit_names import AMBIGUOUS
from .units import CURRENCIES, CURRENCY_SIGNS, UNITS, Noun

Reading = Callable[[re.Match[str]], str]
# A pattern, its reading, and whether it can only match where a digit is left.
Pass = tuple[re.Pattern[str], Reading, bool]


@dataclass(frozen=True)
class Amount:
    """A written number, parsed: "-1.234,5" -> negative, 1234, "5"."""

    negative: bool
    whole: int
    fraction: str  # digits after the decimal separator, as written ("05")

    def singular(self, rules: Language) -> bool:
        if rules.code == "fr":  # French: "1,5 kilomètre", "zéro degré"
            return self.whole < 2
        return self.whole == 1 and not self.fraction


# "20 ºC": the ordinal indicator typed for the degree sign (Spanish and Portuguese keyboards).
_ORDINAL_FOR_DEGREE = re.compile(r"(?<=\d)(\s?)º(?=[CF]\b)")

# The most digits a number may have to be read as one (999 trillion and so on): a longer
# run is read in groups or digit by digit. Beyond keeping speech sensible, this bounds
# every later pattern: none sees a number longer than this, so each one tries a bounded
# length from each position (a 20,000-digit run made them quadratic: 44 s), and int() is
# never asked for more than Python's 4,300 digits ("999 " * 1500 is one grouped number).
MAX_NUMBER_DIGITS = 15
# Characters that may stand between the thousands groups of one written number.
_GROUP_SEPARATORS = " \u00a0\u202f\u2009.,'’"
# A number longer than that as the number patterns would take it: thousands groups, or a
# run of digits with or without a fraction. Possessive: nothing is tried again shorter.
_LONG_RUN = re.compile(rf"(?P<sign>(?<![\w.,:])[-−])?(?P<digits>"
                       rf"\d{{1,3}}(?:[{_GROUP_SEPARATORS}]\d{{3}}){{{MAX_NUMBER_DIGITS // 3},}}+(?:[.,]\d+)?+"
                       rf"|\d{{{MAX_NUMBER_DIGITS + 1},}}+(?:[.,]\d+)?+|\d++[.,]\d{{{MAX_NUMBER_DIGITS + 1},}}+)")
_GROUP = re.compile(r"\d+")
_DIGIT = re.compile(r"\d")
# What may follow a match and still count as a sentence start (after "p.m.").
_SENTENCE_START = re.compile(r"\s*(?:$|[A-ZÄÖÜÉ])")
_YEAR_AHEAD = re.compile(r"(?:1[1-9]\d\d|20\d\d)(?!\d)")
_WORD_AHEAD = re.compile(r"\s+[^\W\d]")
_LAST_WORD = re.compile(r"(\w+)\s*$")
# How far back a reading looks for the word before a number (bounded: one look per number).
_LOOK_BEHIND_CHARS = 48
# After a unit symbol that is also a word: no lower-case word follows ("5 in the hall").
_NO_WORD_AFTER = r"(?![ \u00a0]+[^\W\dA-ZÀ-ÖØ-Þ])"
# The word (or two) after a number: the noun it counts, or an adjective and the noun.
_WORDS_AHEAD = re.compile(r"[ \u00a0]+([^\W\d_][\w'’-]*)(?:[ \u00a0]+([^\W\d_][\w'’-]*))?")
# "bis 2", "o 2": a second number, joined by a word, whose noun both count.
_CONNECTED_NUMBER = re.compile(r"[ \u00a0]+(\w+)[ \u00a0]+[-−]?\d+(?:[.,]\d+)?")
_VOWELS = frozenset("aeiouàèéìòùh")
# The second number of a range, whose noun the first agrees with.
_RANGE_END = re.compile(r"[-−]?\d+(?:[.,'’ \u00a0\u202f\u2009]\d+)*")
# A time after a whole hour, joined by a dash or a word or two ("10:00 a 12:00", "alle 12:00").
_TIME_AFTER = re.compile(r"\s*(?:[–—-]|\w+(?:\s\w+)?)\s*\d{1,2}[:.h]\d{2}")
# "±0,5 °C", "≈ 20 %", "~20 min": said, not dropped.
_PLUS_MINUS = re.compile(r"±\s?(?=[\d.,])")
_APPROXIMATELY = re.compile(r"(?:[~∼]|≈)\s?(?=[\d.,])|≈")
_NINE_DIGIT_PHONE = re.compile(r"[2-9]\d\d(?: \d\d\d(?: (?!000)\d\d\d)|(?: \d\d){3})")
# Articles before an hour said without its noun: "a la 1", "às 2".
_HOUR_ARTICLES = {"es": frozenset({"la", "las"}), "pt": frozenset({"à", "às", "as"})}
# "É 1 e 5", "São 2 e 20" (Home Assistant's Portuguese clock) at a sentence's start.
_PORTUGUESE_HOUR_START = re.compile(r"(?:^|[.!?:]\s+|\n\s*)(?:É|São)\s+$")


def rewrite_numerals(text: str, rules: Language) -> str:
    if not _has_digit(text):
        return text
    text = _LONG_RUN.sub(lambda match: _long_run(match, rules), text)
    text = _ORDINAL_FOR_DEGREE.sub(r"\1°", text)
    if "±" in text or "≈" in text or "~" in text or "∼" in text:
        text = _PLUS_MINUS.sub(f"{rules.plus_minus_word} ", text)
        text = _APPROXIMATELY.sub(f"{rules.approximately_word} ", text)
    for pattern, say, needs_digits in _passes(rules.code):
        if needs_digits and not _DIGIT.search(text):
            continue  # all read already: the rest of the passes would only scan words
        text = pattern.sub(say, text)
    return _spell_leftover_digits(text, rules)


def _has_digit(text: str) -> bool:
    """Any digit, superscripts ("²", which "\\d" does not match) too; fast on ASCII."""
    return bool(_DIGIT.search(text)) or (not text.isascii() and any(char.isdigit() for char in text))


def _long_run(match: re.Match[str], rules: Language) -> str:
    """More digits than a number is read with: a decimal's fraction digit by digit, else
    each group as written ("999 999 ..." -> "nine hundred ninety-nine, nine hundred ..."),
    groups longer than three digits digit by digit."""
    written = match.group("digits")
    groups = _GROUP.findall(written)
    separators = {char for char in written if not char.isdigit()}
    decimal_separator = "," if rules.decimal_comma else "."
    if len(groups) == 2 and separators == {decimal_separator}:
        whole = groups[0]
        if len(whole) <= MAX_NUMBER_DIGITS:
            spoken = decimal(False, int(whole), groups[1], rules)
        else:
            spoken = f"{digits(whole, rules)} {rules.decimal_word} {digits(groups[1], rules)}"
    else:
        spoken = ", ".join(cardinal(int(group), rules.code) if len(group) <= 3 else digits(group, rules)
                           for group in groups)
    sign = f"{rules.minus_word} " if match.group("sign") else ""
    return f" {sign}{spoken} "


def _spell_leftover_digits(text: str, rules: Language) -> str:
    """Whatever digit no pattern claimed (superscripts, other scripts) is read alone."""
    if not _has_digit(text):
        return text
    return "".join(f" {cardinal(unicodedata.digit(char, 0), rules.code)} " if char.isdigit()
                   else char for char in text)


@functools.cache
def _passes(code: str) -> tuple[Pass, ...]:
    return _Speaker(LANGUAGES[code]).passes()


class _Speaker:
    """The patterns and their readings for one language (built once per language)."""

    def __init__(self, rules: Language) -> None:
        self.rules = rules
        self.code = rules.code
        self.units: dict[str, Noun] = UNITS[rules.code]
        self.currencies = CURRENCIES[rules.code]
        separators = re.escape(("," if not rules.decimal_comma else ".'’") + rules.thousands_spaces)
        self.number_re = rf"(?:\d{{1,3}}(?:[{separators}]\d{{3}})+(?!\d)|\d+)(?:[.,]\d+)?"
        self._parse_re = re.compile(
            rf"(\d{{1,3}}(?:[{separators}]\d{{3}})+|\d+)(?:[.,](\d+))?")
        symbols = sorted(self.units, key=len, reverse=True)
        # A symbol that is also a word ("in", "mi", "ha") is a unit only where no word follows.
        self.unit_re = "|".join(re.escape(symbol) + (_NO_WORD_AFTER if symbol in AMBIGUOUS else "")
                                for symbol in symbols)
        self._unit_ahead = re.compile(rf"\s?({self.unit_re})(?![\w/²³'’])")
        month_names = {name.lower(): index + 1 for index, name in enumerate(rules.months)}
        month_names.update({alias.lower(): month for alias, month in rules.month_aliases.items()})
        self.month_numbers = month_names
        written = [*rules.months, *rules.month_aliases]
        # English months are capitalised ("you may 5 times" is no date); others are not.
        self.month_re = "|".join(sorted(map(re.escape, written), key=len, reverse=True))
        if rules.code != "en":
            self.month_re = f"(?i:{self.month_re})"

    # --- building blocks -------------------------------------------------------------

    def amount(self, sign: str | None, written: str) -> Amount | None:
        match = self._parse_re.fullmatch(written)
        if match is None:
            return None
        whole = int("".join(char for char in match.group(1) if char.isdigit()))
        return Amount(sign in ("-", "−"), whole, match.group(2) or "")

    def say_amount(self, amount: Amount, feminine: bool = False, *, case: str = NOMINATIVE,
                   masculine: bool = False) -> str:
        if amount.fraction:
            return decimal(amount.negative, amount.whole, amount.fraction, self.rules)
        words = before_noun(amount.whole, self.rules, feminine, case=case, masculine=masculine)
        return f"{self.rules.minus_word} {words}" if amount.negative else words

    def say_counting(self, amount: Amount, gender: str | None, match: re.Match[str]) -> str:
        """A number that counts a noun of `gender` (None: said alone, "uno", "eins")."""
        if gender is None:
            if amount.fraction:
                return decimal(amount.negative, amount.whole, amount.fraction, self.rules)
            words = cardinal(amount.whole, self.code)
            return f"{self.rules.minus_word} {words}" if amount.negative else words
        return self.say_amount(amount, gender == FEMININE, case=self.german_case(match),
                               masculine=gender == MASCULINE)

    def german_case(self, match: re.Match[str]) -> str:
        """The case a German preposition before the match asks for ("in einer Stunde")."""
        return GERMAN_CASES.get(self.previous_word(match), NOMINATIVE) if self.code == "de" else NOMINATIVE

    def counted_gender(self, text: str, position: int) -> str | None:
        """The gender of the noun a number ending at `position` counts, if a noun follows:
        a unit symbol, or a word (German: past an adjective, "1 pausierter Timer")."""
        unit = self._unit_ahead.match(text, position)
        if unit is not None:
            noun = self.units[unit.group(1)]
            return FEMININE if noun.feminine else MASCULINE if noun.masculine else NEUTER
        connected = _CONNECTED_NUMBER.match(text, position)
        if connected is not None and connected.group(1).lower() in self.rules.range_words:
            position = connected.end()  # "1 bis 2 Stunden", "1 o 2 horas": the second's noun
        words = _WORDS_AHEAD.match(text, position)
        if words is None:
            return None
        first, second = words.group(1), words.group(2)
        gender = noun_gender(first, self.code)
        if gender is None and second and self.code == "de" and first[0].islower() \
                and first.endswith(("e", "er", "es", "en", "em")):
            gender = noun_gender(second, self.code)
        return gender

    def hour_context(self, match: re.Match[str]) -> bool:
        """A number said as an hour of the day without a noun ("Es la 1 y 5", "às 2", "l'1"):
        hours are feminine (la hora, l'ora)."""
        if self.code == "it":
            return match.string.endswith(("l'", "l’"), max(0, match.start() - 2), match.start())  # "l'una"
        if self.code not in ("es", "pt"):
            return False
        if self.previous_word(match) in _HOUR_ARTICLES[self.code]:
            return True
        return self.code == "pt" and _PORTUGUESE_HOUR_START.search(
            match.string, max(0, match.start() - _LOOK_BEHIND_CHARS), match.start()) is not None

    def previous_word(self, match: re.Match[str]) -> str:
        """The word before the match, looked for in a bounded window (once per match)."""
        start = match.start()
        found = _LAST_WORD.search(match.string, max(0, start - _LOOK_BEHIND_CHARS), start)
        return found.group(1).lower() if found else ""

    # --- passes ----------------------------------------------------------------------

    def passes(self) -> tuple[Pass, ...]:
        num, sign = self.number_re, r"(?P<sign>(?<![\w.,:])[-−+])?"
        currency = r"US\$|[$€£]|\b(?:CHF|EUR|USD|GBP)\b|\bFr\."
        found: list[tuple[re.Pattern[str], Reading]] = [
            (re.compile(rf"{sign}(?P<cur>{currency})\s?(?P<num>{num})"), self.money),
            (re.compile(rf"{sign}(?P<num>{num})\s?(?P<cur>[$€£]|(?:CHF|EUR|USD|GBP)\b)"), self.money),
            # ISO dates, with the time an ISO timestamp may carry ("2027-03-14T18:40:00Z").
            (re.compile(r"\b(?P<y>\d{4})-(?P<m>\d{1,2})-(?P<d>\d{1,2})"
                        r"(?:[T ](?P<hh>\d{2}):(?P<mi>\d{2})(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\b"),
             self.numeric_date),
            (re.compile(r"\b(?P<d>\d{1,2})\.(?P<m>\d{1,2})\.(?P<y>\d{4})\b"), self.numeric_date),
            (re.compile(r"\b(?P<a>\d{1,2})/(?P<b>\d{1,2})/(?P<y>\d{4})\b"), self.slashed_date),
            # "14-03-2027" (Dutch and others write dates so; English: month first, as with "/").
            (re.compile(r"\b(?P<a>\d{1,2})-(?P<b>\d{1,2})-(?P<y>\d{4})\b"), self.slashed_date),
            (re.compile(rf"\b(?P<day>\d{{1,2}})(?:\.|st|nd|rd|th|er|re|ère|º|°|ª|e)?\s+(?:of\s+|de\s+)?"
                        rf"(?P<month>{self.month_re})\b(?:,?\s+(?:de\s+)?(?P<y>\d{{4}})\b)?"),
             self.named_date),
        ]
        if self.code == "en":
            found.append((re.compile(rf"\b(?P<month>{self.month_re})\.?\s+(?P<day>\d{{1,2}})"
                                     rf"(?:st|nd|rd|th)?\b(?:,?\s+(?P<y>\d{{4}})\b)?"), self.named_date))
        if self.code == "de":  # "am 14.03." (no year)
            found.append((re.compile(r"\b(?P<d>\d{1,2})\.(?P<m>\d{1,2})\.(?!\d)"), self.numeric_date))
        found += [
            # "10:00–12:00": the dash is said ("to"); each time is read by the next pass.
            (re.compile(r"\b(?P<first>\d{1,2}:\d{2})\s?[–—-]\s?(?=\d{1,2}:\d{2})"),
             lambda match: f"{match.group('first')} {self.rules.to_word} "),
            (re.compile(r"\b(?P<h>\d{1,2}):(?P<m>\d{2})(?::(?P<s>\d{2}))?(?![\d:])"
                        r"(?:\s?(?P<ampm>[AaPp][Mm]|[AaPp]\.\s?[Mm](?P<dot>\.)?)(?!\w))?"
                        r"(?:\s?(?:Uhr|uur|h)\b)?"), self.clock),
            (re.compile(r"\b(?P<h>\d{1,2})h(?P<m>\d{2})\b"), self.clock),
            # "18.30 Uhr": a dot between hours and minutes, when the clock word follows.
            (re.compile(r"\b(?P<h>\d{1,2})\.(?P<m>\d{2})\s?(?:Uhr|uur|h)\b"), self.clock),
        ]
        if self.code == "en":
            found += [
                (re.compile(r"\b(?P<h>\d{1,2})\s?(?P<ampm>AM|PM|am|pm|a\.m(?P<dot>\.)?|p\.m(?P<dot2>\.)?)(?!\w)"),
                 self.clock),
                (re.compile(r"\b(?P<decade>(?:1[0-9]|20)?[1-9]0)'?s\b"), self.decade),
            ]
        found += [
            (re.compile(rf"(?P<a>{sign}{num})\s?[–—-]\s?(?=[-−]?{num}\s?(?:{self.unit_re})(?!\w))"),
             self.range_start),
            # A named fraction of a unit: "1/2 L" is "half a liter", not "1/two liters".
            (re.compile(rf"(?<![\d/])(?P<a>[1-3])/(?P<b>[234])\s?(?P<unit>{self.unit_re})(?![\w/²³'’])"),
             self.fraction),
            (re.compile(rf"{sign}(?P<num>{num})\s?(?P<unit>{self.unit_re})(?![\w/²³'’])"), self.with_unit),
            (re.compile(rf"(?:(?<=[^\W\d])(?P<slash>/)|(?<=\s){self.rules.per_word}\s)(?P<unit>{self.unit_re})(?![\w/²³])"),
             self.per_unit),
            *self.ordinal_passes(),
            (re.compile(r"\b[vV](?P<parts>\d+(?:\.\d+){2,})\b|\b(?P<bare>\d+(?:\.\d+){2,})\b"),
             self.version),
            (re.compile(r"\b[vV](?P<v>\d+(?:\.\d+)?)\b"), self.short_version),
            # "+33 1 23 45 67 89": after a country code the first group may be one digit.
            (re.compile(r"(?<![\w+])(?P<phone>(?:\+\d{1,3}[\s.-]?(?:\d[\s.-])?)?(?:\(\d{1,5}\)\s?)?"
                        r"\d{2,5}(?:[\s./-]\d{2,8}){1,5})(?![\w])"), self.phone),
            (re.compile(rf"(?P<a>{sign}{num})\s?(?:–|—|-(?=\d))\s?(?=[-−]?\d)"), self.range_start),
            (re.compile(r"(?<!\d[.,])\b(?P<code>[A-Za-z\d]*(?:[A-Za-z]\d|\d[A-Za-z])[A-Za-z\d]*(?:[.,]\d+\b)?)"),
             self.code_word),
            (re.compile(r"(?<![\d/])(?P<a>\d{1,3})/(?P<b>\d{1,3})(?![\d/])"), self.fraction),
            (re.compile(r"(?<![\w.,])(?<!\d[ \u00a0\u202f\u2009])(?P<digits>0\d+|\d{5,})(?![\w]|[.,]\d)"),
             self.digit_string),
            (re.compile(r"(?<![\w.,])(?P<y>1[1-9]\d\d|20\d\d)(?![\w]|[.,]\d)"), self.bare_year),
            (re.compile(rf"{sign}(?P<num>{num})(?P<space>[ \u00a0]*)"), self.plain),
        ]
        # "Cent pro kWh": the one pass that reads text without digits.
        return tuple((pattern, say, say != self.per_unit) for pattern, say in found)

    def ordinal_passes(self) -> list[tuple[re.Pattern[str], Reading]]:
        if self.code == "en":
            return [(re.compile(r"\b(?P<n>\d+)(?:st|nd|rd|th)\b"), self.ordinal_word)]
        if self.code == "fr":
            return [(re.compile(r"\b(?P<n>\d+)(?P<suffix>ère|re|er|ème|eme|nde|nd|e)\b"), self.ordinal_word)]
        if self.code == "nl":
            return [(re.compile(r"\b(?P<n>\d+)(?:ste|de|e)\b"), self.ordinal_word)]
        if self.code == "de":
            articles = "|".join(self.rules.ordinal_case_words)
            return [(re.compile(rf"\b(?P<article>(?i:{articles}))\s+(?P<n>\d{{1,3}})\.(?=\s+\w)"),
                     self.german_ordinal)]
        # Italian, Spanish, Portuguese: "1º", "1.ª", "3° piano".
        return [(re.compile(r"\b(?P<n>\d{1,3})\.?(?P<suffix>[ºª°])(?!\w)"), self.ordinal_word)]

    # --- readings ---------------------------------------------------------------------

    def money(self, match: re.Match[str]) -> str:
        amount = self.amount(match.group("sign"), match.group("num"))
        if amount is None:
            return match.group(0)
        main, minor = self.currencies[CURRENCY_SIGNS[match.group("cur")]]
        sign = f"{self.rules.minus_word} " if amount.negative else ""
        if len(amount.fraction) > 2:  # "0.125 €" per kWh: a decimal, not cents
            return f"{self.say_amount(amount)} {main.plural}"
        cents = int(amount.fraction.ljust(2, "0")) if amount.fraction else 0
        case = self.german_case(match)
        whole_words = f"{before_noun(amount.whole, self.rules, main.feminine, case=case, masculine=main.masculine)} " \
                      f"{main.form(amount.whole == 1 or (self.code == 'fr' and amount.whole < 2))}"
        cent_words = f"{before_noun(cents, self.rules, minor.feminine, case=case, masculine=minor.masculine)} " \
                     f"{minor.form(cents == 1)}"
        if not cents:
            return sign + whole_words
        if not amount.whole:
            return sign + cent_words
        return f"{sign}{whole_words} {self.rules.and_word} {cent_words}"

    def numeric_date(self, match: re.Match[str]) -> str:
        groups = match.groupdict()
        spoken = self.date(match, int(groups["d"]), int(groups["m"]), groups.get("y"))
        if groups.get("hh") is None or spoken == match.group(0):
            return spoken
        hour, minute = int(groups["hh"]), int(groups["mi"])
        if hour > 23 or minute > 59:
            return match.group(0)
        time_words = self.english_clock(hour, minute, "") if self.code == "en" \
            else self.clock_words(hour, minute)
        return f"{spoken} {time_words}"

    def slashed_date(self, match: re.Match[str]) -> str:
        first, second = int(match.group("a")), int(match.group("b"))
        day, month = (second, first) if self.code == "en" else (first, second)
        return self.date(match, day, month, match.group("y"))

    def named_date(self, match: re.Match[str]) -> str:
        month = self.month_numbers[match.group("month").lower().rstrip(".")]
        return self.date(match, int(match.group("day")), month, match.group("y"))

    def date(self, match: re.Match[str], day: int, month: int, year_text: str | None) -> str:
        if not (1 <= day <= 31 and 1 <= month <= 12):
            return match.group(0)
        month_name = self.rules.months[month - 1]
        year_words = year(int(year_text), self.code) if year_text else ""
        code = self.code
        if code == "en":
            spoken = f"{month_name} {ordinal(day, code)}" + (f", {year_words}" if year_words else "")
            return spoken
        if code == "de":
            ending = self.rules.ordinal_case_words.get(self.previous_word(match), "r")
            spoken = f"{ordinal(day, code)}{ending} {month_name}"
        elif code in ("fr", "it", "pt", "es") and day == 1:
            spoken = f"{ordinal(1, code)} {month_name}"
        else:
            spoken = f"{cardinal(day, code)} {month_name}"
        if code in ("es", "pt"):
            spoken = spoken.replace(f" {month_name}", f" de {month_name}")
            return spoken + (f" de {year_words}" if year_words else "")
        return spoken + (f" {year_words}" if year_words else "")

    def clock(self, match: re.Match[str]) -> str:
        groups = match.groupdict()
        hour, minute = int(groups["h"]), int(groups.get("m") or 0)
        seconds, ampm = groups.get("s"), (groups.get("ampm") or "").replace(".", "").replace(" ", "")
        if seconds is not None and not ampm:
            return self.duration(match, hour, minute, int(seconds))
        if minute > 59 or hour > 24 or (ampm and not 1 <= hour <= 12):
            return match.group(0)
        trailing_stop = "." if (groups.get("dot") or groups.get("dot2")) and _SENTENCE_START.match(
            match.string, match.end()) else ""
        if self.code == "en":
            return self.english_clock(hour, minute, ampm.upper()) + trailing_stop
        if ampm:
            hour = hour % 12 + (12 if ampm.lower() == "pm" else 0)
        # "de 10:00 a 12:00": "en punto" once, after the range's last hour.
        ends_range = _TIME_AFTER.match(match.string, match.end()) is not None
        return self.clock_words(hour, minute, whole_hour_word=not ends_range) + trailing_stop

    def english_clock(self, hour: int, minute: int, ampm: str) -> str:
        hour_words = cardinal(hour, "en")
        if not minute:
            if ampm:
                return f"{hour_words} {ampm}"
            return f"{hour_words} hundred" if hour > 12 or hour == 0 else f"{hour_words} o'clock"
        minute_words = ("oh " if minute < 10 else "") + cardinal(minute, "en")
        return f"{hour_words} {minute_words}" + (f" {ampm}" if ampm else "")

    def clock_words(self, hour: int, minute: int, whole_hour_word: bool = True) -> str:
        code, rules = self.code, self.rules
        minutes = cardinal(minute, code) if minute else ""
        if code == "de":
            return f"{before_noun(hour, rules)} Uhr" + (f" {minutes}" if minutes else "")
        if code == "nl":
            return f"{cardinal(hour, code)} uur" + (f" {minutes}" if minutes else "")
        if code == "fr":
            heures = "heure" if hour < 2 else "heures"
            return f"{before_noun(hour, rules, True)} {heures}" + (f" {minutes}" if minutes else "")
        hours = before_noun(hour, rules, True)
        if minutes:
            return f"{hours} {rules.and_word} {minutes}"
        if not whole_hour_word:
            return hours
        return {"it": f"{hours} in punto", "es": f"{hours} en punto"}.get(
            code, f"{hours} {'hora' if hour == 1 else 'horas'}")

    def duration(self, match: re.Match[str], hours: int, minutes: int, seconds: int) -> str:
        if minutes > 59 or seconds > 59:
            return match.group(0)
        parts = [f"{before_noun(value, self.rules, self.units[unit].feminine)} "
                 f"{self.units[unit].form(value == 1)}"
                 for value, unit in ((hours, "h"), (minutes, "min"), (seconds, "s")) if value]
        if not parts:
            return f"{cardinal(0, self.code)} {self.units['s'].plural}"
        if len(parts) == 1:
            return parts[0]
        return ", ".join(parts[:-1]) + f" {self.rules.and_word} {parts[-1]}"

    def decade(self, match: re.Match[str]) -> str:
        written = match.group("decade")
        words = year(int(written), "en") if len(written) == 4 else cardinal(int(written), "en")
        return words[:-1] + "ies" if words.endswith("y") else words + "s"

    def range_start(self, match: re.Match[str]) -> str:
        written = match.group("a")
        if re.fullmatch(r"1[1-9]\d\d|20\d\d", written) and _YEAR_AHEAD.match(match.string, match.end()):
            return f"{year(int(written), self.code)} {self.rules.to_word} "  # "2020-2024"
        amount = self.amount(written[0] if written[0] in "-−+" else None, written.lstrip("-−+"))
        if amount is None:
            return match.group(0)
        # Agrees with the noun after the range's end: "una a dos horas", "1 bis 2 Stunden".
        end = _RANGE_END.match(match.string, match.end())
        gender = self.counted_gender(match.string, end.end()) if end else None
        if gender is None and self.code in ("fr", "it", "es", "pt"):
            gender = MASCULINE  # "de un a dos", as before
        return f"{self.say_counting(amount, gender, match)} {self.rules.to_word} "

    def with_unit(self, match: re.Match[str]) -> str:
        unit = match.group("unit")
        if unit == "°" and self.code in ("it", "es", "pt") and _WORD_AHEAD.match(match.string, match.end()):
            return match.group(0)  # "3° piano" is an ordinal: left for the ordinal pass
        if unit in AMBIGUOUS and match.end("num") == match.start("unit"):
            return match.group(0)  # "4K", "3B": a name, not "four kelvins"
        amount = self.amount(match.group("sign"), match.group("num"))
        if amount is None:
            return match.group(0)
        noun = self.units[unit]
        words = self.say_amount(amount, noun.feminine, case=self.german_case(match), masculine=noun.masculine)
        if match.group("sign") == "+":
            words = f"{self.rules.plus_word} {words}"
        name = noun.form(amount.singular(self.rules))
        if unit.endswith(".") and _SENTENCE_START.match(match.string, match.end()):
            name += "."  # "45 Min. Dann": the unit's dot also ended the sentence
        if self.code == "it" and words.endswith("una") and name[0] in "aeiou":
            return f"{words[:-1]}'{name}"  # "un'ora"
        return f"{words} {name}"

    def per_unit(self, match: re.Match[str]) -> str:
        """ "0,31 €/kWh", "Cent pro kWh": the unit named once, after the language's "per"."""
        spoken = f"{self.rules.per_word} {self.units[match.group('unit')].singular}"
        return f" {spoken}" if match.group("slash") else spoken

    def ordinal_word(self, match: re.Match[str]) -> str:
        number = int(match.group("n"))
        words = ordinal(number, self.code)
        suffix = match.groupdict().get("suffix") or ""
        if suffix in ("ª", "re", "ère", "nde"):
            words = feminine_ordinal(words, self.code)
        return words

    def german_ordinal(self, match: re.Match[str]) -> str:
        article = match.group("article")
        ending = self.rules.ordinal_case_words[article.lower()]
        return f"{article} {ordinal(int(match.group('n')), 'de')}{ending}"

    def version(self, match: re.Match[str]) -> str:
        written = match.group("parts") or match.group("bare")
        parts = written.split(".")
        if match.group("bare") and self.rules.decimal_comma and all(len(part) == 3 for part in parts[1:]) \
                and len(parts[0]) <= 3:
            return match.group(0)  # "1.234.567" is a number with thousands separators
        # "2024.6.1": Home Assistant's versions start with the year.
        first = year(int(parts[0]), self.code) if re.fullmatch(r"1[1-9]\d\d|20\d\d", parts[0]) \
            else cardinal(int(parts[0]), self.code)
        words = f" {self.rules.dot_word} ".join(
            [first, *(cardinal(int(part), self.code) for part in parts[1:])])
        return f"{self.rules.version_word} {words}" if match.group("parts") else words

    def short_version(self, match: re.Match[str]) -> str:
        amount = self.amount(None, match.group("v"))
        if amount is None:
            return match.group(0)
        return f"{self.rules.version_word} {self.say_amount(amount)}"

    def phone(self, match: re.Match[str]) -> str:
        written = match.group("phone")
        digit_count = sum(char.isdigit() for char in written)
        looks_dialled = written[0] in "+(0" or "-" in written or "/" in written or (
            # Spanish and Portuguese numbers have nine digits, written in groups of three
            # (or 3-2-2-2) with spaces: "912 345 678" is a phone, not 912 million.
            self.code in ("es", "pt") and _NINE_DIGIT_PHONE.fullmatch(written) is not None)
        year_range = re.fullmatch(r"(?:1[1-9]\d\d|20\d\d)[–-](?:1[1-9]\d\d|20\d\d)", written)
        if digit_count < 7 or not looks_dialled or year_range:
            return match.group(0)
        groups = re.findall(r"\d+", written)
        spoken = ", ".join(digits(group, self.rules) for group in groups)
        return f"{self.rules.plus_word} {spoken}" if written.startswith("+") else spoken

    def code_word(self, match: re.Match[str]) -> str:
        """A code mixing letters and digits ("PM2.5", "A4", "ABC1234"): read in its parts."""
        parts = []
        for part in re.findall(r"[A-Za-z]+|\d+(?:[.,]\d+)?", match.group("code")):
            if not part[0].isdigit():
                parts.append(part)
            elif len(part) > 3 and part.isdigit():
                parts.append(digits(part, self.rules))
            else:
                amount = self.amount(None, part)
                parts.append(self.say_amount(amount) if amount else digits(part, self.rules))
        return " ".join(parts)

    def fraction(self, match: re.Match[str]) -> str:
        """ "1/2", and before a noun or a unit its share of it: "media taza", "eine halbe
        Tasse", "un quart de litre", "een half uur"."""
        written = f"{match.group('a')}/{match.group('b')}"
        unit = match.groupdict().get("unit")
        name = self.rules.fractions.get(written)
        if name is None:
            spoken = f"{cardinal(int(match.group('a')), self.code)} {self.rules.over_word} " \
                     f"{cardinal(int(match.group('b')), self.code)}"
            return f"{spoken} {self.units[unit].plural}" if unit else spoken
        noun = self.units[unit] if unit else None
        if noun is not None:
            gender = FEMININE if noun.feminine else MASCULINE if noun.masculine else NEUTER
        else:
            gender = self.counted_gender(match.string, match.end())
            if self.code == "nl" and (word := _WORDS_AHEAD.match(match.string, match.end())):
                gender = NEUTER if word.group(1).lower() in DUTCH_NEUTER else MASCULINE
        if gender is None:
            return name
        if written == "1/2" and self.rules.half_before_noun:
            halves = self.rules.half_before_noun
            name = halves.get(gender) or halves[MASCULINE]
        elif self.rules.fraction_of:
            name = f"{name} {self.rules.fraction_of}"  # "un cuarto de taza"
        return f"{name} {noun.singular}" if noun is not None else name

    def digit_string(self, match: re.Match[str]) -> str:
        return digits(match.group("digits"), self.rules)

    def bare_year(self, match: re.Match[str]) -> str:
        return year(int(match.group("y")), self.code)

    def plain(self, match: re.Match[str]) -> str:
        sign = match.group("sign")
        amount = self.amount(sign, match.group("num"))
        if amount is None:
            return match.group(0)
        end = match.end("num")
        gender = counted = self.counted_gender(match.string, end)
        if gender is None and self.hour_context(match):
            gender = FEMININE
        words = self.say_counting(amount, gender, match)
        if sign == "+":
            words = f"{self.rules.plus_word} {words}"
        if self.code == "it" and words.endswith("una") and match.group("space") and counted == FEMININE \
                and match.string[match.end():match.end() + 1].lower() in _VOWELS:
            return words[:-1] + "'"  # "un'ora", "un'altra"
        if end < len(match.string) and match.string[end].isalpha():
            words += " "  # "1.5x": the letter after the number stays a word of its own
        return words + match.group("space")
