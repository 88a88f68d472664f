"""SsmlReader: SSML read into speech segments and pauses, one piece or streamed in any cut.

Unit cases for each element, then properties over generated input (hypothesis): any text
is read without an exception, no tag of the input is ever spoken, and a text streamed in
any cut gives the same segments as in one piece.
"""

from __future__ import annotations

import logging
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wyoming_pocket_tts.text import normalize
from wyoming_pocket_tts.text.ssml import (
    BREAK_STRENGTHS,
    MAX_BREAK_SECONDS,
    MAX_TAG_CHARS,
    Pause,
    Segment,
    Speech,
    SsmlReader,
    Style,
)

VOICE_LANGUAGES = {"juergen": "de", "estelle": "fr"}
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def read(text: str, language: str = "en", cuts: list[int] | None = None) -> list[Segment]:
    """The segments of `text`, given in one piece or cut at `cuts`."""
    reader = SsmlReader(language, VOICE_LANGUAGES.get)
    bounds = [0, *sorted(cuts or []), len(text)]
    segments = [segment for start, end in zip(bounds, bounds[1:]) for segment in reader.add_chunk(text[start:end])]
    return segments + reader.finish()


def texts(segments: list[Segment]) -> list[str]:
    return [segment.text for segment in segments if isinstance(segment, Speech)]


def test_a_speak_root_alone_is_its_text() -> None:
    assert read("<speak>Hello there.</speak>") == [Speech("Hello there.", Style(), "en")]
    assert read('<?xml version="1.0"?>\n<speak version="1.1" xmlns="http://www.w3.org/2001/10/synthesis">'
                "Hello there.</speak>") == [Speech("Hello there.", Style(), "en")]  # fmt: skip


def test_sentences_are_cut_by_the_language_and_by_s_and_p() -> None:
    segments = read("<speak><p><s>Wir sehen uns am 3. März</s><s>Bis dann</s></p>Gut. Ja!</speak>", "de")
    assert texts(segments) == ["Wir sehen uns am 3. März", "Bis dann", "Gut.", "Ja!"]
    assert all(segment.starts_sentence for segment in segments)


def test_a_break_is_a_pause_of_its_length_in_place() -> None:
    segments = read('<speak>Hello <break time="700ms"/> world. <break time="1.5s"/>Bye.</speak>')
    assert segments == [
        Speech("Hello", Style(), "en"), Pause(0.7), Speech("world.", Style(), "en", starts_sentence=False),
        Pause(1.5), Speech("Bye.", Style(), "en"),
    ]  # fmt: skip


@pytest.mark.parametrize("strength, seconds", sorted(BREAK_STRENGTHS.items()))
def test_break_strengths(strength: str, seconds: float) -> None:
    assert read(f'<break strength="{strength}"/>') == [Pause(seconds)]


def test_break_without_attributes_or_with_bad_ones_is_medium_and_long_ones_are_capped(caplog) -> None:
    assert read("<break/>") == [Pause(BREAK_STRENGTHS["medium"])]
    assert read('<break time="30s"/>') == [Pause(MAX_BREAK_SECONDS)]
    with caplog.at_level(logging.WARNING):
        assert read('<break time="soon"/>') == [Pause(BREAK_STRENGTHS["medium"])]
    assert "unreadable break time" in caplog.text


@pytest.mark.parametrize("rate, factor", [("x-slow", 0.5), ("slow", 0.75), ("fast", 1.25), ("x-fast", 1.5),
                                          ("150%", 1.5), ("80%", 0.8), ("+20%", 1.2), ("-20%", 0.8), ("2", 2.0),
                                          ("0.5", 0.5)])  # fmt: skip
def test_prosody_rate_styles_only_its_span(rate: str, factor: float) -> None:
    segments = read(f'<speak>Say <prosody rate="{rate}" pitch="high">this slowly</prosody> please.</speak>')
    assert segments == [
        Speech("Say", Style(), "en"),
        Speech("this slowly", Style(rate=pytest.approx(factor)), "en", starts_sentence=False),
        Speech("please.", Style(), "en", starts_sentence=False),
    ]


