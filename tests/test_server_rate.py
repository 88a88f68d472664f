"""Speaking rate and pauses (issue 17) in the real server: `--length-scale`, `--sentence-silence`
and their per-voice keys in the voices file, one-shot and streamed.

The demo model runs with EOS disabled, so a reply's length follows its token count alone and
the same text always gives the same number of frames: a reply at length scale X must then be
X times as long as at 1.0, to the sample. One server serves the module, with the server-wide
values 1.25 and 0.5 s; the voices of its voices file override them (or not).
"""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest
from engine_fixtures import write_voice_recording
from server_fixtures import (
    FRAME,
    RATE,
    Response,
    ServerProcess,
    describe,
    ha_stream,
    one_shot,
    ready_server_process,
)

from wyoming_pocket_tts.__main__ import build_parser
from wyoming_pocket_tts.audio import check_length_scale, check_sentence_silence
from wyoming_pocket_tts.settings import BY_NAME, SettingError, check_per_voice

SERVER_LENGTH_SCALE = 1.25
SERVER_SENTENCE_SILENCE = 0.5
VOICES_FILE = """\
default: speaker
voices:
  - name: speaker           # the server's 1.25 and 0.5 s
    audio: speaker.wav
  - name: plain             # overrides both
    audio: speaker.wav
    length_scale: 1.0
    sentence_silence: 0
  - name: grandma           # the same recording, slower; the server's pauses
    audio: speaker.wav
    length_scale: 1.2
  - name: grandma-fast      # and faster, without pauses
    audio: speaker.wav
    length_scale: 0.9
    sentence_silence: 0
  - name: broken            # out of range: skipped, the others still work
    audio: speaker.wav
    length_scale: 3
"""
ONE_SENTENCE = "Hello there, how are you today?"
THREE_SENTENCES = "The lights are off. The door is locked. Good night."
# How Home Assistant streams the same three sentences: LLM deltas across sentence ends.
THREE_DELTAS = ["The lights", " are off. The door", " is locked. Good", " night."]
# The scale each voice gets, and whether it pauses between sentences.
LENGTH_SCALES = {"plain": 1.0, "speaker": 1.25, "grandma": 1.2, "grandma-fast": 0.9}
# Pauses go through the stretcher, whose windows fade speech in and out at their edges.
PAUSE_TOLERANCE_S = 0.04


def run(coro):
    return asyncio.run(coro)


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> ServerProcess:
    tmp = tmp_path_factory.mktemp("rate")
    write_voice_recording(tmp / "speaker.wav")
    (tmp / "voices.yaml").write_text(VOICES_FILE)
    with ready_server_process(
        tmp, "--voices", str(tmp / "voices.yaml"), "--no-predefined-voices", "--eos-threshold", "1000000000",
        "--length-scale", str(SERVER_LENGTH_SCALE), "--sentence-silence", str(SERVER_SENTENCE_SILENCE),
    ) as proc:  # fmt: skip
        yield proc


def samples(response: Response) -> np.ndarray:
    assert response.error is None, response.error
    assert response.types.count("audio-start") == 1 and response.types.count("audio-stop") == 1
    return np.frombuffer(response.audio, dtype="<i2")


def silent_gaps(audio: np.ndarray, shortest_s: float = 0.2) -> list[tuple[float, float]]:
    """(start, length) in seconds of every run of digital silence at least `shortest_s` long.

    The demo model makes noise, never a run of exact zeros that long: only pauses are.
    """
    silent = np.concatenate([[0], (audio == 0).astype(np.int8), [0]])
    edges = np.diff(silent)
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    return [(s / RATE, (e - s) / RATE) for s, e in zip(starts, ends) if e - s >= shortest_s * RATE]


def streamed(port: int, voice: str) -> Response:
    response, _ = run(ha_stream(port, THREE_DELTAS, voice=voice, pause=0.05))
    return response


def test_the_voices_file_offers_the_voices_with_good_settings(server) -> None:
    names = [voice.name for voice in run(describe(server.port))[0].tts[0].voices]
    assert names == ["speaker", "plain", "grandma", "grandma-fast"]  # "broken" was skipped
    assert "voice 'broken': length_scale must be at most 2" in server.log()


def test_one_shot_duration_scales_by_the_voice_length_scale(server) -> None:
    plain = run(one_shot(server.port, ONE_SENTENCE, voice="plain"))
    frames = len(plain.chunks)
    assert frames > 10 and all(len(chunk.audio) == FRAME * 2 for chunk in plain.chunks)  # 1.0: untouched
    for voice, scale in LENGTH_SCALES.items():
        response = run(one_shot(server.port, ONE_SENTENCE, voice=voice))
        # One chunk per model frame as at 1.0, plus the stretcher's tail before audio-stop.
        assert len(response.chunks) == frames + (scale != 1.0), voice
        assert abs(samples(response).size - round(scale * frames * FRAME)) <= 2, voice
        assert silent_gaps(samples(response)) == [], voice  # one sentence: no pause


