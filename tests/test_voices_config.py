"""Voices file parsing, voices directory scanning and the catalog's checks (no model needed)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import soundfile

from wyoming_pocket_tts.voices.catalog import build_catalog
from wyoming_pocket_tts.voices.config import (
    VoiceConfigError,
    VoiceLibraryConfig,
    parse_voices_file,
    scan_voices_dir,
)

PREDEFINED = ("alba", "marius", "javert")


def write_recording(path: Path, seconds: float = 1.0, amplitude: float = 0.3, rate: int = 24000) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    t = np.arange(int(seconds * rate)) / rate
    soundfile.write(str(path), (amplitude * np.sin(2 * np.pi * 220 * t)).astype(np.float32), rate)
    return path


def write_state(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"not checked before encoding")
    return path


def config_for(tmp_path: Path, **kwargs) -> VoiceLibraryConfig:
    return VoiceLibraryConfig(data_dir=tmp_path / "data", **kwargs)


def issue_example(tmp_path: Path) -> Path:
    write_recording(tmp_path / "voices" / "mum.wav")
    write_state(tmp_path / "voices" / "narrator.safetensors")
    path = tmp_path / "voices.yaml"
    path.write_text(
        """
default: mum
voices:
  - name: alba                       # a predefined Kyutai voice of the loaded model
  - name: mum
    audio: voices/mum.wav            # cloned from a recording (relative to this file)
    description: Mum
  - name: narrator
    state: voices/narrator.safetensors   # an exported voice state
