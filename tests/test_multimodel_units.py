"""Several models in one server (issue 16), without torch: the command line, the add-on's
model list, which voices-file entries belong to which model, the name rule, and the pool's
least-recently-used residency on fake models."""

from __future__ import annotations

import asyncio
import logging
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from server_fixtures import FakeModel, FakeVoices
from wyoming_pocket_tts.__main__ import UsageError, build_parser, config_from_args
from wyoming_pocket_tts.core import GenerationOptions, VoiceInfo
from wyoming_pocket_tts.server.models import ModelBusy, ModelEntry, ModelPool, advertise, model_label
from wyoming_pocket_tts.server.scheduler import SynthesisScheduler
from wyoming_pocket_tts.server.service import Backend, TtsService
from wyoming_pocket_tts.voices.catalog import build_catalog
from wyoming_pocket_tts.voices.config import ModelScope, VoiceLibraryConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "addon"))
import addon_options  # noqa: E402


def parse(*args: str):
    return config_from_args(build_parser().parse_args(list(args)))


def test_model_given_several_times_first_is_the_default_voices(tmp_path: Path) -> None:
    config = parse("--model", "english", "--model", "german", "--data-dir", str(tmp_path))
    assert config.model == "english" and config.models == ("english", "german")
    assert config.max_loaded_models == 2
    assert parse("--data-dir", str(tmp_path)).models == ("english",)


def test_the_same_model_twice_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--model german is given twice"):
        parse("--model", "german", "--model", "german", "--data-dir", str(tmp_path))


def test_language_applies_only_to_custom_configs_when_several(tmp_path: Path) -> None:
    custom = tmp_path / "mine.yaml"
    custom.write_text("{}\n")
    config = parse("--model", "german", "--model", str(custom), "--language", "nl", "--data-dir", str(tmp_path))
    assert [facts.languages for facts in config.facts()] == [("de",), ("nl",)]
    alone = parse("--model", "german", "--language", "nl", "--data-dir", str(tmp_path))
    assert [facts.languages for facts in alone.facts()] == [("nl",)]  # as before: one model


def test_addon_model_list_becomes_more_model_flags() -> None:
    layout = addon_options.Layout(python="python3")
    options = addon_options.normalize_options({"model": "english", "more_models": ["german", " french "]})
    argv = addon_options.build_command(options, layout).argv
    assert argv[argv.index("--model"):][:6] == ["--model", "english", "--model", "german", "--model", "french"]
    # An add-on configuration from before the list keeps its single model.
    old = addon_options.build_command(addon_options.normalize_options({"model": "german"}), layout).argv
    assert old.count("--model") == 1
    with pytest.raises(addon_options.OptionsError, match="more_models"):
        addon_options.normalize_options({"more_models": "german"})


