"""Markdown, links, URLs, e-mail addresses and emoji turned into plain, speakable text.

Markdown is parsed with markdown-it-py (a CommonMark parser) rather than with regular
expressions, so emphasis, nested lists and tables are read the way a renderer sees them.
Emoji are found with the `emoji` package, which follows Unicode's emoji data (sequences,
skin tones, flags), where a hand-written code-point range would miss or over-match.
URLs, hosts and e-mail addresses are found with regular expressions written here: the
library for it, linkify-it-py, takes ~40 µs only to test a plain reply (more than this
whole module's median) and takes "kalt.Es" (a missing space) and "main.py" for hosts.
"""

from __future__ import annotations

import functools
import re

from typing import TYPE_CHECKING

from .languages import Language

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.token import Token

# Only text with one of these goes through the parser: plain replies skip its ~100 µs.
_MARKDOWN_HINT = re.compile(r"[*_`#|\[\]<>~]|^\s*(?:[-+]|\d+[.)])\s", re.MULTILINE)
_SENTENCE_END = (".", "!", "?", "…", ":", ";")
_FULL_STOPS = (".", "!", "?", "…")
_FIRST_WORD = re.compile(r"[^\W\d_]+")  # letters only
_URL = re.compile(r"\b(?:https?://|www\.)[^\s<>()\[\]\"']+", re.IGNORECASE)
_URL_TRAILING_PUNCTUATION = ".,;:!?"
# A host without "https://" or "www." is taken for one only with a common top-level domain
# in lower case, not inside an address or a longer name ("example.com.au"), so that entity
# ids ("light.kitchen"), "z.B." and a missing space ("home.It was") stay text.
_TOP_LEVEL_DOMAINS = "com|org|net|io|dev|app|info|eu|de|at|ch|fr|be|lu|it|es|pt|br|nl|uk|us|local"
_TOP_LEVEL_DOMAIN_HINT = re.compile(rf"\.(?:{_TOP_LEVEL_DOMAINS})\b")  # 30 times cheaper to search
_BARE_HOST = re.compile(rf"(?<![\w.@/-])(?:[\w-]+\.)+(?:{_TOP_LEVEL_DOMAINS})(?!\.?[\w@-])"
                        r"(?::\d{1,5}\b)?(?:/[^\s<>()\[\]\"']*)?")  # port, path: not read
# Not inside a longer word or URL path, starting with a letter or digit (not read as "- at",
# a list item); a final "." after the top-level domain ends the sentence.
_EMAIL = re.compile(r"(?<![\w.+%/-])(?:mailto:)?(?P<local>[^\W_][\w.+%-]*)"
                    r"@(?P<domain>(?:[\w-]+\.)+[^\W\d_]{2,})(?![\w-])", re.IGNORECASE)
_CODE_SEPARATORS = re.compile(r"[_./\\]+")
_EMOJI_LEFTOVERS = re.compile("[\u200d\ufe0e\ufe0f\u20e3]")
_SPACE_BEFORE_STOP = re.compile(r"[ \t]+([.,])")
_SPACES = re.compile(r"(?<=\S)[ \t]{2,}")  # not indentation: it nests markdown lists


@functools.cache
def _parser() -> MarkdownIt:
    # markdown-it and emoji are imported on first use, not with the server (~150 ms).
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable(["table", "strikethrough"])


def markdown_to_text(text: str) -> str:
    """Markdown as sentences: list items, headings, table rows and lines each end one.

    A line break inside a paragraph or list item ends a sentence unless the next line
    starts in lower case (a wrapped line), as `SentenceSplitter` cuts streamed text, so
    that "3. Bread" followed by "Anything else?" (CommonMark's lazy continuation line) is
    two sentences, and a one-shot reply is cut where the same reply streamed would be.
    """
    if not _MARKDOWN_HINT.search(text):
        return text
    blocks, structured = _blocks(_parser().parse(text))
    if len(blocks) == 1 and not structured:
        return blocks[0]  # one paragraph ("**Done**"): its punctuation is the writer's
    return _as_sentences(blocks)


def _as_sentences(blocks: list[str]) -> str:
    """Each block ended with a full stop where it has no end of its own ("Milk," too),
    and begun with a capital after one, so that the sentence split sees a new sentence
    ("milk. eggs." would read as "approx. the")."""
    sentences: list[str] = []
    for block in blocks:
        first_word = _FIRST_WORD.match(block)
        if sentences and sentences[-1].endswith(_FULL_STOPS) and first_word and first_word.group().islower():
            block = block[0].upper() + block[1:]  # not "iPhone" or "eBay"
        if not block.endswith(_SENTENCE_END):
            block = block.rstrip(",") + "."
        sentences.append(block)
    return " ".join(sentences)


