"""SSML over Wyoming (issue 28), in real server processes on random-weight models.

EOS is disabled and the temperature is 0, so a reply's length follows its tokens and the
same text in the same voice gives the same samples: "spoken as the plain text" is checked
as "the same audio as the plain text", a break as zeros counted to the sample, a rate as
a span of exactly that length, a voice as that voice's audio.

One server serves most tests: the demo model with two recorded voices. Another serves two
models (the demo, and a custom config served as German) for the voice and language that
another model speaks.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
import yaml
from engine_fixtures import local_architecture, write_voice_recording
from server_fixtures import (
    RATE,
    Response,
    ServerProcess,
    read_until,
    ready_server_process,
    start_server_process,
    stop_cleanly,
    wait_voices,
)
from wyoming.client import AsyncTcpClient
from wyoming.event import Event
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeVoice

from wyoming_pocket_tts.server.ssml_reply import SEAM_SECONDS

DETERMINISTIC = ("--eos-threshold", "1000000000", "--temperature", "0")
VOICES = {"voices": [{"name": "speaker", "audio": "speaker.wav"}, {"name": "other", "audio": "other.wav"}]}
HELLO, HOW = "Hello there.", "How are you?"
# Models loaded in different threads may round a last bit differently (see test_server_multimodel).
ROUNDING_STEPS = 2


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> ServerProcess:
    folder = tmp_path_factory.mktemp("ssml")
    write_voice_recording(folder / "speaker.wav", seed=1)
    write_voice_recording(folder / "other.wav", seed=2)
    (folder / "voices.yaml").write_text(yaml.safe_dump(VOICES))
    with ready_server_process(folder, "--voices", str(folder / "voices.yaml"), "--no-predefined-voices",
                              *DETERMINISTIC) as proc:  # fmt: skip
        yield proc


async def _request(port: int, events: list[Event], stop: str) -> Response:
    async with AsyncTcpClient("127.0.0.1", port) as client:
        for event in events:
            await client.write_event(event)
        return await read_until(client, {stop, "error"}, timeout=60)


def _voice(name: str | None, language: str | None = None) -> SynthesizeVoice | None:
    return SynthesizeVoice(name=name, language=language) if name or language else None


def say(port: int, text: str, voice: str | None = None, text_format: str | None = None,
        language: str | None = None) -> np.ndarray:  # fmt: skip
    """The samples of a one-shot reply (`text_format` "ssml" for SSML)."""
    event = Synthesize(text=text, voice=_voice(voice, language), text_format=text_format).event()
    return samples(asyncio.run(_request(port, [event], "audio-stop")))


def say_streamed(port: int, chunks: list[str], voice: str | None = None) -> np.ndarray:
    """The samples of a streamed SSML reply sent in `chunks`."""
    events = [SynthesizeStart(voice=_voice(voice), text_format="ssml").event(),
              *(SynthesizeChunk(text=chunk).event() for chunk in chunks), SynthesizeStop().event()]  # fmt: skip
    response = asyncio.run(_request(port, events, "synthesize-stopped"))
    assert response.types[-2:] == ["audio-stop", "synthesize-stopped"], response.types
    return samples(response)


def ssml(port: int, text: str, voice: str | None = None) -> np.ndarray:
    return say(port, text, voice, text_format="ssml")


def samples(response: Response) -> np.ndarray:
    assert response.error is None, response.error
    assert response.types.count("audio-start") == 1 and response.types.count("audio-stop") == 1
    return np.frombuffer(response.audio, dtype="<i2")


def same(got: np.ndarray, expected: np.ndarray) -> bool:
    a, b = got.astype(np.int32), expected.astype(np.int32)
    return a.shape == b.shape and (a.size == 0 or int(np.abs(a - b).max()) <= ROUNDING_STEPS)


def zero_runs(audio: np.ndarray, shortest: int) -> list[tuple[int, int]]:
    """(start, length) of every run of exact zeros at least `shortest` samples long."""
    zero = np.concatenate([[0], (audio == 0).astype(np.int8), [0]])
    edges = np.diff(zero)
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    return [(int(s), int(e - s)) for s, e in zip(starts, ends) if e - s >= shortest]


# -- speak, s, p, break, prosody ---------------------------------------------------------


def test_a_speak_root_gives_the_audio_of_the_plain_text(server) -> None:
    plain = say(server.port, HELLO)
    assert plain.size > 10 * 1920
    assert same(ssml(server.port, f"<speak>{HELLO}</speak>"), plain)
    # A client without text_format: a text that starts with <speak> is SSML too.
    assert same(say(server.port, f'<speak version="1.1">{HELLO}</speak>'), plain)
    # text_format "text" keeps the text as text: the markdown pass drops the tags.
    assert say(server.port, f"<speak>{HELLO}</speak>", text_format="text").size == plain.size


def test_a_break_is_that_many_zeros_in_that_place(server) -> None:
    first = say(server.port, HELLO).size
    without = ssml(server.port, f"<speak><s>{HELLO}</s><s>{HOW}</s></speak>")
    with_break = ssml(server.port, f'<speak><s>{HELLO}</s><break time="700ms"/><s>{HOW}</s></speak>')
    gap = round(0.7 * RATE)
    assert with_break.size == without.size + gap
    assert not np.any(with_break[first:first + gap])
    assert zero_runs(with_break, RATE // 10) == [(first, gap)]  # the model's noise has no such runs
    assert np.array_equal(np.concatenate([with_break[:first], with_break[first + gap:]]), without)
    # A strength: medium is 0.5 s; a break mid-sentence is a pause there too.
    medium = ssml(server.port, f'<speak>Hello <break strength="medium"/> there.</speak>')
    assert len(zero_runs(medium, RATE // 10)) == 1 and zero_runs(medium, RATE // 10)[0][1] == RATE // 2


def test_prosody_rate_changes_the_length_of_its_span_only(server) -> None:
    parts = ["The lights are on.", "The door is locked.", "Good night."]
    plain = ssml(server.port, "<speak>" + " ".join(parts) + "</speak>")
    slow = ssml(server.port, f'<speak>{parts[0]} <prosody rate="50%">{parts[1]}</prosody> {parts[2]}</speak>')
    fast = ssml(server.port, f'<speak>{parts[0]} <prosody rate="x-fast">{parts[1]}</prosody> {parts[2]}</speak>')
    lengths = [say(server.port, part).size for part in parts]  # each sentence's frames, alone
    first, middle, last = lengths
    assert plain.size == sum(lengths)
    assert slow.size == first + round(2.0 * middle) + last
    assert fast.size == first + round(middle / 1.5) + last
    for reply in (slow, fast):
        assert np.array_equal(reply[:first], plain[:first])  # before the span: untouched
        assert np.array_equal(reply[-last:], plain[-last:])  # after it: the same audio again


# -- voice, say-as, sub ------------------------------------------------------------------


def test_a_voice_switch_speaks_each_span_in_its_voice(server) -> None:
    switched = ssml(server.port, f'<speak>{HELLO}<voice name="other">{HOW}</voice></speak>', voice="speaker")
    hello_speaker = say(server.port, HELLO, voice="speaker")
    how_other, how_speaker = say(server.port, HOW, voice="other"), say(server.port, HOW, voice="speaker")
    first = hello_speaker.size
    assert switched.size == first + how_other.size
    assert same(switched[:first], hello_speaker)
    # The second span goes on in the same decoder (seamless), so it is not bit for bit the
    # voice alone, but it is that voice's speech: far closer to it than to the first voice's.
    span = switched[first:].astype(np.float64)
    to_other = np.linalg.norm(span - how_other)
    to_speaker = np.linalg.norm(span - how_speaker)
    assert to_other < 0.5 * to_speaker, (to_other, to_speaker)
    # An unknown voice is spoken in the request's voice, with a warning.
    assert same(ssml(server.port, f'<speak><voice name="nobody">{HELLO}</voice></speak>', voice="speaker"),
                hello_speaker)  # fmt: skip
    assert "SSML voice 'nobody' is not offered" in server.log()


SAY_AS = [
    ("characters", "ABC1", "A B C one"),
    ("spell-out", "ok", "O K"),
    ("cardinal", "1234", "one thousand two hundred and thirty-four"),
    ("ordinal", "3", "third"),
    ("digits", "1234", "one two three four"),
    ("date", '14.03.2027" format="dmy', "March fourteenth, twenty twenty-seven"),
    ("date", '03/14/2027" format="mdy', "March fourteenth, twenty twenty-seven"),
    ("time", "14:30", "fourteen thirty"),
    ("telephone", "+49 30 1234", "plus four nine, three zero, one two three four"),
]


@pytest.mark.parametrize("interpret_as, written, words", SAY_AS)
def test_say_as_is_spoken_as_its_words(server, interpret_as: str, written: str, words: str) -> None:
    if '"' in written:  # a format attribute rides along
        written, attribute = written.split('"', 1)
        reply = ssml(server.port, f'<speak>It is <say-as interpret-as="{interpret_as}" {attribute}">{written}</say-as>.</speak>')
    else:
        reply = ssml(server.port, f'<speak>It is <say-as interpret-as="{interpret_as}">{written}</say-as>.</speak>')
    assert same(reply, say(server.port, f"It is {words}."))


def test_sub_emphasis_and_unknown_elements(server) -> None:
    reply = ssml(server.port, '<speak>The <sub alias="World Wide Web Consortium">W3C</sub> is <emphasis>big</emphasis>'
                              ' <fancy>today</fancy>.</speak>')  # fmt: skip
    assert same(reply, say(server.port, "The World Wide Web Consortium is big today."))


def test_lang_without_a_model_for_it_reads_the_text_by_that_language(server) -> None:
    # No French model: the request's voice, with French text rules ("5" is "cinq").
    reply = ssml(server.port, '<speak><lang xml:lang="fr-FR">Il fait 5 degrés.</lang></speak>')
    assert same(reply, say(server.port, "Il fait cinq degrés."))


# -- streams, malformed input, protocol ----------------------------------------------------


def test_streamed_ssml_cut_at_every_point_gives_the_one_shot_audio(server) -> None:
    text = '<speak>Hi &amp; <break time="0.3s"/>bye.</speak>'
    expected = ssml(server.port, text)
    assert len(zero_runs(expected, RATE // 10)) == 1
    for cut in range(1, len(text)):
        assert same(say_streamed(server.port, [text[:cut], text[cut:]]), expected), text[:cut]
    # Home Assistant's way: many small deltas, across sentences and tags.
    long = f'<speak><s>{HELLO}</s> <voice name="other">{HOW}</voice> <prosody rate="slow">Fine.</prosody></speak>'
    assert same(say_streamed(server.port, [long[i:i + 3] for i in range(0, len(long), 3)]), ssml(server.port, long))


def test_malformed_ssml_is_spoken_without_its_tags_with_one_warning(server) -> None:
    before = server.log().count("Malformed SSML")
    reply = ssml(server.port, "<speak>Hello <emphasis>there</speak> and <b>friends</i> <break time=")
    assert same(reply, say(server.port, "Hello there and friends"))
    assert server.log().count("Malformed SSML") == before + 1


def test_an_unknown_event_is_ignored_and_the_connection_serves_on(server) -> None:
    events = [Event(type="future-event", data={"anything": [1, 2, 3]}), Synthesize(text=HELLO).event()]
    response = asyncio.run(_request(server.port, events, "audio-stop"))
    assert same(samples(response), say(server.port, HELLO))


def test_a_voice_with_a_language_and_no_name_gets_that_languages_voice(server) -> None:
    default = say(server.port, HELLO)
    assert same(say(server.port, HELLO, language="en-US"), default)
    assert same(say(server.port, HELLO, language="de"), default)  # none speaks German: the default


# -- several models ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_models(tmp_path_factory) -> ServerProcess:
    """The demo model (English: voice papa) and a custom config served as German (oma)."""
    folder = tmp_path_factory.mktemp("ssml_two")
    custom = local_architecture("english_7m_2026-10", folder / "model")
    write_voice_recording(folder / "papa.wav", seed=1)
    write_voice_recording(folder / "oma.wav", seed=2)
    voices = {"voices": [{"name": "papa", "audio": "papa.wav"},
                         {"name": "oma", "audio": "oma.wav", "model": str(custom.config_path)}]}  # fmt: skip
    (folder / "voices.yaml").write_text(yaml.safe_dump(voices))
    (folder / "empty").mkdir()
    proc = start_server_process(folder, "--model", "demo", "--model", str(custom.config_path), "--language", "de",
                                "--voices", str(folder / "voices.yaml"), "--voices-dir", str(folder / "empty"),
                                "--no-predefined-voices", *DETERMINISTIC)  # fmt: skip
    try:
        wait_voices(proc)
        yield proc
    finally:
        stop_cleanly(proc, log_tail=4000)


def test_another_models_voice_and_language_are_spoken_by_that_model(two_models) -> None:
    port = two_models.port
    hello_papa, guten_oma = say(port, HELLO, voice="papa"), say(port, "Guten Tag.", voice="oma")
    seam = round(SEAM_SECONDS * RATE)
    for markup in ('<voice name="oma">Guten Tag.</voice>', '<lang xml:lang="de-DE">Guten Tag.</lang>'):
        reply = ssml(port, f"<speak>{HELLO}{markup}</speak>", voice="papa")
        first = hello_papa.size
        assert reply.size == first + guten_oma.size, markup
        assert same(reply[:first], hello_papa), markup
        # A session of its own on the other model: exactly its audio, but for the seam's fade.
        assert same(reply[first + seam:], guten_oma[seam:]), markup
        # The seam: the new model's audio starts from the last sample before it (no step).
        assert abs(int(reply[first]) - int(reply[first - 1])) <= ROUNDING_STEPS, markup
    # And back: the first model again, in a new session.
    back = ssml(port, f'<speak><voice name="oma">Guten Tag.</voice>{HELLO}</speak>', voice="papa")
    assert same(back[guten_oma.size + seam:], hello_papa[seam:])


def test_a_language_without_a_name_gets_the_default_voice_of_its_model(two_models) -> None:
    port = two_models.port
    assert same(say(port, "Guten Tag.", language="de-DE"), say(port, "Guten Tag.", voice="oma"))
    assert same(say(port, HELLO, language="en"), say(port, HELLO, voice="papa"))
    events = [SynthesizeStart(voice=_voice(None, "de"), text_format="ssml").event(),
              SynthesizeChunk(text="<speak>Guten Tag.</speak>").event(), SynthesizeStop().event()]  # fmt: skip
    streamed = samples(asyncio.run(_request(port, events, "synthesize-stopped")))
    assert same(streamed, say(port, "Guten Tag.", voice="oma"))


# -- the fake engine: what reaches the engine ------------------------------------------------


def test_a_voice_that_cannot_be_made_is_spoken_in_the_requests_voice(tmp_path, caplog) -> None:
    import logging

    from server_fixtures import FakeModel, FakeVoices, fake_loader, inprocess_server

    model = FakeModel(frame_delay=0.0)
    text = '<speak>Hi there. <voice name="broken">How are you?</voice> <voice name="marius">Fine.</voice></speak>'

    async def go() -> Response:
        async with inprocess_server(fake_loader(model, FakeVoices(("alba", "marius", "broken"))), tmp_path) as port:
            event = Synthesize(text=text, text_format="ssml").event()
            return await _request(port, [event], "audio-stop")

    with caplog.at_level(logging.WARNING):
        response = asyncio.run(go())
    assert response.error is None and response.audio
    assert list(zip(model.log.texts, model.log.voices)) == [
        ("Hi there.", "alba"), ("How are you?", "alba"), ("Fine.", "marius")]  # fmt: skip
    assert "SSML voice 'broken' of model fake unavailable" in caplog.text
