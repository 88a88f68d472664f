"""Continuous batching (engine/batch.py): replies stepped together, each with the audio it
has alone; rows joining, leaving, cancelled, paused; the engine's threads."""

from __future__ import annotations

import gc
import platform
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from engine_fixtures import observe_steps_and_decodes, write_voice_recording
from wyoming_pocket_tts.engine import GenerationOptions, TTSModel, VoiceState, build_demo_model, kernels, quantize_model
from wyoming_pocket_tts.engine.batch import LOOKAHEAD, MAX_UNREAD
from wyoming_pocket_tts.engine.kernels import rows_linear
from wyoming_pocket_tts.engine.quantize import engine_for, machine_engine

NO_EOS = 1e9
TEXT = "The kitchen lights are on. The door is locked."
# A bound for a hang, not a timing: generous for a loaded machine and for an emulated
# Raspberry Pi (../shared/tools/aarch64), where four replies take minutes.
WAIT_S = 600


# int8 by the machine's engine (ours where the CPU has VNNI), and by torch's too where
# that is another one: each must keep a row's bits in a batch.
TORCH_INT8 = engine_for(platform.machine(), torch.backends.quantized.supported_engines)
PRECISIONS = ["float32", "int8"] + (["int8 by torch"] if machine_engine() != TORCH_INT8 else [])


@pytest.fixture(scope="module", params=PRECISIONS)
def model(request: pytest.FixtureRequest) -> TTSModel:
    model = build_demo_model()
    if request.param == "int8":
        quantize_model(model)
    elif request.param == "int8 by torch":
        quantize_model(model, TORCH_INT8)
    return model


@pytest.fixture(scope="module")
def voices(model: TTSModel, tmp_path_factory: pytest.TempPathFactory) -> list[VoiceState]:
    folder = tmp_path_factory.mktemp("batch-voices")
    return [model.voice_from_recording(write_voice_recording(folder / f"v{seed}.wav", seed=seed)) for seed in (1, 2, 3)]


# Four replies unlike each other: voices, temperatures, seeds, texts (prompt lengths).
REPLIES = [
    (0, GenerationOptions(temperature=0.0, eos_threshold=NO_EOS), TEXT),
    (1, GenerationOptions(temperature=0.7, seed=3, eos_threshold=NO_EOS), "Good morning, the coffee is ready."),
    (2, GenerationOptions(temperature=0.3, seed=11, eos_threshold=NO_EOS), "It is twenty degrees outside."),
    (0, GenerationOptions(temperature=1.0, seed=5, eos_threshold=NO_EOS), "Hello."),
]


def alone(model: TTSModel, voice: VoiceState, options: GenerationOptions, text: str) -> np.ndarray:
    return np.concatenate(list(model.session(voice, options).speak(text)))


class Reader(threading.Thread):
    """Reads one reply in its own thread: its first `hold` frames, then waits for `go`
    (so that the other replies have joined the batch), then the rest."""

    def __init__(self, frames: Iterator[np.ndarray], go: threading.Event, hold: int = 1,
                 stop_after: int | None = None) -> None:  # fmt: skip
        super().__init__(daemon=True)
        self.frames, self.go, self.hold, self.stop_after = frames, go, hold, stop_after
        self.got: list[np.ndarray] = []
        self.held = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            for frame in self.frames:
                self.got.append(frame)
                if len(self.got) == self.hold:
                    self.held.set()
                    assert self.go.wait(WAIT_S)
                if self.stop_after is not None and len(self.got) == self.stop_after:
                    self.frames.close()  # type: ignore[attr-defined]
                    break
        except BaseException as err:  # noqa: BLE001 -- reported by the test
            self.error = err
        finally:
            self.held.set()

    def audio(self) -> np.ndarray:
        self.join(WAIT_S)
        assert not self.is_alive() and self.error is None, self.error
        return np.concatenate(self.got)


