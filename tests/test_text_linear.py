"""normalize() is linear in its text, whatever the text holds (issue 27).

Before: the number patterns backtracked quadratically on long digit runs (20,000 digits took
44 s), and "999 " * 1500, one number with 1,500 thousands groups, crashed on Python's
4,300-digit limit for int(). Linear is asserted on the growth of CPU time from one length to
ten times that length: about 10 when linear, 100 when quadratic; the bound (30) is generous
and no absolute time is asserted.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from wyoming_pocket_tts.text import LANGUAGES, MAX_PIECE_CHARS, SentenceSplitter, normalize
from wyoming_pocket_tts.text.numbers import digits
from wyoming_pocket_tts.text.numerals import MAX_NUMBER_DIGITS
from wyoming_pocket_tts.text.sentences import MAX_SENTENCE_CHARS

LINEAR_GROWTH_BOUND = 30


def cpu_seconds(work: Callable[[], object], repeat: int = 1) -> float:
    """The least CPU time of `repeat` runs (the others were disturbed)."""
    best = float("inf")
    for _ in range(repeat):
        started = time.thread_time()
        work()
        best = min(best, time.thread_time() - started)
    return best


def growth(make: Callable[[int], str], language: str, size: int) -> float:
    """CPU time of normalising make(10 * size) over that of make(size)."""
    small, large = make(size), make(10 * size)
    normalize(small, language)  # caches and patterns built before anything is measured
    return cpu_seconds(lambda: normalize(large, language)) / max(
        cpu_seconds(lambda: normalize(small, language), repeat=3), 1e-4)


def test_a_long_digit_run_costs_linear_time() -> None:
    ratio = growth(lambda n: "1" * n, "en", 20_000)  # 20,000 and 200,000 digits
    assert ratio < LINEAR_GROWTH_BOUND, ratio


# Units repeated into hostile text: each stresses a pattern that once scanned the rest of the
# text from every match (a slice, a search back to the start) or backtracked over a run.
HOSTILE_UNITS = {
    "grouped thousands": "999 ",
    "dotted groups": "1.",
    "comma groups": "1,",
    "version-like": "1.2.3a ",
    "number and unit": "1 W ",
    "a.m. times": "4 p.m. ",
    "German dates": "am 3. März ",
    "abbreviations": "ca. ",
    "letters and digits": "1a",
    "phone-like": "12 34 ",
    "ranges": "1-2 °C ",
}


@pytest.mark.parametrize("name", sorted(HOSTILE_UNITS))
def test_hostile_text_costs_linear_time(name: str) -> None:
    unit = HOSTILE_UNITS[name]
    ratio = growth(lambda n: unit * (n // len(unit)), "de", 5_000)  # 5,000 and 50,000 characters
    assert ratio < LINEAR_GROWTH_BOUND, ratio


@pytest.mark.parametrize("language", sorted(LANGUAGES))
def test_a_number_of_1500_groups_is_read_group_by_group(language: str) -> None:
    spoken = normalize("999 " * 1500, language)  # 4,500 digits: more than int() reads
    assert not any(char.isdigit() for char in spoken)
    group = normalize("999", language)
    assert spoken.count(group) == 1500


@pytest.mark.parametrize("language", sorted(LANGUAGES))
def test_a_long_run_is_read_digit_by_digit_and_a_long_decimal_as_a_decimal(language: str) -> None:
    rules = LANGUAGES[language]
    one = digits("1", rules)
    assert normalize("7" + "1" * 40, language).split()[-40:] == [one] * 40
    decimal = "," if rules.decimal_comma else "."
    spoken = normalize(f"3{decimal}{'1' * 40}", language)
    assert spoken.split()[:2] == [normalize("3", language), rules.decimal_word]
    assert spoken.split()[2:] == [one] * 40


def test_numbers_up_to_the_bound_are_still_read_as_numbers() -> None:
    largest = " ".join(["999"] * (MAX_NUMBER_DIGITS // 3))  # written in groups of three
    assert normalize(largest, "en").startswith("nine hundred and ninety-nine trillion")
    assert normalize("20 000 Besucher", "de") == "zwanzigtausend Besucher"


def test_long_text_is_read_in_pieces_cut_at_sentence_ends() -> None:
    sentence = "It is 19.5 °C in room 4. "
    text = sentence * (3 * MAX_PIECE_CHARS // len(sentence))
    assert normalize(text, "en") == " ".join([normalize(sentence, "en")] * text.count(sentence))


def test_streamed_sentences_are_bounded() -> None:
    splitter = SentenceSplitter("en")
    text = "word, " * 2000 + "1" * 5000 + " end"
    sentences = [*splitter.add_chunk(text), splitter.finish()]
    assert all(len(sentence) <= MAX_SENTENCE_CHARS for sentence in sentences)
    assert "".join(sentences).replace(" ", "") == text.replace(" ", "")
    assert sentences[0].endswith("word,")  # cut after a clause mark where there is one


def test_releasing_many_sentences_from_one_chunk_is_linear() -> None:
    def split(count: int) -> Callable[[], object]:
        return lambda: list(SentenceSplitter("en").add_chunk("Hi there! " * count))

    ratio = cpu_seconds(split(100_000)) / max(cpu_seconds(split(10_000), repeat=3), 1e-4)
    assert ratio < LINEAR_GROWTH_BOUND, ratio
