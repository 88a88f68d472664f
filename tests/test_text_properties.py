"""Properties of normalize() over generated input: idempotent, total, digit-free, prose-safe."""

import logging
import random
import re
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wyoming_pocket_tts.text import LANGUAGES, normalize

LANGUAGE_CODES = sorted(LANGUAGES)
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

languages = st.sampled_from(LANGUAGE_CODES)

# --- inputs the normaliser claims to cover -----------------------------------------------

UNITS = ["°C", "°F", "%", "kWh", "Wh", "kW", "W", "V", "A", "km", "km/h", "m/s", "mph", "mm",
         "cm", "m", "kg", "g", "hPa", "mbar", "lx", "ppm", "µg/m³", "dB", "min", "h", "s"]
WORDS = ["It is", "Es sind", "Il fait", "Sono", "São", "Hace", "Het is", "and", "und", "et", "—"]


@st.composite
def numbers(draw: st.DrawFn) -> str:
    whole = draw(st.integers(min_value=0, max_value=10**9))
    written = str(whole)
    if draw(st.booleans()):  # thousands separators as the language or a machine writes them
        separator = draw(st.sampled_from([",", ".", "\u00a0", "\u202f", " "]))
        written = f"{whole:,}".replace(",", separator)
    if draw(st.booleans()):
        written += draw(st.sampled_from([".", ","])) + str(draw(st.integers(0, 999)))
    if draw(st.booleans()):
        written = draw(st.sampled_from(["-", "−", "+"])) + written
    return written


@st.composite
def covered_forms(draw: st.DrawFn) -> str:
    small = st.integers(min_value=0, max_value=99)
    kind = draw(st.integers(0, 11))
    if kind == 0:
        return f"{draw(numbers())}{draw(st.sampled_from(['', ' ']))}{draw(st.sampled_from(UNITS))}"
    if kind == 1:
        return f"{draw(numbers())}"
    if kind == 2:
        return f"{draw(small)}–{draw(small)} {draw(st.sampled_from(UNITS))}"
    if kind == 3:
        suffix = draw(st.sampled_from(["", " am", " pm", " PM", " Uhr"]))
        return f"{draw(st.integers(0, 23))}:{draw(st.integers(0, 59)):02d}{suffix}"
    if kind == 4:
        return f"{draw(st.integers(0, 9))}:{draw(st.integers(0, 59)):02d}:{draw(st.integers(0, 59)):02d}"
    if kind == 5:
        year, month, day = draw(st.integers(1900, 2099)), draw(st.integers(1, 12)), draw(st.integers(1, 28))
        return draw(st.sampled_from([f"{year}-{month:02d}-{day:02d}", f"{day}.{month:02d}.{year}",
                                     f"{day} March {year}", f"March {day}th, {year}",
                                     f"{day}. März {year}", f"{day} de marzo de {year}"]))
    if kind == 6:
        return f"{draw(st.integers(1, 99))}{draw(st.sampled_from(['st', 'nd', 'rd', 'th', 'er', 'e', 'º', 'ª', '.']))}"
    if kind == 7:
        amount = draw(st.sampled_from(["4.20", "4,20", "12", "1.234,56", "0.99", "30"]))
        sign = draw(st.sampled_from(["$", "€", "£", "CHF ", "EUR "]))
        return draw(st.sampled_from([f"{sign}{amount}", f"{amount} {sign.strip()}"]))
    if kind == 8:
        return draw(st.sampled_from(["+49 170 1234567", "555-123-4567", "06 12 34 56 78",
                                     "(030) 1234-5678"]))
    if kind == 9:
        parts = draw(st.lists(st.integers(0, 2099), min_size=3, max_size=4))
        return draw(st.sampled_from(["v", ""])) + ".".join(map(str, parts))
    if kind == 10:
        return f"{draw(st.integers(1, 9))}/{draw(st.integers(1, 12))}"
    return draw(st.sampled_from(["PM2.5", "CO2", "A4", "ABC1234", "0049", "80331", "18h40"]))


@st.composite
def covered_replies(draw: st.DrawFn) -> str:
    pieces = draw(st.lists(st.one_of(covered_forms(), st.sampled_from(WORDS)), min_size=1, max_size=6))
    return " ".join(pieces) + draw(st.sampled_from(["", ".", "!", "?"]))


@SETTINGS
@given(covered_replies(), languages)
def test_covered_input_comes_out_without_digits(text: str, language: str) -> None:
    spoken = normalize(text, language)
    assert not any(char.isdigit() for char in spoken), (text, spoken)


@SETTINGS
@given(st.one_of(covered_replies(), st.text()), languages)
def test_normalize_is_idempotent(text: str, language: str) -> None:
    once = normalize(text, language)
    assert normalize(once, language) == once