def batch_sizes(model: TTSModel, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of rows of every batched step from now on."""
    sizes: list[int] = []
    step_rows = model.network.flow_lm.step_rows

    def spy(previous: torch.Tensor, *args, **kwargs):
        sizes.append(previous.shape[0])
        return step_rows(previous, *args, **kwargs)

    monkeypatch.setattr(model.network.flow_lm, "step_rows", spy)
    return sizes


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Products on one thread, as the engine's jobs run them: with two, MKL splits a one-row
    product's outputs between the threads, and 1001 outputs split where the kernel's
    blocks do not (this test failed when run on its own, whose main thread has two)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("rows", [1, 2, 3, 4, 5, 8])
@pytest.mark.parametrize("shape", [(64, 48), (1024, 3072), (4096, 1024), (1024, 1000), (1024, 1001)])
@pytest.mark.parametrize("slice_kib", [None, 1])
def test_rows_multiplied_together_are_each_bit_for_bit_alone(rows: int, shape: tuple[int, int], slice_kib: int | None,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Each row equals F.linear of that row alone, with the weight sliced as this CPU's
    cache sets it, and in slices as thin as they go (many slices, the last one of another
    width, outputs left over after the kernel's blocks)."""
    if slice_kib is not None:
        monkeypatch.setattr(kernels, "SLICE_BYTES", slice_kib << 10)
    generator = torch.Generator().manual_seed(rows)
    weight, bias = torch.randn(shape[1], shape[0], generator=generator), torch.randn(shape[1], generator=generator)
    x = torch.randn(rows, 1, shape[0], generator=generator)
    together, without_bias = rows_linear(x, weight, bias), rows_linear(x[:, 0], weight, None)
    for row in range(rows):
        assert torch.equal(together[row : row + 1], F.linear(x[row : row + 1], weight, bias))
        assert torch.equal(without_bias[row : row + 1], F.linear(x[row, 0:1], weight))


@pytest.mark.parametrize("float32_kernel", ["ours", "torch's"])
def test_four_different_replies_batched_each_give_their_audio_alone(model: TTSModel, voices: list[VoiceState],
                                                                   float32_kernel: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Other voices, temperatures, seeds and prompt lengths in one batch: each reply's audio
    is exactly what it gives alone (float32, and int8 with its per-row products), with our
    kernel for float32 steps (where it is used) and without it."""
    if float32_kernel == "torch's":
        monkeypatch.setattr(kernels, "ROWS_KERNEL", None)
    expected = [alone(model, voices[v], options, text) for v, options, text in REPLIES]
    sizes = batch_sizes(model, monkeypatch)
    go = threading.Event()
    readers = [Reader(model.session(voices[v], options).speak(text), go) for v, options, text in REPLIES]
    for reader in readers:
        reader.start()
    for reader in readers:
        assert reader.held.wait(WAIT_S)
    go.set()
    for reader, reference in zip(readers, expected):
        np.testing.assert_array_equal(reader.audio(), reference)
    assert max(sizes) == len(REPLIES), sizes  # they were stepped together
    assert model.batcher.active_rows == 0


def test_a_reply_joins_mid_batch_and_another_leaves_mid_batch(model: TTSModel, voices: list[VoiceState],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """A joins; B joins while A is speaking; C joins after B has left early (its reader
    closed it): every frame each got is the audio it has alone."""
    (va, oa, ta), (vb, ob, tb), (vc, oc, tc) = REPLIES[:3]
    expected = [alone(model, voices[va], oa, ta * 2), alone(model, voices[vb], ob, tb), alone(model, voices[vc], oc, tc)]
    sizes = batch_sizes(model, monkeypatch)
    go_a, go_b, go_c = threading.Event(), threading.Event(), threading.Event()
    a = Reader(model.session(voices[va], oa).speak(ta * 2), go_a, hold=5)
    a.start()
    assert a.held.wait(WAIT_S)
    b = Reader(model.session(voices[vb], ob).speak(tb), go_b, hold=2, stop_after=6)
    b.start()
    assert b.held.wait(WAIT_S)
    go_b.set()
    b.join(WAIT_S)
    c = Reader(model.session(voices[vc], oc).speak(tc), go_c, hold=1)
    c.start()
    assert c.held.wait(WAIT_S)
    go_a.set()
    go_c.set()
    np.testing.assert_array_equal(a.audio(), expected[0])
    assert len(b.got) == 6
    np.testing.assert_array_equal(b.audio(), expected[1][: 6 * model.frame_size])
    np.testing.assert_array_equal(c.audio(), expected[2])
    assert 2 in sizes, sizes
    assert model.batcher.active_rows == 0


def test_one_of_four_cancelled_stops_within_a_frame_and_the_others_are_unchanged(
        model: TTSModel, voices: list[VoiceState]) -> None:
    expected = [alone(model, voices[v], options, text) for v, options, text in REPLIES]
    cancels = [threading.Event() for _ in REPLIES]
    go = threading.Event()
    readers = [Reader(model.session(voices[v], options, cancel).speak(text), go, hold=2)
               for (v, options, text), cancel in zip(REPLIES, cancels)]  # fmt: skip
    for reader in readers:
        reader.start()
    for reader in readers:
        assert reader.held.wait(WAIT_S)
    cancels[1].set()
    go.set()
    cancelled = readers[1].audio()
    assert cancelled.size == 2 * model.frame_size  # nothing after the cancel
    for index in (0, 2, 3):
        np.testing.assert_array_equal(readers[index].audio(), expected[index])
    assert model.batcher.active_rows == 0


def test_a_reader_that_stops_taking_frames_pauses_its_row(model: TTSModel, voices: list[VoiceState],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """A listener that stops reading: its row stops stepping after a few frames (no CPU),
    while another reply is spoken whole; read again, it goes on where it stopped."""
    v, options, text = REPLIES[0]
    expected = alone(model, voices[v], options, text * 3)
    sizes = batch_sizes(model, monkeypatch)
    go = threading.Event()
    stalled = Reader(model.session(voices[v], options).speak(text * 3), go, hold=1)
    stalled.start()
    assert stalled.held.wait(WAIT_S)
    other_v, other_options, other_text = REPLIES[1]
    assert alone(model, voices[other_v], other_options, other_text * 4).size
    # The stalled row took part in at most as many steps as fill its frames and lookahead.
    assert sum(1 for size in sizes if size == 2) <= MAX_UNREAD + LOOKAHEAD + 1, sizes
    go.set()
    np.testing.assert_array_equal(stalled.audio(), expected)


def test_a_session_between_sentences_holds_no_row(model: TTSModel, voices: list[VoiceState]) -> None:
    """A streamed reply waiting for its next sentence is not in the batch."""
    session = model.session(voices[0], REPLIES[0][1])
    assert list(session.speak("Hello there."))
    assert model.batcher.active_rows == 0
    frames = session.speak("How are you?")
    next(frames)
    assert model.batcher.active_rows == 1
    frames.close()
    assert model.batcher.active_rows == 0


def test_every_step_and_decode_runs_with_one_core_in_the_engine_threads(
        voice_recording: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every job runs in an engine thread with one core, whatever the model's thread count:
    a product's rounding may depend on its threads, and a reply's audio must not depend on
    which other replies run beside it."""
    threads_before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        model = build_demo_model()
    finally:
        torch.set_num_threads(threads_before)
    assert model.threads == 2
    voice = model.voice_from_recording(voice_recording)
    calls = observe_steps_and_decodes(model, monkeypatch,
                                      lambda kind: (kind, threading.current_thread().name, torch.get_num_threads()))
    frames = list(model.synthesize(TEXT, voice, GenerationOptions(seed=7, eos_threshold=NO_EOS)))
    steps = [call for call in calls if call[0] == "step"]
    decodes = [call for call in calls if call[0] == "decode"]
    assert len(steps) == len(frames) > 3
    assert set(steps) == {("step", "tts-engine", 1)}
    assert set(decodes) == {("decode", "tts-engine", 1)}


def test_the_engine_threads_end_with_their_model(voice_recording: Path) -> None:
    before = set(threading.enumerate())
    model = build_demo_model()
    voice = model.voice_from_recording(voice_recording)
    assert list(model.synthesize("Hello there.", voice))
    mine = [thread for thread in threading.enumerate() if thread.name == "tts-engine" and thread not in before]
    assert len(mine) == model.threads
    del model, voice
    gc.collect()
    for thread in mine:
        thread.join(timeout=WAIT_S)
        assert not thread.is_alive()
