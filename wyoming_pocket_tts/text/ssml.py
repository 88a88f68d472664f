"""SSML (`text_format: ssml`) read into what to say, and how: speech segments and pauses.

`SsmlReader` takes the text as it arrives (one piece, or a stream cut anywhere, inside a
tag or an entity too) and yields, in order:

* `Speech`: a sentence, or the part of one between two changes of voice, language or rate,
  with the `Style` it is spoken in (`<voice name>`, `<lang xml:lang>`, `<prosody rate>`)
  and whether it starts a sentence (a pause between sentences applies) or goes on with one;
* `Pause`: a `<break>`, exact silence of that length at that place.

`<s>` and `<p>` end a sentence, and within a span the language's `SentenceSplitter` cuts
sentences as in plain text. `<say-as>` is read through the normaliser (`say_as.py`),
`<sub alias>` says its alias, and the text of `<emphasis>`, `<audio>`, `<phoneme>`,
`<mark>` and of unknown elements is spoken as it stands. Tags are never spoken.

Why a tokenizer written here rather than an XML parser: the text arrives in chunks and
must be read as it comes (the first sentence is spoken while the LLM still writes), and
SSML from LLMs and scripts is often not well-formed (a missing `</speak>`, a stray `&` or
`<`, text outside the root). `xml.etree`'s and `defusedxml`'s parsers stop at the first
error, and their pull parser gives nothing for a tag cut across two chunks until the
document goes on, then fails at the end of a fragment without root. This one reads
tags, comments, CDATA and the five predefined and numeric character references; it never
expands other entities, skips DTDs whole (so no entity definitions, no external
references: nothing to expand or fetch), and bounds what it keeps waiting for (a tag, an
entity, nesting). Malformed input is spoken as text with its tags removed, and logged once.

Linear in the input: every character is looked at a bounded number of times, whatever the
chunking (the `SentenceSplitter` is fed once per span and chunk).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

from .languages import language_rules
from .say_as import say_as
from .sentences import SentenceSplitter

_LOGGER = logging.getLogger(__name__)

# The longest tag we wait for; a "<" with no ">" that soon is no tag ("a <b" in prose).
MAX_TAG_CHARS = 2_000
# A character reference is short ("&#x1F600;", "&quot;"); a longer "&..." is plain text.
MAX_ENTITY_CHARS = 12
# Deeper elements are read as text without a style of their own (the stack stays bounded).
MAX_DEPTH = 64
# The text of one <say-as> or <sub>: longer, the rest is spoken as plain text.
MAX_SAY_AS_CHARS = 1_000
# The longest <break>; SSML engines commonly cap it at 10 s too.
MAX_BREAK_SECONDS = 10.0

# <break strength=...> in seconds; "medium" is also a <break/> without attributes.
BREAK_STRENGTHS = {"none": 0.0, "x-weak": 0.1, "weak": 0.25, "medium": 0.5, "strong": 0.75, "x-strong": 1.0}
# <prosody rate=...> labels as speaking-rate factors (2.0 = twice as fast).
RATE_LABELS = {"x-slow": 0.5, "slow": 0.75, "medium": 1.0, "default": 1.0, "fast": 1.25, "x-fast": 1.5}

_PREDEFINED_ENTITIES = {"amp": "&", "lt": "<", "gt": ">", "quot": '"', "apos": "'"}
_MARKUP_OR_REFERENCE = re.compile(r"[<&]")
_TAG_START = re.compile(r"[A-Za-z_:/!?]")
_LESS_THAN = re.compile(r"[\s\d=]")
_NAME = r"[A-Za-z_:][-\w:.]*"
_TAG = re.compile(rf"<(?P<end>/)?\s*(?P<name>{_NAME})(?P<attrs>[^>]*?)(?P<empty>/)?\s*>", re.S)
_ATTRIBUTE = re.compile(rf"(?P<key>{_NAME})\s*=\s*(?:\"(?P<dq>[^\"]*)\"|'(?P<sq>[^']*)'|(?P<bare>[^\s\"'>/=]+))")
_ENTITY = re.compile(r"&(?:#(?P<dec>[0-9]{1,7})|#[xX](?P<hex>[0-9a-fA-F]{1,6})|(?P<named>[A-Za-z][A-Za-z0-9]*));")
# What may still become a reference; "#x" before "#": "&#x" is not a cut "&#".
_ENTITY_PREFIX = re.compile(r"&(?:#[xX][0-9a-fA-F]*|#[0-9]*|[A-Za-z][A-Za-z0-9]*)?")
# A DTD's internal subset ("[...]") may hold ">": the declaration ends after it.
_DECLARATION = re.compile(r"<[!?](?:[^\[>]*\[[^\]]*\][^>]*|[^\[>]*)>")
_COMMENT = "<!--"
_CDATA = "<![CDATA["
_BREAK_TIME = re.compile(r"\s*(?P<value>\d+(?:\.\d*)?|\.\d+)\s*(?P<unit>ms|s)?\s*", re.IGNORECASE)
_RATE = re.compile(r"\s*(?P<sign>[-+])?(?P<value>\d+(?:\.\d*)?|\.\d+)\s*(?P<percent>%)?\s*")
_SENTENCE_END = re.compile(r"[.!?…:;][\"'”’»)\]]*$")

_BOUNDARIES = {"p", "s", "paragraph", "sentence"}
_CAPTURED = {"say-as", "sub"}


@dataclass(frozen=True)
class Style:
    """How a span is spoken: the SSML elements around it that change the voice."""

    voice: str | None = None  # <voice name=...>; None: the request's voice
    language: str | None = None  # the innermost xml:lang; None: the voice's language
    rate: float = 1.0  # <prosody rate>: speaking-rate factor, 2.0 is twice as fast


@dataclass(frozen=True)
class Speech:
    """Text to speak in one style; `language` is the one its words are read in."""

    text: str
    style: Style
    language: str
    # False: it goes on with the sentence before it (a style change inside a sentence),
    # so no pause between sentences goes in front of it.
    starts_sentence: bool = True


@dataclass(frozen=True)
class Pause:
    """A `<break>`: this much digital silence here."""

    seconds: float


Segment = Speech | Pause


@dataclass
class _Element:
    name: str
    style: Style  # the style inside it


@dataclass
class _Capture:
    """A <say-as> or <sub> whose text is collected and read when it closes."""

    name: str
    attributes: dict[str, str]
    style: Style
    parts: list[str] = field(default_factory=list)
    chars: int = 0
    depth: int = 1  # the same element nested in it


@dataclass
class _Span:
    """Consecutive text in one style, cut into sentences by the language's splitter."""

    style: Style
    language: str
    splitter: SentenceSplitter
    parts: list[str] = field(default_factory=list)
    tail: str = ""  # its last characters: the word a <say-as> after them agrees with


