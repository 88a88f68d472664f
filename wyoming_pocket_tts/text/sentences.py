"""Streamed text cut into sentences, without cutting after "3.", "1." or "z. B.".

A drop-in for `sentence_stream.SentenceBoundaryDetector` as the server uses it
(`add_chunk(text)` yields finished sentences, `finish()` returns the rest), written here
because that detector knows no language: it cuts "am 3. März" after "3." and numbered
list items after "1.". A sentence is released as soon as the next one has visibly
started (one non-space character after the boundary), so first audio comes as early.
Line breaks end sentences too (list items, headings), except inside a code fence, a
table or a paragraph that wraps onto a line starting in lower case.

Linear in the text, however it is cut: each chunk resumes the search where the text stops
being decided (a sentence end waiting for its next character), a run of end marks is
matched once from its start, and each candidate is judged on the last `CONTEXT_CHARS` of
the text before it. (Searching the whole pending text again per chunk made a stream of
"x. y. " in one-character chunks cubic: 4,000 characters took 4.7 s of the event loop.)
A large chunk is taken in slices of `SLICE_CHARS`, so that releasing a sentence never
copies more than a slice and a sentence of pending text (one 1.6 MB chunk of short
sentences took 7.7 s when each release copied the rest of the chunk).

No sentence is longer than `MAX_SENTENCE_CHARS`: text that runs on without a sentence end
is cut after a clause mark or at a space (anywhere, if it has none) near that length. The
sentence is the unit every later stage works on (normalising, synthesis): bounding it
bounds what one of them can cost, and a reply still starts speaking after a few seconds.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from .languages import LANGUAGES, language_rules

# End punctuation with closing quotes/brackets, then space, then the next sentence's start.
# From the start of a run of end marks only, and without backtracking into it: the same
# matches, each run looked at once ("....." is not tried again from each of its dots).
_BOUNDARY = re.compile(r"(?<![.!?…])(?P<end>[.!?…]++[\"'”’»)\]]*+)(?=\s+(?P<next>\S))"
                       r"|(?P<newline>\n)(?=[ \t\n]*(?P<line>\S))")
# The end of the text that a later chunk may still decide: end marks, closers and spaces.
_UNDECIDED_TAIL = re.compile(r"(?<![.!?…\"'”’»)\]\s])[.!?…\"'”’»)\]\s]*+\Z")
_SPACE = re.compile(r"\s")
# What a candidate is judged on: its last two tokens (abbreviations, initials, list
# markers), all short; the end-anchored patterns cost a step per character searched.
CONTEXT_CHARS = 64
_LAST_TOKENS = re.compile(r"(?:(\S+)\s)?(\S+)$")
# "1." opening a sentence, a line or a list after ":" is a list marker in every language;
# German also writes ordinals so ("am 3. März", "der 1. Platz").
_LIST_MARKER = re.compile(r"(?:^|[\n:])\s*\d{1,3}\.$")
_GERMAN_ORDINAL = re.compile(r"(?:^|\s)\d{1,3}\.$")
_INITIAL = re.compile(r"(?:^|\s)[A-ZÀ-ÖØ-Þ]\.$")  # "J. R. R.", not "9 h."
_FENCE = "```"
# The longest sentence released (about 15 s of speech; a written sentence is rarely a
# quarter of that). A longer one is cut in the second half of this length.
MAX_SENTENCE_CHARS = 1_000
# Where a sentence too long is cut, best first: after a clause mark, at a space.
_FORCED_CUTS = (re.compile(r"[,;:–—](?=\s)"), re.compile(r"(?<=\S)\s"))
SLICE_CHARS = 256


class SentenceSplitter:
    """Cuts streamed text into sentences with knowledge of one language's abbreviations."""

    def __init__(self, language: str | None = None) -> None:
        """`language`: a code as for `normalize`; None (not known yet, e.g. while the model
        loads) applies every language's abbreviations and German ordinals, which can only
        join two sentences, never cut one."""
        chosen = [language_rules(language)] if language is not None else list(LANGUAGES.values())
        self._ordinal_dots = any(rules.code == "de" for rules in chosen)
        self._abbreviations = {re.sub(r"\s+", "", item.written).lower(): item
                               for rules in reversed(chosen) for item in rules.abbreviations}
        # "z." followed by "B": the first part of "z. B.", not a sentence end.
        self._openings = {key[:index + 2] for key in self._abbreviations
                          for index, char in enumerate(key[:-1]) if char == "."}
        self._text = ""
        self._reset_scan()

    def _reset_scan(self) -> None:
        self._scan_from = 0  # no cut can start before this in the pending text
        self._fences_to = 0  # code fences counted in the pending text up to here
        self._fences = 0

    @property
    def pending_chars(self) -> int:
        """Characters received but not yet released as a sentence."""
        return len(self._text)

    def add_chunk(self, chunk: str) -> Iterator[str]:
        """Add streamed text; yield each sentence that is now complete."""
        if len(chunk) <= SLICE_CHARS:
            return self._add(chunk)  # an LLM's delta: no generator in between
        return self._add_slices(chunk)

    def _add_slices(self, chunk: str) -> Iterator[str]:
        for start in range(0, len(chunk), SLICE_CHARS):
            yield from self._add(chunk[start:start + SLICE_CHARS])

    def _add(self, chunk: str) -> Iterator[str]:
        after_space = self._text[-1:].isspace()
        self._text += chunk
        if not chunk.strip() or not (after_space or _SPACE.search(chunk)):
            # A cut needs a boundary, space, then a character: spaces alone decide nothing,
            # nor does a chunk without space after text that ended without one ("....").
            if len(self._text) <= MAX_SENTENCE_CHARS:
                return
        while True:
            cut = self._next_cut()
            if (cut is None or cut > MAX_SENTENCE_CHARS) and len(self._text) > MAX_SENTENCE_CHARS:
                cut = self._forced_cut()
            if cut is None:
                return
            sentence, self._text = self._text[:cut].strip(), self._text[cut:].lstrip()
            self._reset_scan()
            if sentence:
                yield sentence

    def finish(self) -> str:
        """The text after the last sentence end; the splitter is empty afterwards."""
        rest, self._text = self._text.strip(), ""
        self._reset_scan()
        return rest

    def _forced_cut(self) -> int:
        """Where a sentence that ran past MAX_SENTENCE_CHARS is cut (see the module's note)."""
        for pattern in _FORCED_CUTS:
            last = None
            for last in pattern.finditer(self._text, MAX_SENTENCE_CHARS // 2, MAX_SENTENCE_CHARS):
                pass
            if last is not None:
                return last.end()
        return MAX_SENTENCE_CHARS

    def _next_cut(self) -> int | None:
        for match in _BOUNDARY.finditer(self._text, self._scan_from):
            if self._fences_before(match.start()) % 2:
                continue  # inside a code block: it is dropped or read whole
            if match.group("newline"):
                if self._line_continues(match):
                    continue
                return match.end()
            if self._is_boundary(self._before(match.end()), match.group("end"), match.group("next")):
                return match.end()
        undecided = _UNDECIDED_TAIL.search(self._text, self._scan_from)
        self._scan_from = undecided.start() if undecided else len(self._text)
        return None

    def _fences_before(self, position: int) -> int:
        """Code fences in the pending text before `position` (which only grows between cuts)."""
        while (found := self._text.find(_FENCE, self._fences_to, position)) != -1:
            self._fences += 1
            self._fences_to = found + len(_FENCE)
        # None ends before `position`: one may still start in its last two characters.
        self._fences_to = max(self._fences_to, position - len(_FENCE) + 1)
        return self._fences

    def _before(self, end: int) -> str:
        """The text before `end`, its last CONTEXT_CHARS only: a letter in front of a cut
        window keeps its first token from passing for a whole one (or "^" from matching)."""
        start = end - CONTEXT_CHARS
        return self._text[:end] if start <= 0 else "x" + self._text[start:end]

    def _line_continues(self, match: re.Match[str]) -> bool:
        line_start = self._text.rfind("\n", 0, match.start()) + 1
        line = self._text[line_start:match.start()].lstrip()
        following = match.group("line")
        if line.startswith("|") and following == "|":
            return True  # a table is read as a whole, its rows as sentences
        return following.islower() or not line  # a wrapped paragraph, or a blank line

    def _is_boundary(self, before: str, end: str, following: str) -> bool:
        if end != ".":
            return True  # "!", "?", "…", "?!" and closing quotes always end a sentence
        if following.islower():
            return False  # "approx. the", "env. trois": no new sentence
        if _LIST_MARKER.search(before.strip()) or _INITIAL.search(before) or (
                self._ordinal_dots and _GERMAN_ORDINAL.search(before)):
            return False  # "1. Eier", "J. R. R.", "am 3. März"
        tokens = _LAST_TOKENS.search(before)
        if tokens is None:
            return True
        for candidate in (tokens.group(2), (tokens.group(1) or "") + tokens.group(2)):
            if (candidate + following).lower() in self._openings:
                return False
            abbreviation = self._abbreviations.get(candidate.lower())
            if abbreviation is None:
                continue
            if abbreviation.not_after_number and (tokens.group(1) or "")[-1:].isdigit():
                return True  # "45 min. Then": the unit, which may end a sentence
            if abbreviation.before_number:
                return not following.isdigit()  # "Nr. 5" goes on; "I said no. Then" ends
            return abbreviation.may_end_sentence and following.isupper()
        return True
