"""The server reads replies as words (`wyoming_pocket_tts.text`, issue 15) before the engine
sees them, one-shot and streamed, unless `--no-normalize`.

In process, on the fake engine: which texts reach the engine (normalised, split into
sentences with knowledge of list markers and abbreviations). As a real process, on the demo
model with EOS disabled (a reply's length then follows its token count): the raw text and
its normalised form give the same audio, and `--no-normalize` a different one.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from server_fixtures import (
    FakeModel,
    FakeVoices,
    Response,
    ServerProcess,
    ha_stream,
    inprocess_server,
    one_shot,
    start_server_process,
    stop_cleanly,
    wait_voices,
)

from wyoming_pocket_tts.core import GenerationOptions
from wyoming_pocket_tts.server.service import Backend, ReplyOptions
from wyoming_pocket_tts.text import normalize

RAW = "It is 19.5 °C."
# A streamed reply as an LLM writes it: an abbreviation, a time, a numbered list, a unit.
REPLY = "Dr. Smith comes at 4:10 PM. Your list:\n1. Milk\n2. Eggs 🥚\nIt is 19.5 °C."


def run(coro):
    return asyncio.run(coro)


def deltas(text: str, size: int = 4) -> list[str]:
    """Cut like an LLM stream, across words, numbers and sentence ends."""
    return [text[start : start + size] for start in range(0, len(text), size)]


def fake_backend(model: FakeModel, reply: ReplyOptions):
    def load() -> Backend:
        return Backend(model=model, voices=FakeVoices(), options=GenerationOptions(), reply=reply)

    return load


async def request(port: int, mode: str, text: str) -> Response:
    """One reply, one-shot or streamed as Home Assistant streams an LLM's deltas."""
    if mode == "one-shot":
        return await one_shot(port, text)
    response, _ = await ha_stream(port, deltas(text), pause=0.0)
    return response


def engine_texts(tmp_path: Path, mode: str, text: str, reply: ReplyOptions = ReplyOptions(),
                 frames_per_word: int = 2) -> list[str]:
    """What the fake engine is asked to say for one request to an in-process server; for a
    request that fails, ["error: MESSAGE"], and the engine must have been asked nothing."""
    model = FakeModel(frame_delay=0.0, frames_per_word=frames_per_word)

    async def go() -> Response:
        async with inprocess_server(fake_backend(model, reply), tmp_path) as port:
            return await request(port, mode, text)

    response = run(go())
    assert response.error is None or not model.log.texts, response.error
    return model.log.texts if response.error is None else [f"error: {response.error}"]


def test_words_are_what_the_normaliser_says() -> None:
    # The process tests below rest on these: the raw text has digits and a unit, its
    # normalised form none, and a different length.
    words = normalize(RAW, "en")
    assert words == "It is nineteen point five degrees Celsius."
    assert not any(char.isdigit() for char in words)


def test_one_shot_text_reaches_the_engine_normalised(tmp_path) -> None:
    texts = engine_texts(tmp_path, "one-shot", "It is 19.5 °C and **cloudy** ☁️.")
    assert texts == ["It is nineteen point five degrees Celsius and cloudy."]


def test_streamed_sentences_are_split_with_the_language_then_normalised(tmp_path) -> None:
    # Not cut after "Dr." nor after the list markers "1." and "2."; the emoji is dropped.
    assert engine_texts(tmp_path, "streamed", REPLY) == [
        "Doctor Smith comes at four ten PM.", "Your list:", "Milk.", "Eggs.",
        "It is nineteen point five degrees Celsius.",
    ]  # fmt: skip


def test_one_shot_with_pauses_is_split_after_normalising(tmp_path) -> None:
    texts = engine_texts(tmp_path, "one-shot", "Dr. Smith comes at 4:10 PM. It is 19.5 °C.",
                         ReplyOptions(sentence_silence=0.2))  # fmt: skip
    assert texts == ["Doctor Smith comes at four ten PM.", "It is nineteen point five degrees Celsius."]


@pytest.mark.parametrize("mode", ["one-shot", "streamed"])
def test_no_normalize_sends_the_text_as_written(tmp_path, mode: str) -> None:
    assert engine_texts(tmp_path, mode, RAW, ReplyOptions(normalize=False)) == [RAW]


def test_a_reply_of_emoji_alone_is_a_clear_error(tmp_path) -> None:
    [error] = engine_texts(tmp_path, "one-shot", "👍🎉")
    assert error.startswith("error: cannot speak this text")


def test_a_number_longer_than_int_reads_is_spoken(tmp_path) -> None:
    # 4,500 digits in groups of three: one number to the patterns, more digits than
    # Python's int() reads (it was an "internal error"). Streamed, sentences are bounded
    # (text.sentences.MAX_SENTENCE_CHARS): no sentence holds such a number.
    texts = engine_texts(tmp_path, "one-shot", "Count: " + "100 " * 1500 + "Done.", frames_per_word=1)
    assert texts and not any(text.startswith("error") for text in texts), texts[:1]
    assert not any(char.isdigit() for text in texts for char in text)
    assert texts[-1].endswith("Done.")


# -- the real server ---------------------------------------------------------------------


def _start(tmp_path: Path, *extra: str) -> ServerProcess:
    proc = start_server_process(tmp_path, "--eos-threshold", "1000000000", *extra)
    wait_voices(proc)
    return proc


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """Two demo servers, normalising and not."""
    procs = {}
    try:
        procs["normalize"] = _start(tmp_path_factory.mktemp("normalize"))
        procs["no-normalize"] = _start(tmp_path_factory.mktemp("no_normalize"), "--no-normalize")
        yield procs
    finally:
        for proc in procs.values():
            stop_cleanly(proc, log_tail=2000)


def _audio_bytes(proc: ServerProcess, text: str, mode: str) -> int:
    response = run(request(proc.port, mode, text))
    assert response.error is None, response.error
    return len(response.audio)


@pytest.mark.parametrize("mode", ["one-shot", "streamed"])
def test_the_server_speaks_the_normalised_text(servers, mode: str) -> None:
    words = normalize(RAW, "en")
    normalizing = servers["normalize"]
    assert _audio_bytes(normalizing, RAW, mode) == _audio_bytes(normalizing, words, mode)
    as_written = servers["no-normalize"]
    assert _audio_bytes(as_written, RAW, mode) != _audio_bytes(as_written, words, mode)
