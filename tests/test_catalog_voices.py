"""Every predefined voice of each released model (issue 28): the catalog lists all 27 on every
model, its language's own voice first, at the hub paths of the release; one downloads
through the real hub code from a local stand-in; describe lists them, named so that two
models of two languages keep their own voices' names.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from hub_fixtures import LocalHub
from safetensors.torch import load_file, save_file
from server_fixtures import REPO, describe, start_server_process, wait_port

from wyoming_pocket_tts.engine.catalog import PREDEFINED_VOICES, catalog, native_language

REVISION = "a7056f505a4a8ca72d8b5fb1440071d6f1a35739"
DEFAULT_VOICES = {"en": "alba", "fr": "estelle", "de": "juergen", "it": "giovanni", "pt": "rafael", "es": "lola",
                  "nl": "daan"}  # fmt: skip


def test_every_model_offers_every_predefined_voice_its_own_language_first() -> None:
    assert len(PREDEFINED_VOICES) == len(set(PREDEFINED_VOICES)) == 27
    for name, entry in catalog().items():
        assert sorted(entry.voices) == sorted(PREDEFINED_VOICES), name
        assert entry.voices[0] == DEFAULT_VOICES[entry.language], name
        assert native_language(entry.voices[0]) == entry.language
        for voice in entry.voices:
            assert entry.voice_state_path(voice) == (
                f"hf://kyutai/pocket-tts-without-voice-cloning/languages/{name}/embeddings/{voice}.safetensors@{REVISION}"
            )
    assert native_language("caro_davy") == "en" and native_language("demo") is None


# Runs in a fresh process, so that huggingface_hub reads HF_ENDPOINT as it starts: a model
# of the demo's size built as `load_model` builds a catalog model (the catalog's voice
# paths, the hub access), then the predefined voices asked for, through the real download.
LOAD_VOICES = """
import json, sys
from wyoming_pocket_tts.engine.catalog import catalog
from wyoming_pocket_tts.engine.demo import demo_config, make_tokenizer_json
from wyoming_pocket_tts.engine.hub import HubAccess
from wyoming_pocket_tts.engine.loading import DEMO_VOCAB, build_model
from pathlib import Path
entry = catalog()[sys.argv[1]]
tokenizer = make_tokenizer_json(Path(sys.argv[2]) / "tokenizer.json", DEMO_VOCAB)
model = build_model(demo_config(str(tokenizer), DEMO_VOCAB), name=entry.name, random_seed=0,
                    hub=HubAccess(cache_dir=Path(sys.argv[2]) / "cache"),
                    voices={voice: entry.voice_state_path(voice) for voice in entry.voices})
states = {name: model.voice_from_predefined(name).prompt_length for name in sys.argv[3:]}
print(json.dumps({"voices": list(model.predefined_voices), "prompt_lengths": states}))
"""


def test_a_predefined_voice_downloads_through_the_hub_code_from_a_local_hub(tmp_path: Path, voice_recording) -> None:
    from wyoming_pocket_tts.engine import build_demo_model

    # A state of the right shape, as the release stores it: tensors, no metadata of ours.
    model = build_demo_model()
    saved = tmp_path / "state.safetensors"
    model.save_voice(model.voice_from_recording(voice_recording), saved)
    save_file(load_file(saved), tmp_path / "released.safetensors")
    content = (tmp_path / "released.safetensors").read_bytes()
    repo = "kyutai/pocket-tts-without-voice-cloning"
    hub = LocalHub({(repo, REVISION, f"languages/german/embeddings/{voice}.safetensors"): content
                    for voice in ("alba", "juergen")})  # fmt: skip
    try:
        env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HUB_DISABLE_XET": "1", "HF_HUB_OFFLINE": "0",
               "HF_HOME": str(tmp_path / "hf-home")}  # fmt: skip
        env.pop("HF_HUB_CACHE", None)
        result = subprocess.run([sys.executable, "-c", LOAD_VOICES, "german", str(tmp_path), "alba", "juergen"],
                                capture_output=True, text=True, cwd=REPO, env=env, timeout=300)  # fmt: skip
    finally:
        hub.close()
    assert result.returncode == 0, result.stderr[-3000:]
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert loaded["voices"] == list(catalog()["german"].voices)
    assert loaded["prompt_lengths"]["alba"] == loaded["prompt_lengths"]["juergen"] > 0
    fetched = {path for _method, path in hub.requests if "/resolve/" in path}
    assert fetched == {f"/{repo}/resolve/{REVISION}/languages/german/embeddings/{voice}.safetensors"
                       for voice in ("alba", "juergen")}  # fmt: skip
    assert (tmp_path / "cache").is_dir()  # into the model's hub cache


def test_describe_lists_every_voice_of_two_models_each_keeping_its_own_voices_names(tmp_path, monkeypatch) -> None:
    """`--model english --model german`, while the models load (the hub never answers):
    both models' 27 voices, the English recordings' names on the English model, juergen's on
    the German model; the voices recorded in a third language are the first model's."""
    hub = LocalHub(hang=True)
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    server = start_server_process(tmp_path, "--model", "english", "--model", "german")
    try:
        asyncio.run(wait_port(server.port, timeout=60))
        deadline = time.monotonic() + 60
        while not (info := asyncio.run(describe(server.port))[0]).tts[0].voices:
            assert time.monotonic() < deadline, server.log()
            time.sleep(0.2)
        assert "(loading)" in info.tts[0].description  # the models never loaded: all from the catalog
    finally:
        server.stop()
        hub.close()
    voices = {voice.name: voice.languages for voice in info.tts[0].voices}
    assert len(voices) == 54 and info.tts[0].voices[0].name == "alba"
    for voice in PREDEFINED_VOICES:
        native = native_language(voice)
        english, german = (voice, f"{voice} (german)") if native != "de" else (f"{voice} (english)", voice)
        assert voices[english] == ["en"] and voices[german] == ["de"], voice
    descriptions = {voice.name: voice.description for voice in info.tts[0].voices}
    assert descriptions["juergen (english)"] == "Juergen (english)" and descriptions["juergen"] == "Juergen"


def test_a_predefined_voice_on_a_model_of_another_language_gives_its_name_way() -> None:
    from wyoming_pocket_tts.core import VoiceInfo
    from wyoming_pocket_tts.server.models import ModelEntry, advertise

    def entry(name: str, language: str, *voices: VoiceInfo) -> ModelEntry:
        return ModelEntry(name, (language,), lambda: None, previewed=voices)  # type: ignore[arg-type,return-value]

    english = entry("english", "en", VoiceInfo("alba", "Alba", ("en",)), VoiceInfo("juergen", "Juergen", ("en",)),
                    VoiceInfo("lola", "Lola", ("en",)), VoiceInfo("mum", "Mum", ("en",), kind="recording"))
    german = entry("german", "de", VoiceInfo("juergen", "Juergen", ("de",)), VoiceInfo("alba", "Alba", ("de",)),
                   VoiceInfo("lola", "Lola", ("de",)), VoiceInfo("mum", "Mum", ("de",), kind="recording"))  # fmt: skip
    voices, routes = advertise([english, german])
    assert [voice.name for voice in voices] == [
        "alba", "juergen (english)", "lola", "mum", "juergen", "alba (german)", "lola (german)", "mum (german)",
    ]  # fmt: skip
    assert routes["juergen"].entry is german and routes["juergen (english)"].entry is english
    assert routes["juergen (english)"].voice == "juergen"
