"""SentenceSplitter: streamed text cut into sentences, not after "3.", "1." or "z. B."."""

import pytest
from sentence_stream import SentenceBoundaryDetector

from wyoming_pocket_tts.server.handler import _sentences as one_shot_sentences
from wyoming_pocket_tts.text import LANGUAGES, SentenceSplitter, normalize


def split(text: str, language: str | None, chunk_size: int = 1) -> list[str]:
    splitter = SentenceSplitter(language)
    sentences = []
    for start in range(0, len(text), chunk_size):
        sentences.extend(splitter.add_chunk(text[start:start + chunk_size]))
    rest = splitter.finish()
    return sentences + ([rest] if rest else [])


@pytest.mark.parametrize("chunk_size", [1, 2, 3, 7, 1000])
def test_german_date_ordinal_is_not_a_sentence_end(chunk_size: int) -> None:
    text = "Wir sehen uns am 3. März. Bis dann!"
    assert split(text, "de", chunk_size) == ["Wir sehen uns am 3. März.", "Bis dann!"]


def test_sentence_stream_cuts_the_same_text_after_the_ordinal() -> None:
    # The defect this splitter exists for: the library detector cuts "am 3." from "März".
    detector = SentenceBoundaryDetector()
    sentences = list(detector.add_chunk("Wir sehen uns am 3. März. Bis dann!"))
    assert sentences[0] == "Wir sehen uns am 3."


NUMBERED_LISTS = {
    "en": ("Your list:\n1. Milk\n2. Eggs\n3. Bread", ["Your list:", "1. Milk", "2. Eggs", "3. Bread"]),
    "de": ("Deine Liste:\n1. Milch\n2. Eier", ["Deine Liste:", "1. Milch", "2. Eier"]),
    "fr": ("Votre liste :\n1. Lait\n2. Œufs", ["Votre liste :", "1. Lait", "2. Œufs"]),
    "it": ("La lista:\n1. Latte\n2. Uova", ["La lista:", "1. Latte", "2. Uova"]),
    "pt": ("A lista:\n1. Leite\n2. Ovos", ["A lista:", "1. Leite", "2. Ovos"]),
    "es": ("La lista:\n1. Leche\n2. Huevos", ["La lista:", "1. Leche", "2. Huevos"]),
    "nl": ("De lijst:\n1. Melk\n2. Eieren", ["De lijst:", "1. Melk", "2. Eieren"]),
}


@pytest.mark.parametrize("language", sorted(LANGUAGES))
def test_numbered_list_items_are_sentences_with_their_markers(language: str) -> None:
    text, expected = NUMBERED_LISTS[language]
    assert split(text, language) == expected


def test_numbered_list_on_one_line_is_not_cut_after_its_markers() -> None:
    assert split("Steps: 1. Open the app. 2. Tap Settings.", "en") == [
        "Steps: 1. Open the app.", "2. Tap Settings."]


@pytest.mark.parametrize(("language", "text", "expected"), [
    ("en", "Dr. Smith said approx. 3 hours. Then we left.",
     ["Dr. Smith said approx. 3 hours.", "Then we left."]),
    ("en", "Call No. 5 now. I said no. Then I left.", ["Call No. 5 now.", "I said no.", "Then I left."]),
    ("en", "Lights, fans, etc. The rest is off.", ["Lights, fans, etc.", "The rest is off."]),
    ("de", "Die Heizung z. B. Nr. 5 ist an. Gut.", ["Die Heizung z. B. Nr. 5 ist an.", "Gut."]),
    ("de", "Das ist der 1. Platz. Super!", ["Das ist der 1. Platz.", "Super!"]),
    ("fr", "Il fait env. 3 °C. Le 1er mars. Dr. Martin arrive.",
     ["Il fait env. 3 °C.", "Le 1er mars.", "Dr. Martin arrive."]),
    ("nl", "Dat is bijv. Nr. 3. Klaar.", ["Dat is bijv. Nr. 3.", "Klaar."]),
    ("es", "El Dr. García llega. Sr. Pérez también.", ["El Dr. García llega.", "Sr. Pérez también."]),
    ("en", "J. R. R. Tolkien wrote it. Yes!", ["J. R. R. Tolkien wrote it.", "Yes!"]),
])
def test_abbreviations_and_initials_do_not_end_sentences(language: str, text: str,
                                                         expected: list[str]) -> None:
    assert split(text, language) == expected


def test_sentence_is_released_as_soon_as_the_next_one_starts() -> None:
    splitter = SentenceSplitter("en")
    assert list(splitter.add_chunk("It is 19.5 °C.")) == []  # could still be "°C.-ish"
    assert list(splitter.add_chunk(" ")) == []
    assert list(splitter.add_chunk("T")) == ["It is 19.5 °C."]
    assert splitter.pending_chars == 1
    assert splitter.finish() == "T"
    assert splitter.pending_chars == 0


def test_first_sentence_as_early_as_sentence_stream() -> None:
    text = "The kitchen light is on. The hallway light is off. Anything else?"
    ours, theirs = SentenceSplitter("en"), SentenceBoundaryDetector()
    for end in range(1, len(text) + 1):
        chunk = text[end - 1:end]
        assert list(ours.add_chunk(chunk)) == list(theirs.add_chunk(chunk)), text[:end]
    assert ours.finish() == theirs.finish()