"""
    )
    return path


# -- the voices file ------------------------------------------------------------------------


def test_parse_issue_example(tmp_path: Path) -> None:
    parsed = parse_voices_file(issue_example(tmp_path))
    assert parsed.default == "mum"
    assert [(v.name, v.kind) for v in parsed.voices] == [
        ("alba", "predefined"),
        ("mum", "recording"),
        ("narrator", "state"),
    ]
    assert parsed.voices[1].path == tmp_path / "voices" / "mum.wav"  # relative to the file
    assert parsed.voices[1].description == "Mum"
    assert parsed.voices[2].path == tmp_path / "voices" / "narrator.safetensors"


def test_parse_bare_name_and_absolute_path(tmp_path: Path) -> None:
    rec = write_recording(tmp_path / "elsewhere" / "x.flac")
    path = tmp_path / "v.yaml"
    path.write_text(f"voices:\n  - alba\n  - name: x\n    audio: {rec}\n")
    parsed = parse_voices_file(path)
    assert [(v.name, v.kind, v.path) for v in parsed.voices] == [("alba", "predefined", None), ("x", "recording", rec)]
    assert parsed.default is None


def test_parse_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "v.yaml"
    path.write_text("")
    assert parse_voices_file(path).voices == []


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("voices: [\n  - name: a\n", "not valid YAML at line"),
        ("- name: a\n", "expected a mapping"),
        ("default: a\nvoice:\n  - name: a\n", "unknown key(s) voice"),
        ("voices:\n  name: a\n", "'voices' must be a list"),
        ("default: [a]\n", "'default' must be a voice name"),
    ],
)
def test_malformed_voices_file_raises(tmp_path: Path, text: str, fragment: str) -> None:
    path = tmp_path / "v.yaml"
    path.write_text(text)
    with pytest.raises(VoiceConfigError) as caught:
        parse_voices_file(path)
    assert fragment in str(caught.value)
    assert str(path) in str(caught.value)


def test_missing_voices_file_raises(tmp_path: Path) -> None:
    with pytest.raises(VoiceConfigError, match="not found"):
        parse_voices_file(tmp_path / "nope.yaml")


@pytest.mark.parametrize(
    ("entry", "fragment"),
    [
        ("- 42", "entry 2 is not a mapping"),
        ("- description: no name", "entry 2 has no valid 'name'"),
        ("- name: bad\n    adio: voices/mum.wav", "voice 'bad' has unknown key(s) adio"),
        ("- name: bad\n    audio: a.wav\n    state: a.safetensors", "voice 'bad' has both"),
        ("- name: bad\n    audio: voices/mum.txt", "is not a recording file"),
        ("- name: bad\n    state: voices/mum.wav", "is not a voice state file"),
    ],
)
def test_bad_entry_is_skipped_with_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, entry: str, fragment: str
) -> None:
    path = tmp_path / "v.yaml"
    path.write_text(f"voices:\n  - name: good\n  {entry}\n  - name: after\n")
    with caplog.at_level(logging.ERROR):
        parsed = parse_voices_file(path)
    assert [v.name for v in parsed.voices] == ["good", "after"]
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1
    assert fragment in errors[0] and str(path) in errors[0]


# -- the voices directory ---------------------------------------------------------------------


def test_scan_voices_dir(tmp_path: Path) -> None:
    d = tmp_path / "voices"
    write_recording(d / "Bob.wav")
    write_recording(d / "anna.flac")
    write_state(d / "carl.safetensors")
    (d / "notes.txt").write_text("x")
    write_recording(d / ".hidden.wav")
    (d / "sub.wav").mkdir()
    specs = scan_voices_dir(d)
    assert [(s.name, s.kind) for s in specs] == [("anna", "recording"), ("Bob", "recording"), ("carl", "state")]


def test_scan_missing_dir_is_empty(tmp_path: Path) -> None:
    assert scan_voices_dir(tmp_path / "nope") == []


# -- the catalog ----------------------------------------------------------------------------


def test_catalog_issue_example(tmp_path: Path) -> None:
    cat = build_catalog(config_for(tmp_path, voices_file=issue_example(tmp_path)), PREDEFINED, "m")
    assert cat.default == "mum"
    names = [v.name for v in cat.voices]
    # default first, then the declared voices, then the rest of the model's predefined ones
    assert names == ["mum", "alba", "narrator", "marius", "javert"]
    assert [v.declared for v in cat.voices] == [True, True, True, False, False]


def test_voices_dir_defaults_to_data_dir(tmp_path: Path) -> None:
    write_recording(tmp_path / "data" / "voices" / "dad.wav")
    cat = build_catalog(config_for(tmp_path, include_predefined=False), PREDEFINED, "m")
    assert [v.name for v in cat.voices] == ["dad"]


def test_file_pointing_into_voices_dir_is_one_voice(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = issue_example(tmp_path)
    with caplog.at_level(logging.ERROR):
        cat = build_catalog(
            config_for(tmp_path, voices_file=path, voices_dir=tmp_path / "voices", include_predefined=False),
            PREDEFINED,
            "m",
        )
    assert [v.name for v in cat.voices] == ["mum", "alba", "narrator"]
    assert cat.voices[0].description == "Mum"  # the file's entry is the one kept
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_duplicate_name_keeps_first(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    write_recording(tmp_path / "a" / "mum.wav")
    write_recording(tmp_path / "voices" / "Mum.wav")
    path = tmp_path / "v.yaml"
    path.write_text("voices:\n  - name: mum\n    audio: a/mum.wav\n  - name: mum\n    state: x.safetensors\n")
    write_state(tmp_path / "x.safetensors")
    with caplog.at_level(logging.ERROR):
        cat = build_catalog(
            config_for(tmp_path, voices_file=path, voices_dir=tmp_path / "voices"), PREDEFINED, "m"
        )
    mums = [v for v in cat.voices if v.name.lower() == "mum"]
    assert len(mums) == 1 and mums[0].path == tmp_path / "a" / "mum.wav"
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 2
    assert all("duplicate voice name" in e for e in errors)
    assert "x.safetensors" in errors[0] and "Mum.wav" in errors[1]


def test_user_voice_shadows_predefined_name(tmp_path: Path) -> None:
    write_recording(tmp_path / "voices" / "alba.wav")
    cat = build_catalog(config_for(tmp_path, voices_dir=tmp_path / "voices"), PREDEFINED, "m")
    albas = [v for v in cat.voices if v.name == "alba"]
    assert len(albas) == 1 and albas[0].kind == "recording"


def test_automatic_default_first_predefined(tmp_path: Path) -> None:
    write_recording(tmp_path / "voices" / "dad.wav")
    cat = build_catalog(config_for(tmp_path, voices_dir=tmp_path / "voices"), PREDEFINED, "m")
    assert cat.default == "alba"
    assert [v.name for v in cat.voices] == ["alba", "dad", "marius", "javert"]


def test_automatic_default_first_declared_without_predefined(tmp_path: Path) -> None:
    write_recording(tmp_path / "voices" / "dad.wav")
    write_recording(tmp_path / "voices" / "bea.wav")
    cat = build_catalog(config_for(tmp_path, voices_dir=tmp_path / "voices"), (), "demo")
    assert cat.default == "bea"
    cat = build_catalog(
        config_for(tmp_path, voices_dir=tmp_path / "voices", include_predefined=False), PREDEFINED, "m"
    )
    assert cat.default == "bea"
    assert [v.name for v in cat.voices] == ["bea", "dad"]


def test_no_voice_at_all_raises(tmp_path: Path) -> None:
    with pytest.raises(VoiceConfigError, match="no voice available: model demo has no predefined voices"):
        build_catalog(config_for(tmp_path), (), "demo")
    with pytest.raises(VoiceConfigError, match="turned off"):
        build_catalog(config_for(tmp_path, include_predefined=False), PREDEFINED, "m")


def test_default_voice_by_name_overrides_file(tmp_path: Path) -> None:
    cat = build_catalog(
        config_for(tmp_path, voices_file=issue_example(tmp_path), default_voice="narrator"), PREDEFINED, "m"
    )
    assert cat.default == "narrator" and cat.voices[0].name == "narrator"


def test_default_voice_case_insensitive(tmp_path: Path) -> None:
    cat = build_catalog(config_for(tmp_path, default_voice="MARIUS"), PREDEFINED, "m")
    assert cat.default == "marius"


def test_default_predefined_offered_even_when_predefined_off(tmp_path: Path) -> None:
    cat = build_catalog(config_for(tmp_path, default_voice="javert", include_predefined=False), PREDEFINED, "m")
    assert [v.name for v in cat.voices] == ["javert"]


def test_default_voice_as_path(tmp_path: Path) -> None:
    rec = write_recording(tmp_path / "somewhere" / "granny.ogg")
    cat = build_catalog(config_for(tmp_path, default_voice=str(rec)), PREDEFINED, "m")
    assert cat.default == "granny"
    assert cat.voices[0].path == rec and cat.voices[0].kind == "recording"
    assert [v.name for v in cat.voices][1:] == list(PREDEFINED)


def test_default_voice_path_of_declared_voice_uses_its_name(tmp_path: Path) -> None:
    path = issue_example(tmp_path)
    cat = build_catalog(
        config_for(tmp_path, voices_file=path, default_voice=str(tmp_path / "voices" / "narrator.safetensors")),
        PREDEFINED,
        "m",
    )
    assert cat.default == "narrator"


def test_default_voice_path_wins_duplicate_name(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    write_recording(tmp_path / "voices" / "mum.wav")
    other = write_recording(tmp_path / "other" / "mum.wav")
    with caplog.at_level(logging.ERROR):
        cat = build_catalog(
            config_for(tmp_path, voices_dir=tmp_path / "voices", default_voice=str(other)), PREDEFINED, "m"
        )
    assert cat.default == "mum" and cat.voices[0].path == other
    assert len([v for v in cat.voices if v.name == "mum"]) == 1
    assert "duplicate voice name 'mum'" in caplog.text


@pytest.mark.parametrize("wanted", ["nobody", "missing.wav"])
def test_bad_default_falls_back_to_automatic(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, wanted: str
) -> None:
    with caplog.at_level(logging.ERROR):
        cat = build_catalog(config_for(tmp_path, default_voice=str(tmp_path / wanted) if "." in wanted else wanted),
                            PREDEFINED, "m")
    assert cat.default == "alba"
    assert wanted in caplog.text


def test_unknown_predefined_entry_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "v.yaml"
    path.write_text("voices:\n  - name: zorro\n  - name: alba\n")
    with caplog.at_level(logging.ERROR):
        cat = build_catalog(config_for(tmp_path, voices_file=path, include_predefined=False), PREDEFINED, "m")
    assert [v.name for v in cat.voices] == ["alba"]
    assert "'zorro' is not a predefined voice of model m" in caplog.text and str(path) in caplog.text


@pytest.mark.parametrize("problem", ["missing", "short", "unreadable", "empty", "missing_state"])
def test_bad_file_voice_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture, problem: str) -> None:
    voices = tmp_path / "voices"
    write_recording(voices / "good.wav")
    if problem == "short":
        bad = write_recording(voices / "bad.wav", seconds=0.4)
        fragment = "lasts 0.40 s"
    elif problem == "unreadable":
        bad = voices / "bad.mp3"
        bad.write_bytes(b"this is no audio at all" * 100)
        fragment = "cannot be read as audio"
    elif problem == "empty":
        bad = voices / "bad.wav"
        soundfile.write(str(bad), np.zeros(0, dtype=np.float32), 24000)
        fragment = "holds no audio"
    elif problem == "missing_state":
        bad = voices / "bad.safetensors"
        fragment = "voice state"
    else:
        bad = voices / "bad.wav"
        fragment = "not found"
    path = tmp_path / "v.yaml"
    key = "state" if bad.suffix == ".safetensors" else "audio"
    path.write_text(f"voices:\n  - name: bad\n    {key}: {bad}\n")
    with caplog.at_level(logging.ERROR):
        cat = build_catalog(config_for(tmp_path, voices_file=path, voices_dir=voices), PREDEFINED, "m")
    assert "bad" not in [v.name for v in cat.voices]
    assert "good" in [v.name for v in cat.voices]
    assert fragment in caplog.text
    assert "'bad'" in caplog.text and str(bad) in caplog.text


@pytest.mark.parametrize(
    "kwargs", [{"cache_size": 0}, {"cache_mb": 0}, {"disk_cache_mb": -1}]
)
def test_config_validation(tmp_path: Path, kwargs: dict) -> None:
    with pytest.raises(VoiceConfigError):
        config_for(tmp_path, **kwargs)


# -- per-voice settings ---------------------------------------------------------------------


def test_per_voice_temperature_is_validated_and_kept(tmp_path, caplog):
    write_recording(tmp_path / "voices" / "mum.wav")
    path = tmp_path / "voices.yaml"
    path.write_text(
        """