def test_stretch_adds_less_than_a_frame_of_latency(server) -> None:
    """Chunk k goes out when model frame k is decoded; by then all but less than one frame
    of the k frames' stretched audio must be in it (the stretcher holds back ~40 ms)."""
    for voice in ("speaker", "grandma", "grandma-fast"):
        scale = LENGTH_SCALES[voice]
        for response in (run(one_shot(server.port, ONE_SENTENCE, voice=voice)), streamed(server.port, voice)):
            assert response.types.index("audio-start") < response.types.index("audio-chunk")
            sent = np.cumsum([len(chunk.audio) // 2 for chunk in response.chunks[:-1]])
            assert sent[0] > 0
            frames_decoded = np.arange(1, sent.size + 1)
            assert np.all(sent > scale * (frames_decoded - 1) * FRAME), voice


def test_streamed_reply_stretches_across_its_sentences(server) -> None:
    plain = streamed(server.port, "plain")
    frames = len(plain.chunks)
    assert samples(plain).size == frames * FRAME and silent_gaps(samples(plain)) == []
    fast = streamed(server.port, "grandma-fast")
    assert len(fast.chunks) == frames + 1
    assert abs(samples(fast).size - round(0.9 * frames * FRAME)) <= 2
    assert silent_gaps(samples(fast)) == []


@pytest.mark.parametrize("mode", ["one-shot", "streamed"])
@pytest.mark.parametrize("voice", ["speaker", "grandma"])
def test_sentence_silence_between_sentences_only(server, mode: str, voice: str) -> None:
    if mode == "one-shot":
        response = run(one_shot(server.port, THREE_SENTENCES, voice=voice))
    else:
        response = streamed(server.port, voice)
    audio = samples(response)
    gaps = silent_gaps(audio)
    assert len(gaps) == 2, gaps
    for start, length in gaps:
        assert abs(length - SERVER_SENTENCE_SILENCE) <= PAUSE_TOLERANCE_S, gaps
        # Between sentences: neither at the start nor at the end of the reply.
        assert start > 0.5 and start + length < audio.size / RATE - 0.5, gaps
    # Three sentences spoken one by one (as a stream is), stretched, plus the two pauses.
    frames = len(streamed(server.port, "plain").chunks)
    expected = round(LENGTH_SCALES[voice] * frames * FRAME) + 2 * round(SERVER_SENTENCE_SILENCE * RATE)
    assert abs(audio.size - expected) <= 4


def test_per_voice_zero_silence_overrides_the_server(server) -> None:
    for voice in ("plain", "grandma-fast"):
        assert silent_gaps(samples(run(one_shot(server.port, THREE_SENTENCES, voice=voice)))) == [], voice


# -- one source of truth for the bounds ------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "check", "low", "high"),
    [("length_scale", check_length_scale, 0.5, 2.0), ("sentence_silence", check_sentence_silence, 0.0, 10.0)],
)
def test_settings_accept_exactly_what_the_audio_package_accepts(name, check, low, high) -> None:
    setting = BY_NAME[name]
    assert (setting.minimum, setting.maximum) == (low, high)
    for value in (low, high, (low + high) / 2):
        assert setting.check(value) == check(value) == value
    for value in (low - 0.01, high + 0.01):
        with pytest.raises(SettingError):
            setting.check(value)
        with pytest.raises(ValueError):
            check(value)
    for value in (math.nan, math.inf, "nan", "-inf"):  # a voices file's .nan, a request's NaN
        with pytest.raises(SettingError, match="finite"):
            setting.check(value)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--length-scale", "2.5"], "argument --length-scale: must be at most 2"),
        (["--length-scale", "fast"], "argument --length-scale: must be a number"),
        (["--sentence-silence", "-1"], "argument --sentence-silence: must be at least 0"),
    ],
)
def test_bad_values_on_the_command_line_are_refused(argv, message, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_bad_per_voice_values_are_refused() -> None:
    with pytest.raises(SettingError, match="length_scale must be at least 0.5"):
        check_per_voice({"length_scale": 0.1})
    with pytest.raises(SettingError, match="sentence_silence must be a number"):
        check_per_voice({"sentence_silence": "long"})
    assert check_per_voice({"length_scale": 1.2, "sentence_silence": 0}) == {"length_scale": 1.2, "sentence_silence": 0}

