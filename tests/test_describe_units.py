"""What the server knows before the model loads, how a failing load reaches requests, and
the start-up warm-up that must never delay a request (no model, no torch needed here)."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from engine_fixtures import write_voice_recording
from server_fixtures import REPO, FakeModel, FakeVoices, download_failing_after_retries, fake_loader

from wyoming_pocket_tts.server.app import WARMUP_FRAMES, ServerConfig, voice_previewer, warm_up
from wyoming_pocket_tts.server.model_facts import model_facts
from wyoming_pocket_tts.server.scheduler import Priority, SynthesisScheduler
from wyoming_pocket_tts.server.loading import LoadFailed
from wyoming_pocket_tts.server.service import Backend, TtsService
from wyoming_pocket_tts.voices.config import VoiceLibraryConfig

# -- model facts -----------------------------------------------------------------------


def test_facts_of_catalog_and_demo_models():
    german = model_facts("german")
    # Every predefined voice of the release, the German recording first (the default).
    assert german.predefined_voices[:3] == ("juergen", "alba", "marius") and len(german.predefined_voices) == 27
    assert german.languages == ("de",)
    demo = model_facts("demo")
    assert demo.predefined_voices == ("demo",) and demo.languages == ("en",)
    assert model_facts("german", language="fr").languages == ("fr",)  # --language wins


def test_language_of_a_config_from_its_name_path_or_contents(tmp_path, caplog):
    assert model_facts("/models/italian_24l.yaml").languages == ("it",)
    assert model_facts("hf://someone/tts/languages/spanish/config.yaml").languages == ("es",)
    config = tmp_path / "model.yaml"
    config.write_text("flow_lm:\n  lookup_table:\n    tokenizer_path: hf://kyutai/x/languages/german/tokenizer.json\n")
    facts = model_facts(str(config))
    assert facts.languages == ("de",) and facts.predefined_voices == ()
    config.write_text("flow_lm: {}\n")
    with caplog.at_level(logging.WARNING):
        assert model_facts(str(config)).languages == ("en",)
    assert "its language is not known" in caplog.text and "--language" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert model_facts(str(config), language="nl").languages == ("nl",)
    assert not caplog.records


def test_listing_the_voices_imports_no_torch(tmp_path):
    """The first describe must not wait seconds for torch: the preview path is torch-free."""
    write_voice_recording(tmp_path / "voices" / "grandma.wav")
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from wyoming_pocket_tts.server.app import ServerConfig, voice_previewer\n"
        "from wyoming_pocket_tts.server.model_facts import model_facts\n"
        "from wyoming_pocket_tts.voices.config import VoiceLibraryConfig\n"
        f"config = ServerConfig(uri='tcp://127.0.0.1:0', model='english', library=VoiceLibraryConfig(Path({str(tmp_path)!r})))\n"
        "names = [e.name for e in voice_previewer(config, model_facts('english'))()]\n"
        "assert names[0] == 'alba' and 'grandma' in names, names\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_preview_follows_the_voices_folder(tmp_path):
    folder = tmp_path / "voices"
    write_voice_recording(folder / "grandma.wav")
    config = ServerConfig(uri="tcp://127.0.0.1:0", model="demo", library=VoiceLibraryConfig(tmp_path, voices_dir=folder))
    previewer = voice_previewer(config, model_facts("demo"))
    assert [(e.name, e.languages) for e in previewer()] == [("demo", ("en",)), ("grandma", ("en",))]
    write_voice_recording(folder / "aunt.wav", seed=2)
    assert [e.name for e in previewer()] == ["demo", "aunt", "grandma"]
    (folder / "grandma.wav").unlink()
    assert [e.name for e in previewer()] == ["demo", "aunt"]


# -- a load that fails ------------------------------------------------------------------


def test_download_retries_are_logged_once_each_and_reach_waiting_requests(tmp_path, monkeypatch, caplog):
    """huggingface_hub's own retry loop (the real one, against a closed port) while the
    model loads: one line per retry naming the file, and a request waiting for the model
    gets the reason at the first retry, not after the last."""
    import huggingface_hub

    from wyoming_pocket_tts.engine.hub import HubAccess, resolve

    proceed = threading.Event()
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download_failing_after_retries(proceed))

    def loader() -> Backend:
        resolve("hf://kyutai/voices/languages/english/tokenizer.json", HubAccess())
        raise AssertionError("unreachable")

    async def go() -> tuple[str, str]:
        service = TtsService(
            model_name="english", loader=loader, scheduler=SynthesisScheduler(1),
            synth_executor=ThreadPoolExecutor(1), voice_executor=ThreadPoolExecutor(1),
            download_retry_max_s=30,
        )  # fmt: skip
        service.start()
        with pytest.raises(LoadFailed) as during:
            await asyncio.wait_for(service.wait_ready(), 10)
        proceed.set()
        # The attempt failed for want of the hub: the server will try again (issue 26),
        # and meanwhile a request is told so.
        deadline = time.monotonic() + 10
        while True:
            with pytest.raises(LoadFailed) as after:
                await asyncio.wait_for(service.wait_ready(), 10)
            if "trying again" in str(after.value) or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.02)
        service.stopping()
        return str(during.value), str(after.value)

    with caplog.at_level(logging.INFO):
        during, after = asyncio.run(go())
    assert "download of languages/english/tokenizer.json from kyutai/voices failed" in during
    assert "retry 1 of 2" in during
    assert "could not download" in after
    retry_lines = [r.getMessage() for r in caplog.records if "retry" in r.getMessage().lower()]
    assert len(retry_lines) == 2, retry_lines  # one per retry, ours only
    assert all("tokenizer.json from kyutai/voices" in line for line in retry_lines)
    assert not [r for r in caplog.records if r.name.startswith("huggingface_hub")]
    assert not logging.getLogger("huggingface_hub.utils._http").filters  # removed afterwards


# -- warm-up ---------------------------------------------------------------------------


class EndlessModel(FakeModel):
    """A model whose EOS never fires: it speaks until cancelled."""

    def synthesize(self, text, voice, options=None, cancel=None):
        while cancel is None or not cancel.is_set():
            time.sleep(self.frame_delay)
            yield np.zeros(self.frame_size, dtype=np.float32)


def test_warm_up_speaks_a_bounded_number_of_frames():
    model = EndlessModel(frame_delay=0.001)
    backend = Backend(model=model, voices=FakeVoices(), options=None)  # type: ignore[arg-type]
    audio_s = warm_up(backend, FakeVoices().get(None)[1], threading.Event())
    assert audio_s == pytest.approx(WARMUP_FRAMES * model.frame_size / model.sample_rate)
    assert audio_s <= 1.0


def test_a_request_pre_empts_the_warm_up():
    model = EndlessModel(frame_delay=0.02)
    finished = threading.Event()
    frames_made: list[int] = []

    def slow_warm_up(backend, voice, cancel):
        # Like warm_up, but far longer than a request would wait for.
        frames = sum(1 for _, _ in zip(range(10_000), backend.model.synthesize("x", voice, None, cancel)))
        frames_made.append(frames)
        finished.set()
        return 0.0

    async def go() -> float:
        scheduler = SynthesisScheduler(1)
        service = TtsService(
            model_name="fake", loader=fake_loader(model), scheduler=scheduler,
            synth_executor=ThreadPoolExecutor(2), voice_executor=ThreadPoolExecutor(1),
            warmup=slow_warm_up,
        )  # fmt: skip
        await service.start()
        while scheduler.stats.running == 0:  # the warm-up holds the only slot
            await asyncio.sleep(0.01)
        asked = time.monotonic()
        async with scheduler.slot(Priority.NEW):
            granted = time.monotonic() - asked
        await asyncio.to_thread(finished.wait, 10)
        await service.close()
        return granted

    granted = asyncio.run(go())
    assert finished.is_set() and frames_made[0] < 10_000
    assert granted < 5.0  # within a frame or so: never the warm-up's whole length


def test_warm_up_is_skipped_when_a_request_came_first():
    calls = []

    async def go() -> None:
        scheduler = SynthesisScheduler(1)
        service = TtsService(
            model_name="fake", loader=fake_loader(FakeModel(), delay=0.2), scheduler=scheduler,
            synth_executor=ThreadPoolExecutor(2), voice_executor=ThreadPoolExecutor(1),
            warmup=lambda *args: calls.append(args) or 0.0,
        )  # fmt: skip
        ready = service.start()
        async with scheduler.slot(Priority.NEW):  # a request, waiting for the model
            await ready
            await asyncio.sleep(0.3)
        await service.close()

    asyncio.run(go())
    assert calls == []


def test_background_slot_is_pre_empted_once():
    async def go() -> int:
        scheduler = SynthesisScheduler(3)
        preempted = []
        async with scheduler.slot(Priority.BACKGROUND, preempt=lambda: preempted.append(1)):
            async with scheduler.slot(Priority.NEW):
                async with scheduler.slot(Priority.CONTINUATION):
                    pass
        return len(preempted)

    assert asyncio.run(go()) == 1