voices:
  - name: mum
    audio: voices/mum.wav
    temperature: 0.9
  - name: alba
    temperature: "0.5"          # a quoted number is read as one
  - name: marius                 # no per-voice settings: the server's apply
  - name: hot
    temperature: -1              # out of bounds: skipped, like any bad entry
  - name: cold
    temperature: chilly
"""
    )
    with caplog.at_level(logging.ERROR):
        parsed = parse_voices_file(path)
    assert {spec.name: dict(spec.settings) for spec in parsed.voices} == {
        "mum": {"temperature": 0.9}, "alba": {"temperature": 0.5}, "marius": {},
    }  # fmt: skip
    errors = [record.getMessage() for record in caplog.records]
    assert len(errors) == 2
    assert "'hot'" in errors[0] and "temperature must be at least 0" in errors[0]
    assert "'cold'" in errors[1] and "temperature must be a number" in errors[1]


def test_per_voice_settings_reach_the_request(tmp_path):
    """From the voice's description to the options its requests are synthesized with."""
    import asyncio

    from server_fixtures import FakeModel, FakeVoices, fake_loader, inprocess_server, one_shot

    from wyoming_pocket_tts.core import GenerationOptions
    from wyoming_pocket_tts.server.service import Backend

    voices = FakeVoices(settings={"grandma": {"temperature": 0.9}})
    backend = Backend(model=FakeModel(), voices=voices, options=GenerationOptions(temperature=0.3, decode_steps=2))
    assert backend.settings_for("grandma").options == GenerationOptions(temperature=0.9, decode_steps=2)
    assert backend.settings_for("alba").options is backend.options

    model = FakeModel(frame_delay=0.0)

    async def go():
        async with inprocess_server(fake_loader(model, voices), tmp_path) as port:
            await one_shot(port, "Hello there.", voice="grandma")
            await one_shot(port, "Hello there.", voice="alba")

    asyncio.run(go())
    assert [options.temperature for options in model.log.options] == [0.9, None]