@SETTINGS
@given(st.text(), st.text(max_size=8))
def test_arbitrary_unicode_never_raises(text: str, language: str) -> None:
    assert isinstance(normalize(text, language), str)


domain_label = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCXYZäöü0123456789-", min_size=1, max_size=8).filter(
    lambda candidate: not candidate.startswith("-") and not candidate.endswith("-"))


@st.composite
def email_replies(draw: st.DrawFn) -> str:
    local = draw(st.text(alphabet="abcxyzABC0123456789", min_size=1, max_size=2)) + draw(
        st.text(alphabet="abcxyzABC0123456789._+-", max_size=10))
    domain = ".".join(draw(st.lists(domain_label, min_size=1, max_size=3)) + [draw(st.sampled_from(["com", "de", "io", "fr"]))])
    before, after = draw(st.sampled_from([("Write to ", "."), ("", ""), ("<", ">"), ("mailto:", ", thanks!")]))
    return f"{before}{local}@{domain}{after}"


@SETTINGS
@given(email_replies(), languages)
def test_email_addresses_are_read_in_words(text: str, language: str) -> None:
    spoken = normalize(text, language)
    assert "@" not in spoken and LANGUAGES[language].at_word in spoken, (text, spoken)
    assert normalize(spoken, language) == spoken


def test_fuzzed_strings_never_raise() -> None:
    # Characters the patterns look at, mixed with emoji, markdown and other scripts.
    alphabet = list("0123456789 .,:;-–/+%°$€£()[]*_#|`>@\n\tabcXYZhmsµ³²ºªäéñ") + ["🙂", "👍🏽", "\u200d", "\ufe0f", "٣", "①", "中"]
    generator = random.Random(15)
    for _ in range(10_000):
        text = "".join(generator.choice(alphabet) for _ in range(generator.randint(0, 40)))
        assert isinstance(normalize(text, generator.choice(LANGUAGE_CODES)), str), text


ABBREVIATION_WORDS = {re.sub(r"\W", "", item.written).lower()
                      for rules in LANGUAGES.values() for item in rules.abbreviations}
word = st.text(alphabet="abcdefghijklmnopqrstuvwxyzäöüéèàçñ", min_size=2, max_size=10).filter(
    lambda candidate: candidate not in ABBREVIATION_WORDS)


@st.composite
def prose(draw: st.DrawFn) -> str:
    sentences = []
    for _ in range(draw(st.integers(1, 4))):
        words = draw(st.lists(word, min_size=1, max_size=8))
        words[0] = words[0].capitalize()
        commas = draw(st.lists(st.booleans(), min_size=len(words), max_size=len(words)))
        body = " ".join(w + ("," if comma and index < len(words) - 1 else "")
                        for index, (w, comma) in enumerate(zip(words, commas)))
        sentences.append(body + draw(st.sampled_from([".", "!", "?"])))
    return " ".join(sentences)


@SETTINGS
@given(prose(), languages)
def test_plain_prose_is_left_unchanged(text: str, language: str) -> None:
    assert normalize(text, language) == text


def test_unknown_language_uses_english_rules_and_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="wyoming_pocket_tts.text"):
        first = normalize("It is 19.5 °C.", "sv-test")
        second = normalize("It is 4 %.", "sv-test")
    assert first == normalize("It is 19.5 °C.", "en")
    assert second == "It is four percent."
    assert [record.getMessage() for record in caplog.records].count(
        "No text normalisation rules for language 'sv-test': using English rules") == 1


def test_regional_codes_use_their_language() -> None:
    assert normalize("19,5 °C", "de-CH") == normalize("19,5 °C", "de") == "neunzehn Komma fünf Grad Celsius"


def test_text_that_is_not_a_string_is_a_clear_error() -> None:
    with pytest.raises(TypeError, match="text must be a str"):
        normalize(b"19.5 \xc2\xb0C", "en")  # type: ignore[arg-type]


def test_language_that_is_not_a_string_is_a_clear_error() -> None:
    with pytest.raises(TypeError, match="language must be a str"):
        normalize("19.5 °C", None)  # type: ignore[arg-type]


def test_emoji_only_reply_becomes_empty() -> None:
    assert normalize("👍🏽 🎉", "en") == ""


def test_package_imports_no_torch_and_its_libraries_on_first_use() -> None:
    # The server imports it: it must stay torch-free, and cheap to import (`--version`).
    code = ("import sys, wyoming_pocket_tts.text as t\n"
            "libraries = ('num2words', 'emoji', 'markdown_it')\n"
            "print(any(name in sys.modules for name in libraries))\n"
            "t.warm_up('de')\n"
            "print(all(name in sys.modules for name in libraries), 'torch' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["False", "True", "False"]
