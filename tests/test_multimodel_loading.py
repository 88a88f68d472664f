"""A later model's load in a server with several models (issue 16), without torch: its
download trouble reaches the requests waiting for it at once (like the default model's),
the load goes on in the background, other models keep serving, and a failed load is tried
again by the next request."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import threading
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from server_fixtures import FakeModel, FakeVoices, download_failing_after_retries, fake_loader, free_port, one_shot

from wyoming_pocket_tts.core import GenerationOptions, VoiceInfo
from wyoming_pocket_tts.server.handler import PocketTtsEventHandler
from wyoming_pocket_tts.server.loading import LoadFailed
from wyoming_pocket_tts.server.models import ModelEntry, ModelPool
from wyoming_pocket_tts.server.scheduler import SynthesisScheduler
from wyoming_pocket_tts.server.service import Backend, TtsService

GERMAN_FILE = "hf://kyutai/voices/languages/german/tokenizer.json"


def german_entry(loader) -> ModelEntry:
    return ModelEntry("german", ("de",), loader, previewed=(VoiceInfo("juergen", "juergen", ("de",)),))


@contextlib.asynccontextmanager
async def serving(service: TtsService) -> AsyncIterator[int]:
    """The server's connection handler on `service`, on a free port (no `serve`: that one
    builds its models from a config, these are fakes)."""
    server = await asyncio.start_server(
        lambda reader, writer: PocketTtsEventHandler(reader, writer, service=service).run(), "127.0.0.1", free_port()
    )
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()


def test_a_later_models_download_retries_reach_its_requests_while_the_others_serve(monkeypatch, caplog):
    """huggingface_hub's own retry loop (the real one, against a closed port) while the
    second model loads for a request: that request and the next ones for its voice get
    the reason at once as an `error` event, the first model's voice is spoken meanwhile,
    the load goes on after they left, the log has one line per retry, and after the load
    failed the next request for the voice loads the model again."""
    import huggingface_hub

    from wyoming_pocket_tts.engine.hub import HubAccess, resolve

    proceed = threading.Event()
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download_failing_after_retries(proceed))
    attempts: list[int] = []

    def german_loader() -> Backend:
        attempts.append(len(attempts) + 1)
        if len(attempts) == 1:
            resolve(GERMAN_FILE, HubAccess())
            raise AssertionError("unreachable")
        return Backend(FakeModel(), FakeVoices(("juergen",)), GenerationOptions(), languages=("de",))

    german = german_entry(german_loader)
    complaints: list[dict[str, object]] = []

    async def go() -> dict[str, object]:
        asyncio.get_running_loop().set_exception_handler(lambda _loop, context: complaints.append(context))
        service = TtsService(
            model_name="english", loader=fake_loader(FakeModel(), FakeVoices(("alba",))),
            scheduler=SynthesisScheduler(2), synth_executor=ThreadPoolExecutor(4),
            voice_executor=ThreadPoolExecutor(1), more_models=[german], max_loaded_models=2,
        )  # fmt: skip
        await asyncio.wait_for(service.start(), 10)
        seen: dict[str, object] = {}
        async with serving(service) as port:
            seen["first"] = await one_shot(port, "Hallo zusammen.", voice="juergen", timeout=15)
            seen["again"] = await one_shot(port, "Guten Tag.", voice="juergen", timeout=15)
            seen["english"] = await one_shot(port, "Hello there.", voice="alba", timeout=15)
            seen["still_loading"] = german.loading is not None  # not cancelled by the requests that left
            proceed.set()
            deadline = time.monotonic() + 20
            while german.loading is not None and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            seen["trouble_after_failure"] = german.trouble.reason
            seen["retried"] = await one_shot(port, "Wieder da.", voice="juergen", timeout=15)
        await service.close()
        return seen

    with caplog.at_level(logging.INFO):
        seen = asyncio.run(go())
        gc.collect()  # a future whose error nobody retrieved complains when it is collected
    first, again, english, retried = seen["first"], seen["again"], seen["english"], seen["retried"]
    assert first.error and first.error.startswith("model not available: model german is still loading, and ")
    assert "download of languages/german/tokenizer.json from kyutai/voices failed" in first.error
    assert "retry 1 of 2" in first.error or "retry 2 of 2" in first.error
    assert again.error and "model german is still loading" in again.error  # a new request: at once too
    assert english.error is None and english.audio  # the loaded model is unaffected
    assert seen["still_loading"] is True and seen["trouble_after_failure"] is None
    assert retried.error is None and retried.audio and attempts == [1, 2]
    hub_lines = [r.getMessage() for r in caplog.records if r.name == "wyoming_pocket_tts.engine.hub"]
    assert len([line for line in hub_lines if "retry" in line]) == 2, hub_lines  # one per retry, not per request
    failures = [r.getMessage() for r in caplog.records if "model german failed to load" in r.getMessage()]
    assert len(failures) == 1 and "could not download" in failures[0], failures  # logged once, none waited
    assert not [r for r in caplog.records if r.name.startswith("huggingface_hub")]
    assert complaints == []


def test_a_waiter_that_gives_up_leaves_the_shared_load_running() -> None:
    """A request cancelled while a model loads does not cancel the load; a final failure
    reaches the requests still waiting as one LoadFailed line (nothing left unretrieved for
    asyncio to complain about), and the next request loads again."""
    release = threading.Event()
    attempts: list[int] = []

    def loader() -> Backend:
        release.wait(10)
        attempts.append(len(attempts) + 1)
        if len(attempts) == 1:
            raise RuntimeError("weights truncated\n(at byte 12)")
        return Backend(FakeModel(), FakeVoices(("juergen",)), GenerationOptions())

    complaints: list[dict[str, object]] = []

    async def scenario() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _loop, context: complaints.append(context))
        english = ModelEntry("english", ("en",), fake_loader(FakeModel()))
        german = german_entry(loader)
        pool = ModelPool([english, german], max_loaded=2)
        gives_up = asyncio.ensure_future(pool.acquire(german))
        stays = asyncio.ensure_future(pool.acquire(german))
        await asyncio.sleep(0.05)
        gives_up.cancel()
        await asyncio.sleep(0.05)
        assert german.loading is not None and not german.loading.done()
        release.set()
        with pytest.raises(LoadFailed, match=r"^model german failed to load: weights truncated \(at byte 12\)$"):
            await asyncio.wait_for(stays, 10)
        assert gives_up.cancelled() and german.users == 0 and german.backend is None
        backend = await asyncio.wait_for(pool.acquire(german), 10)
        assert german.backend is backend and german.users == 1 and attempts == [1, 2]

    asyncio.run(scenario())
    gc.collect()  # a future whose error nobody retrieved complains when it is collected
    assert complaints == []