class SsmlReader:
    """Reads streamed SSML into `Speech` and `Pause` segments (see the module docstring).

    `language`: the request's (its voice's) language. `voice_language`: the language of
    a voice named by `<voice name>` (None if unknown: the request's language is used).
    Not thread-safe; one reader per request.
    """

    def __init__(self, language: str, voice_language: Callable[[str], str | None] | None = None) -> None:
        self._language = language
        self._voice_language = voice_language or (lambda _name: None)
        self._buffer = ""
        # Where the search for the end of the pending markup at the buffer's start resumes.
        self._searched = 0
        self._stack: list[_Element] = []
        self._capture: _Capture | None = None
        self._span: _Span | None = None
        self._splitters: dict[str, SentenceSplitter] = {}
        self._at_sentence_start = True
        self._problems: list[str] = []
        self._out: list[Segment] = []

    @property
    def pending_chars(self) -> int:
        """Characters received and not yet given out as a segment."""
        span = self._span
        spoken_later = sum(map(len, span.parts)) + span.splitter.pending_chars if span else 0
        return len(self._buffer) + spoken_later + (self._capture.chars if self._capture else 0)

    def add_chunk(self, chunk: str) -> Iterator[Segment]:
        """Read more text (at once, not as the result is iterated); the segments it completed."""
        self._buffer += chunk
        self._tokenize(final=False)
        self._feed_span()
        return self._take()

    def finish(self) -> list[Segment]:
        """The end of the text: the segments still held back. Logs one warning if the
        SSML was malformed (it is still spoken, without its tags)."""
        self._tokenize(final=True)
        if self._capture is not None:
            self._problem(f"<{_short(self._capture.name)}> is not closed")
            self._close_capture()
        self._end_span()
        unclosed = [element.name for element in self._stack if element.name != "speak"]
        if unclosed:
            self._problem(f"<{_short(unclosed[-1])}> is not closed")
        self._stack.clear()
        if self._problems:
            _LOGGER.warning("Malformed SSML, spoken as text without its tags: %s", "; ".join(self._problems[:3]))
        return list(self._take())

    # -- tokens ------------------------------------------------------------------------

    def _tokenize(self, final: bool) -> None:
        """Consume the buffer up to what may still be cut: an unfinished tag or reference."""
        text, position = self._buffer, 0
        # How far past the markup at the buffer's start its end was looked for already.
        resume, self._searched = self._searched, 0
        while True:
            found = _MARKUP_OR_REFERENCE.search(text, position)
            if found is None:
                self._text(text[position:])
                position = len(text)
                break
            start = found.start()
            self._text(text[position:start])
            if text[start] == "<":
                end = self._markup(text, start, final, resume if start == 0 else 0)
            else:
                end = self._reference(text, start, final)
            if end is None:  # cut: wait for more text
                position = start
                self._searched = len(text) - start
                break
            position = end
        self._buffer = text[position:]

    def _markup(self, text: str, start: int, final: bool, resume: int) -> int | None:
        """Read the markup at `text[start]` ("<"); its end, or None to wait for more."""
        if start + 1 >= len(text):
            if final:
                self._problem("a stray '<'")
                return len(text)
            return None
        if not _TAG_START.match(text, start + 1):
            self._problem("a stray '<'")
            if _LESS_THAN.match(text, start + 1):
                self._text("<")  # "a < b", "<5": read as written
            return start + 1  # else dropped: "<<b>c>" must not make "<c>"
        head = text[start:start + len(_CDATA)]
        if not final and len(head) < len(_CDATA) and (_COMMENT.startswith(head) or _CDATA.startswith(head)):
            return None  # "<!-" may become a comment
        if head.startswith(_COMMENT):
            return self._skip_to(text, start, "-->", final, resume, "an unfinished comment")
        if head.startswith(_CDATA):
            end = self._skip_to(text, start, "]]>", final, resume, "an unfinished CDATA section")
            if end is not None:
                content_end = end - 3 if text.endswith("]]>", 0, end) else end
                self._text(text[start + len(_CDATA):content_end])
            return end
        if head.startswith(("<!", "<?")):
            return self._declaration(text, start, final)
        return self._tag(text, start, final, resume)

    def _skip_to(self, text: str, start: int, closing: str, final: bool, resume: int, problem: str) -> int | None:
        end = text.find(closing, start + max(0, resume - len(closing) + 1))
        if end != -1:
            return end + len(closing)
        if final:
            self._problem(problem)
            return len(text)
        return None

    def _declaration(self, text: str, start: int, final: bool) -> int | None:
        """A declaration, a DTD or a processing instruction: skipped whole, never read, its
        entities never defined. Bounded like a tag (read again from its start per chunk)."""
        match = _DECLARATION.match(text, start, start + MAX_TAG_CHARS)
        if match is not None:
            return match.end()
        if len(text) - start < MAX_TAG_CHARS and not final:
            return None
        self._problem("an unfinished declaration")
        return start + 2 if len(text) - start >= MAX_TAG_CHARS else len(text)

    def _tag(self, text: str, start: int, final: bool, resume: int) -> int | None:
        limit = start + MAX_TAG_CHARS
        found = _ANGLE.search(text, start + max(1, resume), min(limit, len(text)))
        if found is None:
            if len(text) < limit and not final:
                return None  # the tag may end in the next chunk
            self._problem("an unfinished tag")
            if len(text) >= limit:
                return start + 1  # no ">" that soon: a "<" in prose, the rest read as text
            return len(text)  # an unfinished tag at the end: dropped, never read aloud
        if found.group() == "<":
            self._problem("a stray '<'")
            return start + 1  # "a<b c<d>": the first "<" opened no tag
        end = found.end()
        match = _TAG.fullmatch(text, start, end)
        if match is None:
            self._problem("an unreadable tag")
            return end
        name = match.group("name").lower()
        if match.group("end"):
            self._end_tag(name)
        else:
            self._start_tag(name, _attributes(match.group("attrs")), bool(match.group("empty")))
        return end

    def _reference(self, text: str, start: int, final: bool) -> int | None:
        """A character reference at `text[start]` ("&"): decoded, or "&" read as written."""
        match = _ENTITY.match(text, start, start + MAX_ENTITY_CHARS)
        if match is None:
            prefix = _ENTITY_PREFIX.match(text, start).end()
            if prefix == len(text) and prefix - start < MAX_ENTITY_CHARS and not final:
                return None  # "&am" may become "&amp;"
            self._problem("a stray '&'")
            self._text("&")
            return start + 1
        if match.group("named"):
            character = _PREDEFINED_ENTITIES.get(match.group("named"))
            if character is None:
                self._problem(f"an unknown entity &{match.group('named')};")  # never expanded
            else:
                self._text(character)
            return match.end()
        character = _referenced_character(match)
        if character:
            self._text(character)
        else:
            self._problem("an invalid character reference")
        return match.end()

    # -- elements ----------------------------------------------------------------------

    @property
    def _style(self) -> Style:
        return self._stack[-1].style if self._stack else Style()

    def _start_tag(self, name: str, attributes: dict[str, str], empty: bool) -> None:
        capture = self._capture
        if capture is not None:
            if name == capture.name and not empty:
                capture.depth += 1
            return
        if name == "break":
            self._end_span()
            self._out.append(Pause(_break_seconds(attributes, self._problem)))
            return
        if name in _BOUNDARIES:
            self._boundary()
        if empty:
            return
        style = self._style
        language = attributes.get("xml:lang") or attributes.get("lang")
        if name == "voice" and attributes.get("name"):
            # The voice's own language, unless the element gives one.
            style = replace(style, voice=attributes["name"].strip(), language=None)
        elif name == "prosody" and "rate" in attributes:
            style = replace(style, rate=_rate(attributes["rate"], style.rate, self._problem))
        if language:
            style = replace(style, language=language.strip())
        if name in _CAPTURED and (name == "say-as" or "alias" in attributes):
            self._capture = _Capture(name, attributes, style)
            return
        if len(self._stack) < MAX_DEPTH:
            self._stack.append(_Element(name, style))

    def _end_tag(self, name: str) -> None:
        capture = self._capture
        if capture is not None:
            if name == capture.name:
                capture.depth -= 1
                if capture.depth == 0:
                    self._close_capture()
            return
        for index in range(len(self._stack) - 1, -1, -1):
            if self._stack[index].name == name:
                if index != len(self._stack) - 1:
                    self._problem(f"<{_short(self._stack[-1].name)}> is not closed")
                del self._stack[index:]
                if name in _BOUNDARIES:
                    self._boundary()
                return
        if name not in ("break", "mark"):
            self._problem(f"</{_short(name)}> closes nothing")

    def _close_capture(self) -> None:
        capture, self._capture = self._capture, None
        assert capture is not None
        content = "".join(capture.parts)
        if capture.name == "sub":
            spoken = capture.attributes.get("alias", content)
        else:
            span = self._span
            before = _WORD_BEFORE.search(span.tail) if span is not None and span.style == capture.style else None
            spoken = say_as(content, capture.attributes.get("interpret-as", ""), self._language_of(capture.style),
                            capture.attributes.get("format"), before.group(1) if before else "")  # fmt: skip
        self._spoken_text(spoken, capture.style)

    # -- text and spans ----------------------------------------------------------------

    def _text(self, text: str) -> None:
        if not text:
            return
        capture = self._capture
        if capture is None:
            self._spoken_text(text, self._style)
        elif capture.chars + len(text) <= MAX_SAY_AS_CHARS:
            capture.parts.append(text)
            capture.chars += len(text)
        else:
            self._problem(f"<{capture.name}> is longer than {MAX_SAY_AS_CHARS} characters")
            self._capture = None
            self._spoken_text("".join(capture.parts) + text, capture.style)

    def _spoken_text(self, text: str, style: Style) -> None:
        span = self._span
        if span is None or span.style != style:
            self._end_span()
            language = self._language_of(style)
            code = language_rules(language).code
            # One per language, reused (empty after finish): building one takes ~40 µs.
            splitter = self._splitters.get(code) or self._splitters.setdefault(code, SentenceSplitter(code))
            span = self._span = _Span(style, language, splitter)
        span.parts.append(text)
        span.tail = (span.tail + text)[-_TAIL_CHARS:]

    def _language_of(self, style: Style) -> str:
        if style.language:
            return style.language
        if style.voice:
            return self._voice_language(style.voice) or self._language
        return self._language

    def _feed_span(self) -> None:
        """Give the span's new text to its splitter (once per chunk: linear time)."""
        span = self._span
        if span is None or not span.parts:
            return
        text, span.parts = "".join(span.parts), []
        for sentence in span.splitter.add_chunk(text):
            self._speech(sentence, span)
            self._at_sentence_start = True

    def _end_span(self) -> None:
        span = self._span
        if span is None:
            return
        self._feed_span()
        self._span = None
        rest = span.splitter.finish()
        if rest:
            self._speech(rest, span)
            self._at_sentence_start = bool(_SENTENCE_END.search(rest))

    def _speech(self, text: str, span: _Span) -> None:
        text = " ".join(text.split())
        if text:
            self._out.append(Speech(text, span.style, span.language, self._at_sentence_start))

    def _boundary(self) -> None:
        """<s>, <p>: what came before is a sentence of its own."""
        self._end_span()
        self._at_sentence_start = True

    def _take(self) -> Iterator[Segment]:
        out, self._out = self._out, []
        return iter(out)

    def _problem(self, problem: str) -> None:
        if len(self._problems) < 10:
            self._problems.append(problem)