def test_table_and_code_block_are_kept_whole() -> None:
    text = ("| Room | Temp |\n|---|---|\n| Kitchen | 21 °C |\n| Hall | 19 °C |\n"
            "Run this:\n```\nha core restart\nha core check\n```\nDone.")
    assert split(text, "en", 4) == [
        "| Room | Temp |\n|---|---|\n| Kitchen | 21 °C |\n| Hall | 19 °C |",
        "Run this:",
        "```\nha core restart\nha core check\n```",
        "Done.",
    ]


def test_wrapped_paragraph_line_is_not_a_sentence_end() -> None:
    assert split("The kitchen light is\non. Done.", "en") == ["The kitchen light is\non.", "Done."]


@pytest.mark.parametrize(("language", "reply"), [
    ("de", "Am 3. März sind es 19,5 °C. Um 18:40 Uhr kommt Dr. Müller. Das kostet 4,20 €."),
    ("en", "It is 19.5 °C and cloudy. The meeting is on March 14th, 2027 at 4:10 PM. Approx. 3 kWh."),
    ("fr", "Le 1er mars il fera 3–5 °C. Env. 12 km/h de vent. Rendez-vous à 18h40."),
    ("en", "Write to anna.mueller@example.com or see https://www.example.com/help. Thanks!"),
    ("de", "Schreib an anna_mueller@example.de. Danke!"),
])
def test_streamed_sentences_normalise_like_the_whole_reply(language: str, reply: str) -> None:
    streamed = " ".join(normalize(sentence, language) for sentence in split(reply, language, 5))
    assert streamed == normalize(reply, language)
    assert not any(char.isdigit() for char in streamed)


def test_markdown_reply_streamed_is_read_without_markup() -> None:
    reply = "**Weather** ☀️\n\n- Today: sunny, 21 °C\n- Tomorrow: rain\n\nSee [details](https://x.org)."
    sentences = [normalize(sentence, "en") for sentence in split(reply, "en", 6)]
    assert sentences == ["Weather", "Today: sunny, twenty-one degrees Celsius.", "Tomorrow: rain.",
                         "See details."]


# A list whose items have no full stop, the last one followed by a sentence without a blank
# line (a lazy continuation line in CommonMark: the parser puts it into the last item).
LIST_REPLIES = [
    ("en", "Your list:\n1. Milk\n2. Eggs\n3. Bread\nAnything else?",
     ["Your list: Milk.", "Eggs.", "Bread.", "Anything else?"]),
    ("en", "Shopping:\n- milk\n- eggs,\n- bread\n\nAnything else?",
     ["Shopping: milk.", "Eggs.", "Bread.", "Anything else?"]),
    ("de", "Deine Liste:\n1. Milch\n2. Eier\n3. Brot\nSonst noch etwas?",
     ["Deine Liste: Milch.", "Eier.", "Brot.", "Sonst noch etwas?"]),
    ("fr", "Votre liste :\n* lait\n* œufs\nAutre chose ?", ["Votre liste : lait.", "Œufs.", "Autre chose ?"]),
    ("it", "La lista:\n1. latte\n2. uova\nAltro?", ["La lista: latte.", "Uova.", "Altro?"]),
    ("pt", "A lista:\n- Leite\n- Ovos\nMais alguma coisa?", ["A lista: Leite.", "Ovos.", "Mais alguma coisa?"]),
    ("es", "La lista:\n1. Leche\n2. Huevos\n¿Algo más?", ["La lista: Leche.", "Huevos.", "¿Algo más?"]),
    ("nl", "De lijst:\n- melk\n- eieren\nNog iets?", ["De lijst: melk.", "Eieren.", "Nog iets?"]),
]


@pytest.mark.parametrize(("language", "reply", "sentences"), LIST_REPLIES)
def test_list_items_are_sentences_in_a_one_shot_reply(language: str, reply: str, sentences: list[str]) -> None:
    # As the server splits a one-shot text: normalised first, then cut into sentences.
    assert one_shot_sentences(normalize(reply, language), language) == sentences


@pytest.mark.parametrize(("language", "reply", "sentences"), LIST_REPLIES)
def test_list_items_are_sentences_in_a_streamed_reply(language: str, reply: str, sentences: list[str]) -> None:
    streamed = [normalize(sentence, language).lower() for sentence in split(reply, language, 4)]
    # The introduction is cut at its line break (first audio sooner); each item ends a sentence.
    # The case of a sentence's first letter is left to the engine, which capitalises it.
    assert streamed[2:] == [sentence.lower() for sentence in sentences[1:]]
    assert " ".join(streamed) == " ".join(sentences).lower() == normalize(reply, language).lower()


def test_splitter_without_a_language_knows_every_language() -> None:
    # While the model loads the server may not know the language yet.
    text = "Am 3. März z. B. um 8 Uhr. Dr. Martin vient env. à 9 h. Klaar."
    assert split(text, None) == ["Am 3. März z. B. um 8 Uhr.", "Dr. Martin vient env. à 9 h.", "Klaar."]