def test_voices_file_entries_go_to_the_model_they_name(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    voices_file = tmp_path / "voices.yaml"
    voices_file.write_text(yaml.safe_dump({"default": "marius", "voices": [
        {"name": "marius"},
        {"name": "juergen", "model": "german", "temperature": 0.5},
        {"name": "estelle", "model": "klingon"},
    ]}))  # fmt: skip
    base = VoiceLibraryConfig(tmp_path, voices_file=voices_file, voices_dir=tmp_path / "none")
    english = ModelScope(frozenset({"english"}), first=True, others=frozenset({"german"}))
    german = ModelScope(frozenset({"german"}), first=False, others=frozenset({"english"}))
    with caplog.at_level(logging.ERROR):
        first = build_catalog(VoiceLibraryConfig(**{**vars(base), "scope": english}), ("alba", "marius"), "english")
    second = build_catalog(VoiceLibraryConfig(**{**vars(base), "scope": german}), ("juergen",), "german")
    assert first.default == "marius" and [spec.name for spec in first.voices] == ["marius", "alba"]
    assert "names model 'klingon', which this server does not serve" in caplog.text
    # The file's default is the first model's; the other model has its own first voice.
    assert second.default == "juergen" and [spec.name for spec in second.voices] == ["juergen"]
    assert second.voices[0].settings == {"temperature": 0.5}


def entry(name: str, voices: tuple[str, ...], languages: tuple[str, ...] = ("en",)) -> ModelEntry:
    listed = tuple(VoiceInfo(voice, voice, languages) for voice in voices)
    return ModelEntry(name, languages, lambda: None, previewed=listed)  # type: ignore[arg-type,return-value]


def test_a_later_models_voice_with_a_taken_name_gets_its_models_label() -> None:
    english = entry("english", ("alba", "Juergen"))
    german = entry("/share/pocket/german_24l.yaml", ("juergen", "oma"), ("de",))
    voices, routes = advertise([english, german])
    assert [(voice.name, voice.languages) for voice in voices] == [
        ("alba", ("en",)), ("Juergen", ("en",)), ("juergen (german_24l)", ("de",)), ("oma", ("de",)),
    ]  # fmt: skip
    assert routes["juergen (german_24l)"].entry is german and routes["juergen (german_24l)"].voice == "juergen"
    # What Home Assistant's voice picker shows (the description) carries the label too.
    assert [voice.description for voice in voices] == ["alba", "Juergen", "juergen (german_24l)", "oma"]
    assert routes["juergen"].entry is english
    assert model_label("hf://kyutai/tts/languages/german/config.yaml@main") == "config"


def fake_entry(name: str, voices: tuple[str, ...], loads: list[str]) -> ModelEntry:
    def load() -> Backend:
        loads.append(name)
        return Backend(FakeModel(), FakeVoices(voices), GenerationOptions())

    return ModelEntry(name, ("en",), load, previewed=tuple(VoiceInfo(v, v, ("en",)) for v in voices))


def test_pool_unloads_the_least_recently_used_idle_model_never_one_in_use() -> None:
    async def scenario() -> None:
        loads: list[str] = []
        entries = [fake_entry(name, (f"{name}-voice",), loads) for name in ("a", "b", "c")]
        pool = ModelPool(entries, max_loaded=2)
        a, b, c = entries
        await pool.acquire(a)
        backend_b = await pool.acquire(b)
        pool.release(a)
        # c needs room: b is in use, so a (idle) goes, although b was loaded later.
        await pool.acquire(c)
        assert (a.backend, b.backend is backend_b, c.backend is not None) == (None, True, True)
        assert isinstance(b.backend.voices, FakeVoices) and not b.backend.voices.closed
        # Both resident models in use: a request for a waits until one is released.
        waiting = asyncio.ensure_future(pool.acquire(a))
        await asyncio.sleep(0.1)
        assert not waiting.done() and pool.route("a-voice").entry is a  # still advertised
        pool.release(c)
        await asyncio.wait_for(waiting, 5)
        assert c.backend is None and b.backend is backend_b
        assert loads == ["a", "b", "c", "a"]
        assert len(pool.loaded()) == 2

    asyncio.run(scenario())


def test_concurrent_requests_for_one_unloaded_model_load_it_once() -> None:
    async def scenario() -> None:
        loads: list[str] = []
        entries = [fake_entry(name, (name,), loads) for name in ("a", "b")]
        pool = ModelPool(entries, max_loaded=1)
        backends = await asyncio.gather(*(pool.acquire(entries[1]) for _ in range(3)))
        assert loads == ["b"] and all(backend is backends[0] for backend in backends)
        assert entries[1].users == 3

    asyncio.run(scenario())


def test_requests_for_another_models_voice_do_not_reload_the_default_model() -> None:
    """With one model resident, two requests in a row for the second model's voice load it
    once: the first load of the default model is awaited, the default model is not brought
    back (it was: loaded again and unloaded at once, at every such request)."""

    async def scenario() -> list[str]:
        loads: list[str] = []
        default = fake_entry("a", ("a-voice",), loads)
        service = TtsService(
            model_name="a", loader=default.loader, scheduler=SynthesisScheduler(1),
            synth_executor=ThreadPoolExecutor(1), voice_executor=ThreadPoolExecutor(1),
            more_models=[fake_entry("b", ("b-voice",), loads)], max_loaded_models=1,
        )  # fmt: skip
        await asyncio.wait_for(service.start(), 10)
        for name in ("b-voice", "b-voice", "a-voice"):
            backend, resolved, _ = await service.acquire_voice(name)
            assert resolved == name and service.pool.entry_of(backend).name == name[0]
            service.release(backend)
        return loads

    assert asyncio.run(scenario()) == ["a", "b", "a"]


def test_a_model_kept_busy_gives_a_busy_error_within_the_wait() -> None:
    """With one model resident and in use for long (a streamed reply left open), a request
    for another model's voice is told the server is busy within the pool's wait, and its
    place in the count is given back; once the first model is free, the other one loads."""

    async def scenario() -> None:
        loads: list[str] = []
        entries = [fake_entry(name, (name,), loads) for name in ("a", "b")]
        pool = ModelPool(entries, max_loaded=1, room_wait=0.2)
        await pool.acquire(entries[0])  # held, as by an open stream
        with pytest.raises(ModelBusy, match="model b cannot be loaded now: at most 1 loaded, and a kept speaking"):
            await asyncio.wait_for(pool.acquire(entries[1]), 5)
        assert entries[1].users == 0 and loads == ["a"]
        pool.release(entries[0])
        assert await asyncio.wait_for(pool.acquire(entries[1]), 5) is entries[1].backend
        assert loads == ["a", "b"]

    asyncio.run(scenario())