_ANGLE = re.compile(r"[<>]")
_TAIL_CHARS = 40
_WORD_BEFORE = re.compile(r"(\w+)\s+\Z")


def _short(name: str) -> str:
    """A tag name as the log quotes it (a tag may be 2,000 characters long)."""
    return name if len(name) <= 40 else name[:40] + "…"


def _attributes(text: str) -> dict[str, str]:
    attributes = {}
    for match in _ATTRIBUTE.finditer(text):
        value = next(group for group in (match.group("dq"), match.group("sq"), match.group("bare")) if group is not None)
        # Character references in a value: the five predefined and numeric ones only.
        attributes[match.group("key").lower()] = _ENTITY.sub(_attribute_reference, value) if "&" in value else value
    return attributes


def _attribute_reference(match: re.Match[str]) -> str:
    if match.group("named"):
        return _PREDEFINED_ENTITIES.get(match.group("named"), "")
    return _referenced_character(match)


def _referenced_character(match: re.Match[str]) -> str:
    """The character of a numeric reference; "" for one XML does not allow (NUL, surrogates,
    control characters other than tab and line ends)."""
    code = int(match.group("dec")) if match.group("dec") else int(match.group("hex"), 16)
    if code in (0x9, 0xA, 0xD) or (0x20 <= code <= 0x10FFFF and not 0x7F <= code <= 0x9F
                                   and not 0xD800 <= code <= 0xDFFF):
        return chr(code)
    return ""


