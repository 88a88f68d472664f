"""Text to chunks: every chunk within the token bound, whatever the punctuation.

Punctuated text keeps upstream's chunks (tests/test_engine_parity.py compares them with
upstream's own); these tests cover what upstream leaves unbounded: runs without sentence
or clause marks, and single "words" longer than a chunk.
"""

from __future__ import annotations

import pytest
from tokenizer_fixtures import make_sentencepiece_model

from wyoming_pocket_tts.engine import TTSModel
from wyoming_pocket_tts.engine.text import TextRules, split_into_chunks
from wyoming_pocket_tts.engine.tokenizer import SentencePieceTokenizer, Tokenizer

MAX_TOKENS = 50
RULES = TextRules()


class CountingTokenizer:
    """Wraps a tokenizer and counts how many token ids it was asked to decode."""

    def __init__(self, inner: Tokenizer) -> None:
        self._inner = inner
        self.vocab_size = inner.vocab_size
        self.decoded_ids = 0

    def encode(self, text: str) -> list[int]:
        return self._inner.encode(text)

    def decode(self, ids: list[int]) -> str:
        self.decoded_ids += len(ids)
        return self._inner.decode(ids)


@pytest.fixture(scope="module")
def tokenizer(demo_model: TTSModel) -> Tokenizer:
    """The demo model's: it knows every ASCII letter, so decoded chunks keep the text."""
    return demo_model.tokenizer


@pytest.fixture(scope="module")
def sentencepiece(tmp_path_factory: pytest.TempPathFactory) -> Tokenizer:
    """A tiny SentencePiece model: few pieces, so words cost many tokens."""
    return SentencePieceTokenizer(make_sentencepiece_model(tmp_path_factory.mktemp("sp") / "t.model", 256))


def token_counts(chunks: list[str], tokenizer: Tokenizer) -> list[int]:
    return [len(tokenizer.encode(chunk)) for chunk in chunks]


def words_of(chunks: list[str]) -> list[str]:
    return " ".join(chunks).split()


@pytest.mark.parametrize("text", [
    "a " * 9999,
    "word " * 3999,
    "and then the cat sat on the mat " * 600,
])  # fmt: skip
def test_unpunctuated_text_is_cut_at_words(text: str, tokenizer: Tokenizer) -> None:
    chunks = split_into_chunks(text, tokenizer, RULES, MAX_TOKENS)
    assert len(chunks) > 10
    assert max(token_counts(chunks, tokenizer)) <= MAX_TOKENS
    # Every word spoken once, in order, none cut (only the first capitalised, a "." added).
    spoken = words_of(chunks)
    expected = text.split()
    assert [w.lower() for w in spoken[:-1]] == expected[:-1]
    assert spoken[-1].rstrip(".") == expected[-1]


@pytest.mark.parametrize("word", ["a" * 19_999, "x" * 777, "1." * 5000])
def test_a_word_longer_than_a_chunk_is_cut(word: str, tokenizer: Tokenizer) -> None:
    chunks = split_into_chunks(word, tokenizer, RULES, MAX_TOKENS)
    assert len(chunks) > 1
    assert max(token_counts(chunks, tokenizer)) <= MAX_TOKENS
    joined = "".join(chunks)
    assert joined.lower().rstrip(".") == word.lower().rstrip(".")


def test_a_long_clause_among_short_ones_is_cut_the_rest_kept(tokenizer: Tokenizer) -> None:
    long_clause = " ".join(["lorem"] * 80)
    text = f"Short one, {long_clause}, and a short end. Next sentence here."
    chunks = split_into_chunks(text, tokenizer, RULES, MAX_TOKENS)
    assert max(token_counts(chunks, tokenizer)) <= MAX_TOKENS
    assert chunks[0].startswith("Short one,")
    assert chunks[-1].endswith("Next sentence here.")
    assert words_of(chunks) == text.split()


def test_punctuated_text_is_split_at_sentences_only(tokenizer: Tokenizer) -> None:
    sentence = "The quick brown fox jumps over the lazy dog."
    text = " ".join([sentence] * 6)
    chunks = split_into_chunks(text, tokenizer, RULES, MAX_TOKENS)
    assert all(chunk.endswith(".") for chunk in chunks)
    assert all(chunk.startswith("The quick") for chunk in chunks)
    assert words_of(chunks) == text.split()


def test_decimal_numbers_are_not_split(tokenizer: Tokenizer) -> None:
    chunks = split_into_chunks("Pi is 3.14 roughly.", tokenizer, RULES, MAX_TOKENS)
    assert chunks == ["Pi is 3.14 roughly."]


def test_number_check_decodes_a_window_not_the_whole_prefix(tokenizer: Tokenizer) -> None:
    # Each sentence mark used to decode the whole text before and after it: quadratic.
    counting = CountingTokenizer(tokenizer)
    text = "1." * 5000
    split_into_chunks(text, counting, RULES, MAX_TOKENS)
    assert counting.decoded_ids < 100 * len(text)


@pytest.mark.parametrize("text", ["bada kemi " * 2000, "bada" * 3000, "Bada kemi, " * 1000 + "sopu " * 900])
def test_sentencepiece_chunks_are_bounded(text: str, sentencepiece: Tokenizer) -> None:
    chunks = split_into_chunks(text, sentencepiece, RULES, MAX_TOKENS)
    assert len(chunks) > 10
    assert max(token_counts(chunks, sentencepiece)) <= MAX_TOKENS


def test_empty_text_is_still_an_error(tokenizer: Tokenizer) -> None:
    from wyoming_pocket_tts.core.errors import TextError

    with pytest.raises(TextError):
        split_into_chunks("   ", tokenizer, RULES, MAX_TOKENS)


def test_the_model_caps_every_chunk(demo_model: TTSModel) -> None:
    chunks = demo_model.chunk_text("x" * 5000 + " " + "y " * 3000)
    assert max(token_counts(chunks, demo_model.tokenizer)) <= MAX_TOKENS