def test_the_library_describes_a_voice_with_its_settings(tmp_path):
    from wyoming_pocket_tts.voices.config import VoiceSpec
    from wyoming_pocket_tts.voices.library import voice_info

    spec = VoiceSpec(name="alba", kind="predefined", origin="test", settings={"temperature": 0.9})
    info = voice_info(spec, ["en"])
    assert dict(info.settings) == {"temperature": 0.9} and info.languages == ("en",)


def test_one_lookup_gives_the_voice_its_settings_and_language():
    """`settings_for` splits the voice's own settings by scope and names its language; an
    unknown name gets the server's settings."""
    from server_fixtures import FakeModel, FakeVoices

    from wyoming_pocket_tts.core import GenerationOptions
    from wyoming_pocket_tts.server.service import Backend, ReplyOptions, VoiceSettings

    voices = FakeVoices(settings={"grandma": {"temperature": 0.9, "length_scale": 1.5}})
    backend = Backend(model=FakeModel(), voices=voices, options=GenerationOptions(decode_steps=2),
                      reply=ReplyOptions(sentence_silence=0.2), languages=("fr",))  # fmt: skip
    grandma = backend.settings_for("grandma")
    assert grandma == VoiceSettings(
        options=GenerationOptions(temperature=0.9, decode_steps=2),
        reply=ReplyOptions(length_scale=1.5, sentence_silence=0.2),
        language="en",  # the voice's own language comes before the server's
    )
    assert backend.settings_for("nobody") == VoiceSettings(backend.options, backend.reply, "fr")
