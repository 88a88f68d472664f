"""From a request's text to the chunks the model speaks one at a time.

The model was trained on single sentences: long text is split at sentence ends (and long
sentences at commas, semicolons and colons), then regrouped into chunks of at most
`max_tokens` tokens. Each flag mirrors a field of the model config, and the result must
match upstream's token for token, since the chunks decide the audio.

Upstream stops there, so a long run without punctuation becomes one prompt whose memory
grows with the text (gigabytes for a few thousand characters). Here a piece still longer
than `max_tokens` after the clause split is cut at word boundaries, and a single "word"
longer than that at character boundaries: no chunk is much longer than `max_tokens`,
whatever the text, and text whose pieces all fit is chunked exactly as upstream does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..core.errors import TextError
from .tokenizer import Tokenizer

SENTENCE_END = ".!?\u2026"
WEAK_PUNCTUATION = ",;:-\u2013\u2014"
CLOSING_MARKS = "\"'\u201d\u2019)]\u00bb"


@dataclass(frozen=True)
class TextRules:
    pad_short_inputs: bool = False
    remove_semicolons: bool = False
    append_terminal_punctuation: bool = True
    capitalize_first_letter: bool = True
    replace_characters: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PreparedText:
    text: str
    # Short utterances get more frames after EOS, so their last word is not cut.
    frames_after_eos: int


def prepare(text: str, rules: TextRules) -> PreparedText:
    text = text.strip()
    if rules.replace_characters:
        text = " ".join(text.translate(str.maketrans(rules.replace_characters)).split())
        # A deleted quote can leave "Hi?, she said": keep only the sentence mark.
        text = re.sub(r"([.!?\u2026])\s*[,;:]", r"\1", text)
    if not text:
        raise TextError("the text is empty")
    text = text.replace("\n", " ").replace("\r", " ").replace("  ", " ")
    if rules.remove_semicolons:
        text = text.replace(";", ",")
    frames_after_eos = 3 if len(text.split()) <= 4 else 1
    if rules.capitalize_first_letter and not text[0].isupper():
        text = text[0].upper() + text[1:]
    if rules.append_terminal_punctuation:
        text = _end_with_sentence_mark(text)
    if rules.pad_short_inputs and len(text.split()) < 5:
        text = " " * 8 + text
    return PreparedText(text, frames_after_eos)


def _end_with_sentence_mark(text: str) -> str:
    core = text.rstrip(CLOSING_MARKS + " ")
    closers = text[len(core) :].strip()
    if not core or core[-1] in SENTENCE_END:
        return text
    if core[-1] in WEAK_PUNCTUATION:
        return core.rstrip(WEAK_PUNCTUATION + " ") + "." + closers
    return text + "."


def _split_points(ids: list[int], marks: set[int], skip_decimal: Tokenizer | None) -> list[int]:
    """Start index of each segment: the first token after a run of `marks`, plus the ends."""
    points = [0]
    after_mark = False
    for index, token in enumerate(ids):
        if token in marks:
            after_mark = True
            continue
        if after_mark and not (skip_decimal and _inside_number(ids, index, skip_decimal)):
            points.append(index)
        after_mark = False
    points.append(len(ids))
    return points


# Tokens decoded on each side of a split point: enough for the 2 characters before it and
# the one after it. Decoding the whole prefix (as upstream does) is quadratic: "1." * 5000
# took 11 s.
_NUMBER_WINDOW = 8


def _inside_number(ids: list[int], index: int, tokenizer: Tokenizer) -> bool:
    """True when the split would fall inside a decimal number such as 3.14."""
    before = tokenizer.decode(ids[max(0, index - _NUMBER_WINDOW) : index])
    if len(before) < 2 and index > _NUMBER_WINDOW:  # tokens that decode to nothing: look further
        before = tokenizer.decode(ids[:index])
    after = tokenizer.decode(ids[index : index + _NUMBER_WINDOW])
    return len(before) >= 2 and before[-1] == "." and before[-2].isdigit() and after[:1].isdigit()


def _segments(ids: list[int], points: list[int], tokenizer: Tokenizer) -> list[tuple[int, str]]:
    return [(end - start, tokenizer.decode(ids[start:end])) for start, end in zip(points, points[1:])]


def split_into_chunks(text: str, tokenizer: Tokenizer, rules: TextRules, max_tokens: int) -> list[str]:
    prepared = prepare(text, rules).text.strip()
    ids = tokenizer.encode(prepared)
    # The first id of each probe is the word-start marker; the rest are the punctuation ids.
    sentence_marks = set(tokenizer.encode(".!...?")[1:])
    clause_marks = set(tokenizer.encode(",;:")[1:])
    sentences = _segments(ids, _split_points(ids, sentence_marks, tokenizer), tokenizer)

    pieces: list[tuple[int, str]] = []
    for count, sentence in sentences:
        if count > max_tokens:
            sub_ids = tokenizer.encode(sentence.strip())
            clauses = _segments(sub_ids, _split_points(sub_ids, clause_marks, None), tokenizer)
            if len(clauses) > 1:
                pieces.extend(piece for clause in clauses for piece in _fit(clause, tokenizer, max_tokens))
                continue
        pieces.extend(_fit((count, sentence), tokenizer, max_tokens))

    chunks: list[str] = []
    current, current_count = "", 0
    for count, piece in pieces:
        if not current:
            current, current_count = piece, count
        elif current_count + count > max_tokens:
            chunks.append(current.strip())
            current, current_count = piece, count
        else:
            current, current_count = f"{current} {piece}", current_count + count
    if current:
        chunks.append(current.strip())
    return chunks


def _fit(piece: tuple[int, str], tokenizer: Tokenizer, max_tokens: int) -> list[tuple[int, str]]:
    """`piece` itself if it fits in `max_tokens`, else its words (long words cut), to regroup."""
    count, text = piece
    if count <= max_tokens:
        return [piece]
    words: list[tuple[int, str]] = []
    for word in text.split():
        word_count = len(tokenizer.encode(word))
        if word_count <= max_tokens:
            words.append((word_count, word))
        else:
            words.extend(_cut_word(word, tokenizer, max_tokens))
    return words


def _cut_word(word: str, tokenizer: Tokenizer, max_tokens: int) -> list[tuple[int, str]]:
    """Slices of `word` of at most `max_tokens` tokens each.

    Cut by characters, not by decoding windows of token ids: a tokenizer without byte
    fallback decodes characters it does not know as "<unk>", which would change the text.
    """
    slices: list[tuple[int, str]] = []
    start = 0
    while start < len(word):
        # A character is at least one token in practice, so max_tokens characters is the
        # longest slice worth trying; halve it while it encodes to too many tokens.
        length = min(max_tokens, len(word) - start)
        while True:
            count = len(tokenizer.encode(word[start : start + length]))
            if count <= max_tokens or length == 1:
                break
            length = max(1, length // 2)
        slices.append((count, word[start : start + length]))
        start += length
    return slices
