"""The speaking-rate stretcher and the pauses between sentences, on real espeak-ng speech."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from speech_fixtures import FRAME_SIZE, QUIET, SAMPLE_RATE, ensure_espeak, frames_of, max_jump, pitch_ratio
from speech_fixtures import speak_sentences
from wyoming_pocket_tts.audio import ReplyAudio, TimeStretcher, check_sentence_silence, silence

SCALES = (0.8, 1.0, 1.25, 1.5)


@pytest.fixture(scope="session")
def espeak() -> str:
    found = ensure_espeak()
    if found is None:
        pytest.skip("espeak-ng is not installed and could not be installed with apt-get (see the log)")
    return found


@pytest.fixture(scope="session")
def sentences(espeak: str, tmp_path_factory: pytest.TempPathFactory) -> list[np.ndarray]:
    return speak_sentences(espeak, tmp_path_factory.mktemp("speech"))


@pytest.fixture(scope="session")
def speech(sentences: list[np.ndarray]) -> np.ndarray:
    return sentences[1]


def stretch_streamed(audio: np.ndarray, length_scale: float) -> tuple[list[np.ndarray], np.ndarray]:
    """The chunks of a frame-by-frame run (flush last) and their concatenation."""
    stretcher = TimeStretcher(length_scale, SAMPLE_RATE)
    chunks = [stretcher.process(frame) for frame in frames_of(audio)]
    chunks.append(stretcher.flush())
    return chunks, np.concatenate(chunks)


def quiet_runs(audio: np.ndarray, threshold: float = QUIET) -> list[tuple[int, int]]:
    """(start, length) of each stretch of samples below ``threshold``."""
    quiet = np.concatenate([[False], np.abs(audio) < threshold, [False]])
    edges = np.flatnonzero(np.diff(quiet.astype(np.int8)))
    return [(int(start), int(end - start)) for start, end in zip(edges[::2], edges[1::2])]


# -- one stream ---------------------------------------------------------------------------


@pytest.mark.parametrize("length_scale", SCALES)
def test_duration_scales_by_length_scale(speech, length_scale):
    _, out = stretch_streamed(speech, length_scale)
    assert out.dtype == np.float32
    assert out.size == pytest.approx(length_scale * speech.size, rel=0.02)


@pytest.mark.parametrize("length_scale", SCALES)
def test_pitch_is_preserved(speech, length_scale):
    _, out = stretch_streamed(speech, length_scale)
    assert pitch_ratio(speech, out, length_scale) == pytest.approx(1.0, abs=0.03)


def test_resampling_would_fail_the_pitch_check(speech):
    # The pitch check can tell: plain resampling to 1.25x the length lowers the pitch by 20%.
    slowed = np.interp(np.arange(0, speech.size, 0.8), np.arange(speech.size), speech).astype(np.float32)
    assert pitch_ratio(speech, slowed, 1.25) == pytest.approx(0.8, abs=0.03)


@pytest.mark.parametrize("length_scale", SCALES)
def test_no_discontinuity_at_frame_boundaries(speech, length_scale):
    chunks, out = stretch_streamed(speech, length_scale)
    limit = max_jump(speech) * 1.001  # float rounding of the overlap-add
    assert max_jump(out) <= limit
    seams = np.cumsum([chunk.size for chunk in chunks[:-1]])
    seams = seams[(seams > 0) & (seams < out.size)]
    assert np.max(np.abs(out[seams] - out[seams - 1])) <= limit
    # Frame boundaries change nothing: the same as the whole recording in one call.
    whole = TimeStretcher(length_scale, SAMPLE_RATE)
    assert np.array_equal(out, np.concatenate([whole.process(speech), whole.flush()]))


@pytest.mark.parametrize("length_scale", SCALES)
def test_each_frame_gives_audio_at_once_with_less_than_a_frame_of_latency(speech, length_scale):
    chunks, _ = stretch_streamed(speech, length_scale)
    sent = np.cumsum([chunk.size for chunk in chunks[:-1]])
    taken = FRAME_SIZE * np.arange(1, len(sent) + 1)
    # Output so far covers all input but at most the last frame's worth.
    assert np.all(sent >= length_scale * (taken - FRAME_SIZE))
    assert all(chunk.size > 0 for chunk in chunks[:-1])


def test_one_is_bit_identical_pass_through(speech):
    chunks, out = stretch_streamed(speech, 1.0)
    assert chunks[-1].size == 0  # nothing held back
    assert np.array_equal(out, speech)
    assert all(np.array_equal(chunk, frame) for chunk, frame in zip(chunks, frames_of(speech)))


def test_flush_resets_for_a_new_stream(speech):
    stretcher = TimeStretcher(1.25, SAMPLE_RATE)
    first = np.concatenate([stretcher.process(speech), stretcher.flush()])
    second = np.concatenate([stretcher.process(speech), stretcher.flush()])
    assert np.array_equal(first, second)


# -- a reply of several sentences -----------------------------------------------------------


@pytest.mark.parametrize("length_scale", (1.0, 1.25, 0.8))
def test_reply_without_pauses_is_one_seamless_stretch(sentences, length_scale):
    reply = ReplyAudio(SAMPLE_RATE, length_scale=length_scale)
    chunks = [chunk for sentence in sentences for chunk in reply.sentence(iter(frames_of(sentence)))]
    out = np.concatenate(chunks + [reply.finish()])
    # One stretcher across the sentences: the same as stretching the joined speech.
    _, joined = stretch_streamed(np.concatenate(sentences), length_scale)
    assert np.array_equal(out, joined)
    assert len(chunks) == sum(len(frames_of(sentence)) for sentence in sentences)


@pytest.mark.parametrize("length_scale", (1.0, 1.25, 0.8))
def test_reply_pauses_between_sentences_only(sentences, length_scale):
    pause = 0.5
    reply = ReplyAudio(SAMPLE_RATE, length_scale=length_scale, sentence_silence=pause)
    chunks = [chunk for sentence in sentences for chunk in reply.sentence(iter(frames_of(sentence)))]
    reply.sentence_boundary()  # a boundary after the last sentence owes nothing
    out = np.concatenate(chunks + [reply.finish()])

    # One chunk per model frame: each pause rides in the next sentence's first chunk.
    assert len(chunks) == sum(len(frames_of(sentence)) for sentence in sentences)
    speech_samples = sum(sentence.size for sentence in sentences)
    expected = length_scale * speech_samples + 2 * pause * SAMPLE_RATE
    assert abs(out.size - expected) <= 2
    long_quiet = [(start, length) for start, length in quiet_runs(out) if length > 0.25 * SAMPLE_RATE]
    assert len(long_quiet) == 2, "one pause between each two sentences, none at the ends"
    for start, length in long_quiet:
        assert 0 < start and start + length < out.size
        assert length / SAMPLE_RATE == pytest.approx(pause, abs=0.04)
        # The middle of a pause is digital silence.
        middle = out[start + length // 4 : start + 3 * length // 4]
        assert not np.any(middle)
    assert max_jump(out) <= max_jump(np.concatenate(sentences)) * 1.001


def test_pause_at_one_is_exact_digital_silence(sentences):
    reply = ReplyAudio(SAMPLE_RATE, sentence_silence=0.25)
    first = [reply.frame(frame) for frame in frames_of(sentences[0])]
    reply.sentence_boundary()
    reply.sentence_boundary()  # twice (a skipped sentence): still one pause
    second_first_chunk = reply.frame(sentences[1][:FRAME_SIZE])
    pause = round(0.25 * SAMPLE_RATE)
    assert second_first_chunk.size == pause + FRAME_SIZE
    assert not np.any(second_first_chunk[:pause])
    assert np.array_equal(second_first_chunk[pause:], sentences[1][:FRAME_SIZE])
    assert np.array_equal(np.concatenate(first), sentences[0])
    assert reply.finish().size == 0


@pytest.mark.parametrize("length_scale", (1.0, 1.25, 0.8))
def test_a_break_is_exact_silence_in_place_of_the_pause_between_sentences(sentences, length_scale):
    """SSML <break>: exact zeros (not stretched) after the speech before it, stretched to
    its end; the pause between sentences owed at the same place is not added."""
    reply = ReplyAudio(SAMPLE_RATE, length_scale=length_scale, sentence_silence=0.5)
    first = [chunk for chunk in reply.sentence(iter(frames_of(sentences[0])))]
    reply.pause(0.7)
    second = [chunk for chunk in reply.sentence(iter(frames_of(sentences[1])))]
    out = np.concatenate(first + second + [reply.finish()])

    _, first_alone = stretch_streamed(sentences[0], length_scale)
    _, second_alone = stretch_streamed(sentences[1], length_scale)
    gap = round(0.7 * SAMPLE_RATE)
    assert np.array_equal(out, np.concatenate([first_alone, np.zeros(gap, np.float32), second_alone]))
    assert len(first + second) == len(frames_of(sentences[0])) + len(frames_of(sentences[1]))


def test_breaks_in_a_row_add_up_and_one_at_the_end_is_sent(sentences):
    reply = ReplyAudio(SAMPLE_RATE)
    start = [reply.frame(frame) for frame in frames_of(sentences[0])]
    reply.pause(0.25)
    reply.pause(0.5)
    end = reply.finish()
    assert np.array_equal(np.concatenate(start), sentences[0])
    assert end.size == round(0.75 * SAMPLE_RATE) and not np.any(end)
    reply.pause(100)
    assert reply.finish().size == round(check_sentence_silence(10) * SAMPLE_RATE)  # capped


def test_a_break_of_zero_removes_the_pause_between_sentences(sentences):
    reply = ReplyAudio(SAMPLE_RATE, sentence_silence=0.5)
    first = [chunk for chunk in reply.sentence(iter(frames_of(sentences[0])))]
    reply.pause(0.0)  # <break strength="none"/>
    second = [chunk for chunk in reply.sentence(iter(frames_of(sentences[1])))]
    assert np.array_equal(np.concatenate(first + second), np.concatenate(sentences[:2]))


def test_a_span_at_another_length_scale_changes_that_span_only(sentences):
    """SSML <prosody rate>: each span is stretched on its own, to its own length."""
    reply = ReplyAudio(SAMPLE_RATE, length_scale=1.0)
    out = []
    for sentence, length_scale in zip(sentences[:3], (1.0, 1.5, 1.0)):
        reply.set_length_scale(length_scale)
        out += reply.sentence(iter(frames_of(sentence)), starts_sentence=False)
    out.append(reply.finish())
    audio = np.concatenate(out)
    _, slow = stretch_streamed(sentences[1], 1.5)
    assert np.array_equal(audio, np.concatenate([sentences[0], slow, sentences[2]]))
    assert reply.length_scale == 1.0


def test_no_pause_before_the_first_sentence(sentences):
    reply = ReplyAudio(SAMPLE_RATE, sentence_silence=0.5)
    reply.sentence_boundary()
    assert np.array_equal(reply.frame(sentences[0][:FRAME_SIZE]), sentences[0][:FRAME_SIZE])


def test_closing_a_sentence_early_closes_the_engine_iterator(sentences):
    closed = []

    def engine_frames():
        try:
            yield from frames_of(sentences[0])
        finally:
            closed.append(True)

    shaped = ReplyAudio(SAMPLE_RATE, length_scale=1.25).sentence(engine_frames())
    next(shaped)
    shaped.close()
    assert closed == [True]


# -- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0.49, 2.01, 0.0, -1.0, float("nan"), float("inf"), "fast", None])
def test_bad_length_scale_is_rejected(bad):
    with pytest.raises(ValueError, match="length_scale"):
        TimeStretcher(bad, SAMPLE_RATE)
    with pytest.raises(ValueError, match="length_scale"):
        ReplyAudio(SAMPLE_RATE, length_scale=bad)


@pytest.mark.parametrize("bad", [-0.1, 10.5, float("nan"), "long", None])
def test_bad_sentence_silence_is_rejected(bad):
    with pytest.raises(ValueError, match="sentence_silence"):
        check_sentence_silence(bad)
    with pytest.raises(ValueError, match="sentence_silence"):
        ReplyAudio(SAMPLE_RATE, sentence_silence=bad)


def test_silence_helper():
    assert np.array_equal(silence(0.5, SAMPLE_RATE), np.zeros(12_000, dtype=np.float32))
    assert silence(0, SAMPLE_RATE).size == 0


def test_bad_frame_is_rejected_and_the_stream_goes_on(speech):
    stretcher = TimeStretcher(1.25, SAMPLE_RATE)
    good = [stretcher.process(frame) for frame in frames_of(speech)[:3]]
    with pytest.raises(ValueError, match="1-D"):
        stretcher.process(np.zeros((2, FRAME_SIZE), dtype=np.float32))
    with pytest.raises(ValueError, match="float"):
        stretcher.process(np.zeros(FRAME_SIZE, dtype=np.int16))
    rest = [stretcher.process(frame) for frame in frames_of(speech)[3:]]
    out = np.concatenate(good + rest + [stretcher.flush()])
    _, expected = stretch_streamed(speech, 1.25)
    assert np.array_equal(out, expected)


def test_empty_stream_and_empty_frames():
    stretcher = TimeStretcher(1.5, SAMPLE_RATE)
    assert stretcher.process(np.zeros(0, dtype=np.float32)).size == 0
    assert stretcher.flush().size == 0


def test_audio_package_imports_no_torch():
    code = "import sys, wyoming_pocket_tts.audio; sys.exit('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).parents[1], check=False)
    assert result.returncode == 0, "wyoming_pocket_tts.audio imported torch"