@pytest.mark.parametrize("rate", ["medium", "default", "100%", "1", "fast-ish"])
def test_prosody_at_the_normal_rate_or_unreadable_changes_nothing(rate: str) -> None:
    assert read(f'<speak>Say <prosody rate="{rate}">this</prosody> please.</speak>') == [
        Speech("Say this please.", Style(), "en")]  # fmt: skip


def test_nested_prosody_rates_multiply_and_labels_are_absolute() -> None:
    segments = read('<prosody rate="50%"><prosody rate="200%">a</prosody><prosody rate="fast">b</prosody></prosody>')
    assert [segment.style.rate for segment in segments] == [pytest.approx(1.0), 1.25]


def test_voice_and_lang_set_the_voice_and_the_language_of_their_spans() -> None:
    segments = read('<speak>Hello. <voice name="juergen">Guten Tag. <lang xml:lang="fr-FR">Bonjour.</lang></voice>'
                    '<lang xml:lang="it">Ciao.</lang></speak>')  # fmt: skip
    assert segments == [
        Speech("Hello.", Style(), "en"),
        Speech("Guten Tag.", Style(voice="juergen"), "de"),
        Speech("Bonjour.", Style(voice="juergen", language="fr-FR"), "fr-FR"),
        Speech("Ciao.", Style(language="it"), "it"),
    ]
    # An unknown voice keeps the request's language; a voice inside a lang speaks its own.
    assert read('<lang xml:lang="it"><voice name="nobody">Ciao.</voice><voice name="estelle">Salut.</voice></lang>') == [
        Speech("Ciao.", Style(voice="nobody"), "en"), Speech("Salut.", Style(voice="estelle"), "fr"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    "interpret_as, written, language, spoken",
    [
        ("characters", "ABC12", "en", "A B C one two"),
        ("spell-out", "hi", "de", "H I"),
        ("cardinal", "1234", "en", "one thousand two hundred and thirty-four"),
        ("cardinal", "-5", "de", "minus fünf"),
        ("ordinal", "3", "en", "third"),
        ("ordinal", "3.", "de", "dritte"),
        ("digits", "1234", "fr", "un deux trois quatre"),
        ("telephone", "+49 30 123", "de", "plus vier neun, drei null, eins zwei drei"),
        ("time", "14:30", "de", "vierzehn Uhr dreißig"),
        ("time", "2:30pm", "en", "two thirty PM"),
    ],
)
def test_say_as_reads_through_the_normaliser(interpret_as: str, written: str, language: str, spoken: str) -> None:
    segments = read(f'<say-as interpret-as="{interpret_as}">{written}</say-as>', language)
    assert texts(segments) == [spoken]


@pytest.mark.parametrize(
    "date_format, written, language",
    [("dmy", "14.03.2027", "de"), ("mdy", "03/14/2027", "en"), ("ymd", "2027-03-14", "fr"),
     (None, "2027-03-14", "es"), ("dmy", "14-03-2027", "nl"), ("dmy", "14/03/2027", "it")],
)  # fmt: skip
def test_say_as_date_in_each_format_reads_as_the_same_date_in_words(date_format, written, language) -> None:
    attribute = f' format="{date_format}"' if date_format else ""
    [segment] = read(f'<say-as interpret-as="date"{attribute}>{written}</say-as>', language)
    assert isinstance(segment, Speech)
    assert segment.text == normalize("2027-03-14", language) and not re.search(r"\d", segment.text)


def test_a_german_say_as_date_agrees_with_the_word_before_it() -> None:
    date = '<say-as interpret-as="date" format="dmy">14.03.2027</say-as>'
    assert texts(read(f"Wir sehen uns am {date}.", "de")) == [
        "Wir sehen uns am vierzehnten März zweitausendsiebenundzwanzig."]  # fmt: skip
    assert texts(read(f"Heute ist der {date}.", "de")) == ["Heute ist der vierzehnte März zweitausendsiebenundzwanzig."]
    assert texts(read(f"{date}.", "de")) == [normalize("2027-03-14", "de") + "."]


def test_say_as_partial_dates() -> None:
    def date(date_format: str, written: str) -> list[str]:
        return texts(read(f'<say-as interpret-as="date" format="{date_format}">{written}</say-as>'))

    assert date("md", "3/14") == ["March fourteenth"]
    assert date("my", "3/2027") == ["March twenty twenty-seven"]
    assert date("y", "1999") == ["nineteen ninety-nine"]
    assert date("d", "2") == ["second"]


def test_say_as_that_cannot_be_read_as_asked_is_read_as_text() -> None:
    assert texts(read('<say-as interpret-as="cardinal">many</say-as>')) == ["many"]
    assert texts(read('<say-as interpret-as="date" format="dmy">99.99.2027</say-as>')) == [normalize("99.99.2027", "en")]
    assert texts(read('<say-as interpret-as="unit">5 km</say-as>')) == ["5 km"]  # an unknown kind: as written


def test_sub_emphasis_audio_phoneme_mark_and_unknown_elements() -> None:
    segments = read('<speak><sub alias="World Wide Web Consortium">W3C</sub> is <emphasis level="strong">big</emphasis>'
                    ' <audio src="https://x/beep.wav">beep</audio> <phoneme alphabet="ipa" ph="təˈmɑːtoʊ">tomato</phoneme>'
                    '<mark name="here"/> <fancy attr="1">text</fancy> <sub>no alias</sub>.</speak>')  # fmt: skip
    assert texts(segments) == ["World Wide Web Consortium is big beep tomato text no alias."]


def test_entities_are_the_five_and_numeric_ones_only(caplog) -> None:
    with caplog.at_level(logging.WARNING):
        segments = read("Tom &amp; Jerry &quot;&apos;&#65;&#x42;&lt;3 &unknown; &#0; &#xD800;!")
    assert texts(segments) == ["Tom & Jerry \"'AB<3 !"]
    assert caplog.text.count("Malformed SSML") == 1 and "unknown entity &unknown;" in caplog.text


def test_no_dtd_no_entity_expansion() -> None:
    bomb = ('<?xml version="1.0"?><!DOCTYPE speak [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;">'
            '<!ENTITY c "&b;&b;&b;&b;&b;&b;">]><speak>Hello &c; there. <!-- <break/> --></speak>')  # fmt: skip
    assert texts(read(bomb)) == ["Hello there."]
    external = '<!DOCTYPE speak SYSTEM "file:///etc/passwd"><speak>&xxe;Hi.</speak>'
    assert texts(read(external)) == ["Hi."]


def test_cdata_is_text_and_comments_are_silent() -> None:
    assert texts(read("<speak>A <![CDATA[x < y & z]]> B <!-- never <s>read</s> --> C.</speak>")) == ["A x < y & z B C."]


def test_malformed_ssml_is_spoken_without_its_tags_with_one_warning(caplog) -> None:
    with caplog.at_level(logging.WARNING):
        segments = read('<speak>Hello <emphasis>world</speak> & more <b>bold</i> and a<b c<s>d</s> x < 5 <break time="1s"')
    assert texts(segments) == ["Hello world & more bold and ab c", "d", "x < 5"]
    warnings = [record for record in caplog.records if "Malformed SSML" in record.getMessage()]
    assert len(warnings) == 1, caplog.text


def test_text_without_tags_or_with_a_long_lone_bracket() -> None:
    assert texts(read("Just plain text. Nothing else")) == ["Just plain text.", "Nothing else"]
    prose = "a <b" + " word" * (MAX_TAG_CHARS // 5 + 10)
    assert texts(read(prose))[0].startswith("a b word word")


def test_say_as_nested_tags_and_an_unclosed_say_as() -> None:
    assert texts(read('<say-as interpret-as="digits">1<break/>2<say-as interpret-as="x">3</say-as>4</say-as>.')) == [
        "one two three four."]  # fmt: skip
    assert texts(read('Call <say-as interpret-as="telephone">0 30 12')) == ["Call zero, three zero, one two"]


def test_pending_chars_count_what_is_held_back() -> None:
    reader = SsmlReader("en")
    assert list(reader.add_chunk("<speak>No end yet and <break time=")) == []
    assert reader.pending_chars == len("No end yet and <break time=")  # a sentence and a tag, both unfinished
    assert list(reader.add_chunk('"1s"/> more')) == [Speech("No end yet and", Style(), "en"), Pause(1.0)]
    assert reader.pending_chars == len(" more")


# -- properties ----------------------------------------------------------------------------

TAG_NAMES = ["speak", "p", "s", "break", "prosody", "say-as", "sub", "emphasis", "voice", "lang", "audio",
             "phoneme", "mark", "w", "foo:bar"]  # fmt: skip
ATTRIBUTES = ['time="700ms"', 'strength="weak"', 'rate="slow"', 'rate="150%"', 'interpret-as="characters"',
              'interpret-as="date" format="dmy"', 'interpret-as="cardinal"', 'alias="al ias"', 'name="juergen"',
              'xml:lang="fr"', "level='strong'", 'src="x.wav"', "x=1", ""]  # fmt: skip
WORDS = ["Hello", "world", "3", "14.03.2027", "12:30", " ", ". ", "! ", "\n", "Dr. ", "am 3. ", "é", "ß", ":", "-"]


@st.composite
def ssml_texts(draw: st.DrawFn) -> str:
    """SSML-like text: tags (well nested or not), words, references, comments."""
    pieces = []
    for _ in range(draw(st.integers(0, 30))):
        kind = draw(st.integers(0, 9))
        name = draw(st.sampled_from(TAG_NAMES))
        attributes = draw(st.sampled_from(ATTRIBUTES))
        if kind <= 1:
            pieces.append(f"<{name} {attributes}>")
        elif kind == 2:
            pieces.append(f"</{name}>")
        elif kind == 3:
            pieces.append(f"<{name} {attributes}/>")
        elif kind == 4:
            pieces.append(draw(st.sampled_from(["&amp;", "&quot;", "&#65;", "&#x20AC;", "&nbsp;", "&"])))
        elif kind == 5:
            pieces.append(draw(st.sampled_from(["<!-- c -->", "<![CDATA[ data ]]>", "<?pi x?>", "<!DOCTYPE speak>"])))
        else:
            pieces.append(draw(st.sampled_from(WORDS)))
    return "".join(pieces)


def cut_points(text: str) -> st.SearchStrategy[list[int]]:
    return st.lists(st.integers(0, len(text)), max_size=12)


# Printable characters including the markup ones, without "&" and "[" (a reference or a
# CDATA section may spell a tag as text on purpose: "&lt;b&gt;" is read as "<b>").
MARKUP_ALPHABET = st.sampled_from(list("<>/!?-=\"' abcsp:.\n3é") + ["speak", "break", "<s>", "</s>"])


@SETTINGS
@given(st.text(), st.data())
def test_any_text_is_read_without_an_exception(text: str, data: st.DataObject) -> None:
    segments = read(text, cuts=data.draw(cut_points(text)))
    assert all(isinstance(segment, (Speech, Pause)) for segment in segments)


@SETTINGS
@given(st.lists(MARKUP_ALPHABET, max_size=60).map("".join) | ssml_texts(), st.data())
def test_no_tag_is_ever_spoken(text: str, data: st.DataObject) -> None:
    spoken = " ".join(texts(read(text, cuts=data.draw(cut_points(text)))))
    assert not re.search(r"<[A-Za-z_:/!?]", spoken), (text, spoken)
    for tag in re.findall(r"<[^<>]*>", text):
        assert tag not in spoken or not re.search(r"[A-Za-z]", tag), (text, spoken, tag)


@SETTINGS
@given(ssml_texts() | st.text(), st.data())
def test_streaming_in_any_cut_gives_the_segments_of_one_piece(text: str, data: st.DataObject) -> None:
    language = data.draw(st.sampled_from(["en", "de", "fr"]))
    assert read(text, language, cuts=data.draw(cut_points(text))) == read(text, language)


@SETTINGS
@given(ssml_texts())
def test_segments_carry_text_and_bounded_pauses(text: str) -> None:
    for segment in read(text):
        if isinstance(segment, Pause):
            assert 0 <= segment.seconds <= MAX_BREAK_SECONDS
        else:
            assert segment.text.strip() == segment.text and segment.text
            assert segment.style.rate > 0
