"""SentenceSplitter and SsmlReader stay linear on hostile streams (they run on the event loop).

The bounds are generous (seconds of CPU for what takes milliseconds): before the splitter
resumed its search, 4,000 characters of "x. y. " in one-character chunks took 4.7 s and
20,000 dots in one chunk 5 s, growing with the cube and the square of the length.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from wyoming_pocket_tts.text import SentenceSplitter
from wyoming_pocket_tts.text.ssml import SsmlReader

HOSTILE = {
    "sentence ends that never cut": "x. y. " * 4000,
    "one long run of dots": "." * 50_000,
    "an end waiting behind spaces": "Hi." + " " * 50_000,
    "abbreviations": "Dr. " * 6000,
    "one sentence without an end": "word " * 10_000,
}


def cpu_seconds(work: Callable[[], object]) -> float:
    started = time.thread_time()
    work()
    return time.thread_time() - started


@pytest.mark.parametrize("name", sorted(HOSTILE))
@pytest.mark.parametrize("chunk", [1, 7, None])
def test_the_splitter_is_linear_on_hostile_text(name: str, chunk: int | None) -> None:
    text = HOSTILE[name]
    step = chunk or len(text)

    def split() -> None:
        splitter = SentenceSplitter("en")
        for start in range(0, len(text), step):
            list(splitter.add_chunk(text[start:start + step]))
        splitter.finish()

    assert cpu_seconds(split) < 10.0


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_the_ssml_reader_is_linear_on_hostile_text(name: str) -> None:
    text = "<speak>" + HOSTILE[name].replace(" ", " <emphasis>w</emphasis> ", 500) + "</speak>"

    def read() -> None:
        reader = SsmlReader("en")
        for start in range(len(text)):
            list(reader.add_chunk(text[start]))
        reader.finish()

    assert cpu_seconds(read) < 10.0
