"""VoiceLibrary with a fake model: caching, disk cache, bad voices, concurrency, pre-encoding."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pytest
import soundfile
from safetensors import SafetensorError
from safetensors.numpy import load_file, save_file

from wyoming_pocket_tts.engine import VoiceError
from wyoming_pocket_tts.voices import VoiceConfigError, VoiceLibrary, VoiceLibraryConfig

STATE_BYTES = 4000


@dataclass(frozen=True, eq=False)
class FakeState:
    model_id: str
    prompt_length: int
    payload: np.ndarray

    @property
    def nbytes(self) -> int:
        return int(self.payload.nbytes)


@dataclass
class FakeModel:
    """Counts calls; states are small arrays; save/load through safetensors like the engine."""

    model_id: str = "fake-model@rev1"
    precision: str = "float32"
    name: str = "fake"
    languages: list[str] = field(default_factory=lambda: ["en"])
    predefined_voices: tuple[str, ...] = ("alba", "marius")
    can_clone: bool = True
    sample_rate: int = 24000
    state_bytes: int = STATE_BYTES
    encode_delay: float = 0.0
    gate: threading.Event | None = None  # when set, encodings wait for it
    calls: Counter = field(default_factory=Counter)
    # The dominant frequency of each prompt encoded: which recording it was (see HZ).
    encoded_hz: list[int] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _count(self, what: str) -> None:
        with self._lock:
            self.calls[what] += 1

    def _state(self, seed: float, prompt_length: int) -> FakeState:
        return FakeState(self.model_id, prompt_length, np.full(self.state_bytes // 4, seed, dtype=np.float32))

    def voice_from_audio(self, audio: np.ndarray) -> FakeState:
        self._count("recording")
        spectrum = np.abs(np.fft.rfft(audio))
        with self._lock:
            self.encoded_hz.append(round(int(np.argmax(spectrum)) * self.sample_rate / audio.size))
        if self.gate is not None:
            assert self.gate.wait(10)
        time.sleep(self.encode_delay)
        if not self.can_clone:
            raise VoiceError("this model cannot clone voices")
        return self._state(float(np.abs(audio).sum()), int(len(audio) / self.sample_rate * 12.5))

    def voice_from_predefined(self, name: str) -> FakeState:
        self._count("predefined")
        if name not in self.predefined_voices:
            raise VoiceError(f"no predefined voice {name}")
        return self._state(float(len(name)), 50)

    def voice_from_file(self, path: Path) -> FakeState:
        self._count("file")
        try:
            tensors = load_file(str(path))
            with open(path, "rb") as stream:  # metadata lives in the header
                header_len = int.from_bytes(stream.read(8), "little")
                import json

                metadata = json.loads(stream.read(header_len))["__metadata__"]
        except (SafetensorError, OSError, ValueError, KeyError) as err:
            raise VoiceError(f"{path} is not a voice state: {err}") from None
        if metadata["model_id"] != self.model_id:
            raise VoiceError(f"{path} was made for model {metadata['model_id']}, not {self.model_id}")
        return FakeState(metadata["model_id"], int(metadata["prompt_length"]), tensors["payload"])

    def save_voice(self, state: FakeState, path: Path) -> None:
        self._count("save")
        save_file(
            {"payload": state.payload},
            str(path),
            metadata={"model_id": state.model_id, "prompt_length": str(state.prompt_length)},
        )


def write_recording(path: Path, seconds: float = 1.0, amplitude: float = 0.3, freq: float = 220.0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    t = np.arange(int(seconds * 24000)) / 24000
    soundfile.write(str(path), (amplitude * np.sin(2 * np.pi * freq * t)).astype(np.float32), 24000)
    return path


def make_library(model: FakeModel, tmp_path: Path, **kwargs) -> VoiceLibrary:
    kwargs.setdefault("voices_dir", tmp_path / "voices")
    return VoiceLibrary(model, VoiceLibraryConfig(data_dir=tmp_path / "data", **kwargs))


# The household's recordings, each a tone of its own: the fake model tells them apart by it.
HZ = {"dad": 200, "kid": 250, "mum": 300}


def encoded_names(model: FakeModel) -> list[str]:
    by_hz = {hz: name for name, hz in HZ.items()}
    return [by_hz[hz] for hz in model.encoded_hz]


@pytest.fixture
def household(tmp_path: Path) -> Path:
    """Three recordings in the voices directory."""
    for name, hz in HZ.items():
        write_recording(tmp_path / "voices" / f"{name}.wav", freq=hz)
    return tmp_path


# -- listing ---------------------------------------------------------------------------


def test_voices_listing(household: Path) -> None:
    lib = make_library(FakeModel(), household, default_voice="mum")
    infos = lib.voices
    assert [v.name for v in infos] == ["mum", "dad", "kid", "alba", "marius"]
    assert lib.default_name == "mum"
    assert infos[0].kind == "recording" and infos[0].languages == ("en",)
    assert infos[0].attribution_name is None
    alba = infos[3]
    assert alba.kind == "predefined" and alba.description == "Alba" and alba.attribution_name == "Kyutai"
    assert not FakeModel().calls  # building the library encodes nothing


def test_include_predefined_false(household: Path) -> None:
    lib = make_library(FakeModel(), household, include_predefined=False)
    assert [v.name for v in lib.voices] == ["dad", "kid", "mum"]


def test_no_voice_raises_config_error(tmp_path: Path) -> None:
    with pytest.raises(VoiceConfigError, match="no voice available"):
        make_library(FakeModel(predefined_voices=()), tmp_path)


# -- the in-memory cache -----------------------------------------------------------------


def test_get_default_and_hit_returns_same_object(household: Path) -> None:
    model = FakeModel()
    lib = make_library(model, household)
    name, first = lib.get(None)
    assert name == "alba"
    assert lib.get("alba")[1] is first
    assert lib.get(None)[1] is first
    assert model.calls["predefined"] == 1


def test_get_recording_miss_then_hit(household: Path) -> None:
    model = FakeModel()
    lib = make_library(model, household)
    name, state = lib.get("mum")
    assert name == "mum" and state.model_id == model.model_id
    assert lib.get("MUM") == ("mum", state)  # case-insensitive
    assert lib.get("mum")[1] is state
    assert model.calls["recording"] == 1 and model.calls["save"] == 1


def test_unknown_voice_gives_default_with_warning(household: Path, caplog: pytest.LogCaptureFixture) -> None:
    lib = make_library(FakeModel(), household, default_voice="dad")
    with caplog.at_level(logging.WARNING):
        assert lib.get("nobody")[0] == "dad"
    assert "unknown voice 'nobody'" in caplog.text


def test_eviction_order_and_pinned_default(household: Path) -> None:
    model = FakeModel()
    lib = make_library(model, household, default_voice="mum", cache_size=3)
    lib.get("mum")
    lib.get("dad")
    lib.get("kid")
    assert lib.cached_names() == ["mum", "dad", "kid"]
    lib.get("alba")  # evicts dad: mum is older but pinned
    assert lib.cached_names() == ["mum", "kid", "alba"]
    lib.get("marius")
    assert lib.cached_names() == ["mum", "alba", "marius"]
    recordings = model.calls["recording"]
    lib.get("mum")
    assert model.calls["recording"] == recordings  # never evicted, never encoded again
    lib.get("dad")  # evicted from memory: back from the disk cache, not encoded
    assert model.calls["recording"] == recordings
    assert lib.cached_names() == ["marius", "mum", "dad"]  # alba was least recent


def test_memory_bound(household: Path) -> None:
    model = FakeModel(state_bytes=400_000)  # 0.38 MB per voice
    lib = make_library(model, household, default_voice="mum", cache_mb=1.0)
    for name in ["mum", "dad", "kid", "alba", "marius"]:
        lib.get(name)
        assert lib.cached_bytes() <= 1024 * 1024
    assert lib.cached_names() == ["mum", "marius"]


def test_libraries_of_two_models_share_one_bound(household: Path) -> None:
    """--voice-cache-size bounds the server, not each model: the German model's voices push
    out the English model's least recently used ones, never either model's default."""
    from wyoming_pocket_tts.voices.memory import SharedVoiceCache

    shared = SharedVoiceCache(max_count=3)
    english_model, german_model = FakeModel(), FakeModel(model_id="german@rev1", name="german")
    config = VoiceLibraryConfig(data_dir=household / "data", voices_dir=household / "voices",
                                default_voice="mum", cache_size=3)  # fmt: skip
    english = VoiceLibrary(english_model, config, cache=shared.for_model("english"))
    german = VoiceLibrary(german_model, replace(config, default_voice="alba"), cache=shared.for_model("german"))
    english.get("mum")
    english.get("dad")
    german.get(None)
    assert shared.keys() == [("english", "mum"), ("english", "dad"), ("german", "alba")]
    german.get("kid")  # the German model's recording: dad, English, is the oldest unpinned
    assert english.cached_names() == ["mum"] and german.cached_names() == ["alba", "kid"]
    _, state = german.get("mum")  # the same recording, encoded by the German model
    assert state.model_id == "german@rev1"
    assert len(shared.keys()) == 3
    german.close()  # unloaded: its memory is given back, and its default is no longer pinned
    assert shared.keys() == [("english", "mum")]
    english.get("dad")
    english.get("kid")
    assert english.cached_names() == ["mum", "dad", "kid"]


def test_recording_changed_while_running_is_encoded_again(household: Path) -> None:
    model = FakeModel()
    lib = make_library(model, household)
    _, before = lib.get("mum")
    path = household / "voices" / "mum.wav"
    write_recording(path, seconds=1.5, freq=440)
    os.utime(path, ns=(time.time_ns() + 10**9, time.time_ns() + 10**9))  # a date surely different
    _, after = lib.get("mum")
    assert after is not before and after.prompt_length != before.prompt_length
    assert model.calls["recording"] == 2


# -- the disk cache ----------------------------------------------------------------------


def test_disk_cache_hit_after_restart(household: Path) -> None:
    first = FakeModel()
    lib = make_library(first, household)
    _, encoded = lib.get("mum")
    lib.close()
    assert first.calls["recording"] == 1 and first.calls["save"] == 1

    second = FakeModel()
    lib2 = make_library(second, household)
    _, loaded = lib2.get("mum")
    assert second.calls["recording"] == 0  # loaded, not encoded
    assert second.calls["file"] == 1
    np.testing.assert_array_equal(loaded.payload, encoded.payload)


def test_disk_cache_keyed_by_model(household: Path) -> None:
    make_library(FakeModel(), household).get("mum")
    other = FakeModel(model_id="other-model@rev2")
    make_library(other, household).get("mum")
    assert other.calls["recording"] == 1


def test_disk_cache_keyed_by_precision(household: Path) -> None:
    """int8 encodes a recording into a slightly other state than float32: a server whose
    precision changed (--quantize auto may choose either) encodes its recordings again."""
    make_library(FakeModel(), household).get("mum")
    quantized = FakeModel(precision="int8/fbgemm")
    make_library(quantized, household).get("mum")
    assert quantized.calls["recording"] == 1
    again = FakeModel()
    make_library(again, household).get("mum")
    assert again.calls["recording"] == 0  # float32's own entry is still there


def test_changed_recording_encoded_again_after_restart(household: Path) -> None:
    make_library(FakeModel(), household).get("mum")
    write_recording(household / "voices" / "mum.wav", seconds=2.0, freq=330)
    model = FakeModel()
    make_library(model, household).get("mum")
    assert model.calls["recording"] == 1


def test_corrupt_cache_file_is_ignored_and_rewritten(household: Path, caplog: pytest.LogCaptureFixture) -> None:
    make_library(FakeModel(), household).get("mum")
    cache_files = list((household / "data" / "voice_cache").glob("*.safetensors"))
    assert len(cache_files) == 1
    cache_files[0].write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json")

    model = FakeModel()
    with caplog.at_level(logging.WARNING):
        _, state = make_library(model, household).get("mum")
    assert "does not load" in caplog.text
    assert model.calls["recording"] == 1 and model.calls["save"] == 1
    # rewritten: a third start loads it
    third = FakeModel()
    make_library(third, household).get("mum")
    assert third.calls["recording"] == 0


def test_disk_cache_bound(household: Path) -> None:
    model = FakeModel(state_bytes=400_000)
    lib = make_library(model, household, disk_cache_mb=1.0)
    for name in ["dad", "kid", "mum"]:
        lib.get(name)
    files = list((household / "data" / "voice_cache").glob("*.safetensors"))
    assert len(files) == 2
    assert sum(f.stat().st_size for f in files) <= 1024 * 1024


def test_state_file_voice_is_loaded_directly(household: Path) -> None:
    model = FakeModel()
    path = household / "voices" / "narrator.safetensors"
    model.save_voice(model._state(7.0, 30), path)
    model.calls.clear()
    lib = make_library(model, household)
    _, state = lib.get("narrator")
    assert state.prompt_length == 30
    assert model.calls == Counter({"file": 1})


# -- bad voices ----------------------------------------------------------------------------


def test_silent_recording_is_an_error_not_another_voice(household: Path, caplog: pytest.LogCaptureFixture) -> None:
    silent = write_recording(household / "voices" / "ghost.wav", amplitude=0.0)
    model = FakeModel()
    lib = make_library(model, household, default_voice="dad")
    with caplog.at_level(logging.WARNING), pytest.raises(VoiceError, match="silent") as failure:
        lib.get("ghost")
    assert "'ghost'" in str(failure.value) and str(silent) in str(failure.value)
    assert model.calls["recording"] == 0  # the silent file never reached the engine
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "'ghost'" in errors[0] and str(silent) in errors[0] and "silent" in errors[0]
    assert "ghost" not in [v.name for v in lib.voices]
    caplog.clear()
    with caplog.at_level(logging.WARNING), pytest.raises(VoiceError, match="silent"):
        lib.get("ghost")  # remembered: no second attempt, no second ERROR
    assert not [r for r in caplog.records if r.levelno == logging.ERROR]
    assert lib.get(None)[0] == "dad"  # the others still work


def test_failed_voice_retried_when_its_file_changes(household: Path) -> None:
    path = write_recording(household / "voices" / "ghost.wav", amplitude=0.0)
    lib = make_library(FakeModel(), household, default_voice="dad")
    with pytest.raises(VoiceError):
        lib.get("ghost")
    write_recording(path, amplitude=0.5, seconds=1.2)
    assert lib.get("ghost")[0] == "ghost"
    assert "ghost" in [v.name for v in lib.voices]


def test_encoding_state_says_how_far_each_voice_is(household: Path) -> None:
    """What the voices page shows: in memory, being encoded, failed (and why), or not yet."""
    write_recording(household / "voices" / "ghost.wav", amplitude=0.0)
    model = FakeModel(gate=threading.Event())
    lib = make_library(model, household, default_voice="mum")
    assert lib.encoding_state("dad") == ("pending", None)
    with ThreadPoolExecutor(1) as pool:
        started = pool.submit(lib.get, "dad")
        deadline = time.monotonic() + 10
        while lib.encoding_state("dad")[0] != "encoding":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        model.gate.set()
        started.result(10)
    assert lib.encoding_state("dad") == ("ready", None)
    with pytest.raises(VoiceError):
        lib.get("ghost")
    state, why = lib.encoding_state("ghost")
    assert state == "failed" and "silent" in str(why)


def test_state_for_another_model(household: Path, caplog: pytest.LogCaptureFixture) -> None:
    foreign = household / "voices" / "foreign.safetensors"
    other = FakeModel(model_id="another@rev9")
    other.save_voice(other._state(1.0, 10), foreign)
    lib = make_library(FakeModel(), household, default_voice="mum")
    with pytest.raises(VoiceError) as failure:
        lib.get("foreign")
    assert "'foreign'" in str(failure.value) and str(foreign) in str(failure.value)
    assert "made for model another@rev9" in str(failure.value)
    assert lib.get("dad")[0] == "dad"  # the others still work


def test_engine_rejects_recording(household: Path, caplog: pytest.LogCaptureFixture) -> None:
    model = FakeModel(can_clone=False)
    with caplog.at_level(logging.WARNING):
        lib = make_library(model, household)
    assert "cannot clone voices" in caplog.text
    with pytest.raises(VoiceError):
        lib.get("mum")
    assert lib.get(None)[0] == "alba"


def test_failed_default_is_replaced_by_next_voice(household: Path, caplog: pytest.LogCaptureFixture) -> None:
    write_recording(household / "voices" / "aaa_silent.wav", amplitude=0.0)
    lib = make_library(FakeModel(predefined_voices=()), household, default_voice="aaa_silent")
    with caplog.at_level(logging.WARNING):
        assert lib.get(None)[0] == "dad"
    assert "default voice 'aaa_silent' is unavailable" in caplog.text
    assert lib.default_name == "dad"
    assert [v.name for v in lib.voices][0] == "dad"
    assert lib.get("aaa_silent")[0] == "dad"  # the default's name: the stand-in


def test_no_voice_can_be_made(tmp_path: Path) -> None:
    write_recording(tmp_path / "voices" / "a.wav", amplitude=0.0)
    write_recording(tmp_path / "voices" / "b.wav", amplitude=0.0)
    lib = make_library(FakeModel(predefined_voices=()), tmp_path)
    with pytest.raises(VoiceError, match="no voice can be made.*silent"):
        lib.get(None)


def test_unexpected_error_is_not_remembered(household: Path) -> None:
    model = FakeModel()
    lib = make_library(model, household)
    original = model.voice_from_audio
    model.voice_from_audio = lambda audio: (_ for _ in ()).throw(MemoryError("boom"))  # type: ignore[method-assign]
    with pytest.raises(MemoryError):
        lib.get("mum")
    model.voice_from_audio = original  # type: ignore[method-assign]
    assert lib.get("mum")[0] == "mum"


# -- concurrency and pre-encoding --------------------------------------------------------------


def test_concurrent_gets_encode_once(household: Path) -> None:
    model = FakeModel(gate=threading.Event())
    lib = make_library(model, household)
    with ThreadPoolExecutor(max_workers=8) as pool:
        futures = [pool.submit(lib.get, "mum") for _ in range(8)]
        time.sleep(0.1)  # let every thread reach the wait
        model.gate.set()
        results = [f.result(timeout=10) for f in futures]
    assert model.calls["recording"] == 1
    assert all(state is results[0][1] for _, state in results)


def test_concurrent_gets_of_a_failing_voice_fail_once(household: Path) -> None:
    write_recording(household / "voices" / "ghost.wav", amplitude=0.0)
    model = FakeModel()
    lib = make_library(model, household, default_voice="dad")
    def outcome(_: int) -> str:
        try:
            return lib.get("ghost")[0]
        except VoiceError as err:
            return "error: silent" if "silent" in str(err) else f"error: {err}"

    with ThreadPoolExecutor(max_workers=8) as pool:
        outcomes = list(pool.map(outcome, range(8)))
    assert outcomes == ["error: silent"] * 8
    assert model.calls["recording"] == 0  # checked once, never sent to the engine


def test_mixed_concurrent_load(household: Path) -> None:
    model = FakeModel(encode_delay=0.01)
    lib = make_library(model, household, cache_size=2)
    wanted = ["mum", "dad", "kid", "alba", "marius", None] * 10
    with ThreadPoolExecutor(max_workers=6) as pool:
        got = list(pool.map(lib.get, wanted))
    assert [name for name, _ in got] == [w or "alba" for w in wanted]
    assert len(lib.cached_names()) <= 2 and "alba" in lib.cached_names()


def test_preencoding_default_first_then_declared(household: Path) -> None:
    model = FakeModel()
    lib = make_library(model, household, default_voice="kid")
    lib.start_preencoding()
    assert lib.wait_preencoding(10)
    assert encoded_names(model) == ["kid", "dad", "mum"]
    assert model.calls["predefined"] == 0  # predefined voices not declared: not fetched
    assert sorted(lib.cached_names()) == ["dad", "kid", "mum"]
    model.calls.clear()
    lib.get("mum")
    assert not model.calls


def test_get_waits_for_preencoding_in_progress(household: Path) -> None:
    model = FakeModel(gate=threading.Event())
    lib = make_library(model, household, default_voice="mum")
    lib.start_preencoding()
    deadline = time.monotonic() + 5
    while model.calls["recording"] == 0 and time.monotonic() < deadline:
        time.sleep(0.005)
    result: list = []
    waiter = threading.Thread(target=lambda: result.append(lib.get("mum")))
    waiter.start()
    time.sleep(0.05)
    assert waiter.is_alive()  # waiting for the background encoding
    model.gate.set()
    waiter.join(5)
    assert lib.wait_preencoding(10)
    assert result[0][0] == "mum"
    assert encoded_names(model).count("mum") == 1


def test_preencoding_never_evicts_and_fills_disk_when_memory_full(household: Path) -> None:
    model = FakeModel()
    lib = make_library(model, household, default_voice="alba", cache_size=2)
    lib.start_preencoding()
    assert lib.wait_preencoding(10)
    assert lib.cached_names() == ["alba", "dad"]
    # kid and mum did not fit in memory but were encoded to disk for later
    assert model.calls["recording"] == 3
    assert len(list((household / "data" / "voice_cache").glob("*.safetensors"))) == 3
    lib.get("kid")
    assert model.calls["recording"] == 3


def test_preencoding_skips_voices_already_on_disk_when_memory_full(household: Path) -> None:
    make_library(FakeModel(), household).get("mum")
    model = FakeModel()
    lib = make_library(model, household, default_voice="alba", cache_size=2)
    lib.start_preencoding()
    assert lib.wait_preencoding(10)
    assert model.calls["file"] == 0  # mum is on disk: nothing to do while memory is full
    assert lib.cached_names() == ["alba", "dad"]


def test_preencoding_marks_bad_voices_and_continues(household: Path) -> None:
    write_recording(household / "voices" / "a_ghost.wav", amplitude=0.0)
    lib = make_library(FakeModel(), household, include_predefined=False, default_voice="mum")
    lib.start_preencoding()
    assert lib.wait_preencoding(10)
    assert [v.name for v in lib.voices] == ["mum", "dad", "kid"]


def test_close_stops_preencoding(household: Path) -> None:
    model = FakeModel(encode_delay=0.1)
    lib = make_library(model, household, default_voice="mum")
    lib.start_preencoding()
    deadline = time.monotonic() + 5
    while model.calls["recording"] == 0 and time.monotonic() < deadline:
        time.sleep(0.005)
    lib.close()  # during the first encoding: it ends, the others never start
    assert lib.wait_preencoding(0)
    assert model.calls["recording"] == 1


def test_request_waiting_on_preencoding_keeps_its_voice_in_memory(household: Path) -> None:
    model = FakeModel()
    lib = make_library(model, household, default_voice="alba", cache_size=2)
    lib.get("alba")
    lib.get("dad")  # memory is now full: pre-encoding will only fill the disk
    model.gate = threading.Event()
    lib.start_preencoding()  # alba, dad cached; kid is next
    deadline = time.monotonic() + 5
    while model.calls["recording"] < 2 and time.monotonic() < deadline:
        time.sleep(0.005)
    result: list = []
    waiter = threading.Thread(target=lambda: result.append(lib.get("kid")))
    waiter.start()
    time.sleep(0.05)
    model.gate.set()
    waiter.join(5)
    assert lib.wait_preencoding(10)
    assert result[0][0] == "kid"
    assert lib.cached_names() == ["alba", "kid"]  # the request evicted dad, as any request would
    assert encoded_names(model) == ["dad", "kid", "mum"]


# -- re-reading the voices file and folder ----------------------------------------------


def test_refresh_adds_a_new_recording_and_encodes_it_in_the_background(household: Path) -> None:
    model = FakeModel()
    lib = make_library(model, household, default_voice="dad")
    assert lib.refresh() is False  # nothing changed
    write_recording(household / "voices" / "aunt.wav", freq=330)
    assert lib.refresh() is True
    assert "aunt" in [v.name for v in lib.voices]
    assert lib.wait_preencoding(10)
    assert "aunt" in lib.cached_names() and model.calls["recording"] == 1
    assert lib.get("aunt")[0] == "aunt" and model.calls["recording"] == 1
    assert lib.refresh() is False


def test_refresh_reads_nothing_while_the_files_are_unchanged(household: Path, monkeypatch) -> None:
    from wyoming_pocket_tts.voices import library

    lib = make_library(FakeModel(), household)
    builds = []
    real_build = library.build_catalog
    monkeypatch.setattr(library, "build_catalog", lambda *a: builds.append(a) or real_build(*a))
    for _ in range(5):
        lib.refresh()
    assert builds == []
    os.utime(household / "voices" / "kid.wav", ns=(1, 1))  # touched: read again
    lib.refresh()
    assert len(builds) == 1


def test_refresh_drops_a_removed_voice(household: Path, caplog: pytest.LogCaptureFixture) -> None:
    lib = make_library(FakeModel(), household, default_voice="dad")
    lib.get("kid")
    (household / "voices" / "kid.wav").unlink()
    assert lib.refresh() is True
    assert "kid" not in [v.name for v in lib.voices]
    assert "kid" not in lib.cached_names()
    with caplog.at_level(logging.WARNING):
        assert lib.get("kid")[0] == "dad"
    assert "unknown voice 'kid'" in caplog.text


def test_refresh_keeps_the_old_list_when_the_voices_file_breaks(household: Path, caplog) -> None:
    voices_file = household / "voices.yaml"
    voices_file.write_text("voices:\n  - name: grandpa\n    audio: voices/dad.wav\n")
    lib = make_library(FakeModel(), household, voices_file=voices_file)
    assert "grandpa" in [v.name for v in lib.voices]
    voices_file.write_text("voices: [unclosed\n")
    with caplog.at_level(logging.ERROR):
        assert lib.refresh() is False
    assert "keeping the previous voices" in caplog.text and "not valid YAML" in caplog.text
    assert "grandpa" in [v.name for v in lib.voices]
    caplog.clear()
    with caplog.at_level(logging.ERROR):
        lib.refresh()  # the same broken file: not reported again
    assert not caplog.records


def test_recording_deleted_while_in_memory_is_still_served(household: Path) -> None:
    model = FakeModel()
    lib = make_library(model, household)
    _, state = lib.get("kid")
    (household / "voices" / "kid.wav").unlink()
    assert lib.get("kid") == ("kid", state)  # no refresh yet: the encoded voice stays
    assert model.calls["recording"] == 1


def test_recording_deleted_before_it_was_encoded_is_a_clear_error(household: Path) -> None:
    lib = make_library(FakeModel(), household)
    (household / "voices" / "kid.wav").unlink()
    with pytest.raises(VoiceError, match="'kid'.*kid.wav not found"):
        lib.get("kid")


def test_unknown_long_voice_name_is_logged_truncated(household: Path, caplog) -> None:
    lib = make_library(FakeModel(), household)
    with caplog.at_level(logging.WARNING):
        assert lib.get("x" * 5000)[0] == "alba"
    (message,) = [r.getMessage() for r in caplog.records if "unknown voice" in r.getMessage()]
    assert "xxx..." in message and len(message) < 200


def test_languages_given_to_the_library_are_the_voices_languages(household: Path) -> None:
    lib = VoiceLibrary(FakeModel(), VoiceLibraryConfig(data_dir=household / "data", voices_dir=household / "voices"),
                       languages=("de",))
    assert {tuple(v.languages) for v in lib.voices} == {("de",)}