def _blocks(tokens: list[Token]) -> tuple[list[str], bool]:
    """The text blocks, and whether any is a list item, heading or table row."""
    blocks: list[str] = []
    header: list[str] = []
    row: list[str] = []
    in_head = in_cell = structured = False
    for token in tokens:
        if token.type in ("th_open", "td_open", "th_close", "td_close"):
            in_cell = token.type.endswith("_open")
        elif token.type in ("list_item_open", "heading_open"):
            structured = True
        elif token.type == "thead_open":
            in_head = True
        elif token.type == "thead_close":
            in_head = False
        elif token.type == "tr_open":
            structured = True
            row = []
        elif token.type == "tr_close":
            if in_head:
                header = row
            elif row:
                blocks.append(_table_row(header, row))
        elif token.type == "inline":
            words = _inline_text(token.children or [])
            if in_cell:
                row.append(" ".join(words.split("\n")))
            else:
                blocks.extend(_lines(words))
    return blocks, structured


def _lines(words: str) -> list[str]:
    """A paragraph's lines as blocks; a line starting in lower case continues the last."""
    lines: list[str] = []
    for line in words.split("\n"):
        line = line.strip()
        if lines and line[:1].islower():
            lines[-1] = f"{lines[-1]} {line}"
        elif line:
            lines.append(line)
    return lines


def _table_row(header: list[str], row: list[str]) -> str:
    """A table row read as "Room: Kitchen, Temperature: 21 °C"."""
    if len(header) != len(row):
        return ", ".join(cell for cell in row if cell)
    return ", ".join(f"{name}: {cell}" if name else cell
                     for name, cell in zip(header, row) if cell)


def _inline_text(children: list[Token]) -> str:
    parts: list[str] = []
    for child in children:
        if child.type == "text":
            parts.append(child.content)
        elif child.type == "code_inline":
            # Entity ids and commands: "light.kitchen_lamp" is read as "light kitchen lamp".
            parts.append(_CODE_SEPARATORS.sub(" ", child.content).strip())
        elif child.type in ("softbreak", "hardbreak"):
            parts.append("\n")  # cut or joined by `_lines`
        elif child.type == "image":
            parts.append(_inline_text(child.children or []))
        # Emphasis, link markers and inline HTML carry no words: dropped.
    return "".join(parts).strip()


def shorten_urls(text: str, rules: Language) -> str:
    """A bare URL is read as its host: "https://www.example.com/a?b" -> "example dot com"."""
    if "://" not in text and "www." not in text.lower():
        return text
    return _URL.sub(lambda match: _speakable_url(match.group(0), rules), text)


def speak_addresses(text: str, rules: Language) -> str:
    """E-mail addresses and hosts written without "https://" in words: "anna.mueller@example.com"
    -> "anna dot mueller at example dot com" ("anna Punkt mueller ät example Punkt com" in
    German), "home-assistant.io/docs" -> "home-assistant dot io".

    `normalize` runs this before the numbers are read ("anna@web2.de") and again after:
    "x.io0" or "anna@ex.de1" only become one then ("x.io zero")."""
    if "@" in text:
        text = _EMAIL.sub(lambda match: _speakable_email(match, rules), text)
    if _TOP_LEVEL_DOMAIN_HINT.search(text):
        text = _BARE_HOST.sub(lambda match: _speakable_url(match.group(0), rules), text)
    return text


def _speakable_url(url: str, rules: Language) -> str:
    trailing = ""
    while url and url[-1] in _URL_TRAILING_PUNCTUATION:
        trailing = url[-1] + trailing
        url = url[:-1]
    host = re.sub(r"^(?:https?://)?(?:www\.)?", "", url, flags=re.IGNORECASE)
    host = re.split(r"[/?#]", host, maxsplit=1)[0].rsplit("@", 1)[-1].split(":", 1)[0]  # no user, port
    host = host.lower()  # "COM" is not an acronym to spell
    words = f" {rules.dot_word} ".join(part for part in host.split(".") if part)
    return words + trailing


def _speakable_email(address: re.Match[str], rules: Language) -> str:
    separators = {".": rules.dot_word, "_": rules.underscore_word, "+": rules.plus_word}
    local = "".join(f" {separators[part]} " if part in separators else part
                    for part in re.split(r"([._+])", address.group("local")))
    domain = f" {rules.dot_word} ".join(address.group("domain").lower().split("."))
    return f"{local} {rules.at_word} {domain}"


def remove_emoji(text: str) -> str:
    """Emoji dropped, with the space they leave: "Done ✅." -> "Done."."""
    if all(ord(char) < 0x2000 and char not in "©®" for char in text):
        return text
    import emoji

    stripped = _EMOJI_LEFTOVERS.sub("", emoji.replace_emoji(text, ""))
    if stripped == text:
        return text
    return _SPACES.sub(" ", _SPACE_BEFORE_STOP.sub(r"\1", stripped)).strip()