def _break_seconds(attributes: dict[str, str], problem: Callable[[str], None]) -> float:
    """A <break>'s length: `time` ("700ms", "1.5s") if readable, else `strength`, else medium."""
    written = attributes.get("time")
    if written is not None:
        match = _BREAK_TIME.fullmatch(written)
        if match is not None:
            seconds = float(match.group("value")) / (1 if (match.group("unit") or "ms").lower() == "s" else 1000)
            if seconds > MAX_BREAK_SECONDS:
                problem(f"a break of {written.strip()} (at most {MAX_BREAK_SECONDS:g} s)")
            return min(seconds, MAX_BREAK_SECONDS)
        problem(f"an unreadable break time {written[:20]!r}")
    strength = (attributes.get("strength") or "medium").strip().lower()
    if strength not in BREAK_STRENGTHS:
        problem(f"an unknown break strength {strength[:20]!r}")
    return BREAK_STRENGTHS.get(strength, BREAK_STRENGTHS["medium"])


def _rate(written: str, current: float, problem: Callable[[str], None]) -> float:
    """A <prosody rate>: a label (from the default rate), a percentage or a factor (of the
    rate around it); "+20%" and "-20%" change it by that much."""
    label = RATE_LABELS.get(written.strip().lower())
    if label is not None:
        return label
    match = _RATE.fullmatch(written)
    if match is None:
        problem(f"an unreadable prosody rate {written[:20]!r}")
        return current
    value = float(match.group("value")) / (100 if match.group("percent") else 1)
    sign = match.group("sign")
    if sign:
        factor = 1 + value if sign == "+" else 1 - value
    else:
        factor = value
    if factor <= 0:
        problem(f"a prosody rate of {written.strip()[:20]}")
        return current
    return current * factor
