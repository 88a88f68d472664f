"""A Hugging Face outage at boot (issue 26): the server keeps running, answers describe,
answers requests with the reason, tries the download again with a capped backoff, and
starts speaking by itself once the hub is back. The process test runs the real download
code against a local stand-in for the hub (HF_ENDPOINT), down at start, then up.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from hub_fixtures import LocalHub, released_model_files
from server_fixtures import FakeModel, FakeVoices, describe, free_port, inprocess_server, one_shot, start_server_process

from wyoming_pocket_tts.core import GenerationOptions
from wyoming_pocket_tts.core.errors import HubUnavailableError, ModelLoadError
from wyoming_pocket_tts.engine.hub import _unreachable
from wyoming_pocket_tts.server.loading import LoadFailed
from wyoming_pocket_tts.server.service import Backend


def flaky_loader(failures: int, error: Exception, calls: list[float]):
    """A fake model's loader that raises `error` `failures` times, then loads."""

    def load() -> Backend:
        calls.append(time.monotonic())
        if len(calls) <= failures:
            raise error
        return Backend(model=FakeModel(), voices=FakeVoices(), options=GenerationOptions())

    return load


def test_the_load_is_tried_again_while_the_hub_cannot_be_reached(tmp_path: Path) -> None:
    calls: list[float] = []
    loader = flaky_loader(3, HubUnavailableError("could not download hf://a/b/c.safetensors (no network)"), calls)

    async def scenario() -> tuple[str | None, str | None, int]:
        async with inprocess_server(loader, tmp_path, download_retry_max=0.4) as port:
            # While the hub cannot be reached: an answer at once, saying why.
            while len(calls) < 2:
                await asyncio.sleep(0.01)
            refused = await one_shot(port, "Hello there.", timeout=5)
            info, _ = await describe(port)
            assert info.tts and info.tts[0].voices is not None
            # The server speaks by itself once a load succeeds: no restart.
            deadline = time.monotonic() + 30
            while (spoken := await one_shot(port, "Hello there.", timeout=10)).error is not None:
                assert time.monotonic() < deadline, spoken.error
                await asyncio.sleep(0.05)
            return refused.error, spoken.error, len(spoken.audio)

    refused, spoken, audio = asyncio.run(scenario())
    assert refused is not None and "Hugging Face hub cannot be reached" in refused and "trying again" in refused
    assert "no network" in refused
    assert spoken is None and audio > 0
    assert len(calls) == 4
    waits = [later - earlier for earlier, later in zip(calls, calls[1:])]
    # 0.4 s at most: the setting caps the first wait (5 s) and its doubling
    assert all(0.3 < wait < 5 for wait in waits), waits


def test_a_model_that_cannot_load_still_ends_the_server(tmp_path: Path) -> None:
    # Not the hub's being down (a file that does not exist, a refused access): no retry.
    calls: list[float] = []
    loader = flaky_loader(1, ModelLoadError("access to kyutai/pocket-tts is gated"), calls)

    async def scenario() -> None:
        async with inprocess_server(loader, tmp_path, download_retry_max=0.1):
            await asyncio.sleep(5)

    with pytest.raises(LoadFailed, match="gated"):
        asyncio.run(scenario())
    assert len(calls) == 1


def test_what_counts_as_the_hub_being_unreachable() -> None:
    import httpx2
    from huggingface_hub.errors import HfHubHTTPError

    request = httpx2.Request("HEAD", "https://huggingface.co/x")
    assert _unreachable(httpx2.ConnectError("refused", request=request))
    assert _unreachable(httpx2.ReadTimeout("slow", request=request))
    assert _unreachable(ConnectionResetError())
    for status, unreachable in ((503, True), (502, True), (429, True), (404, False), (401, False), (403, False)):
        error = HfHubHTTPError("hub", response=httpx2.Response(status, request=request))
        assert _unreachable(error) is unreachable, status
    assert not _unreachable(ValueError("bad config"))
    assert not _unreachable(PermissionError("cache folder"))


MODEL = "english_2m_refl_2026-10"  # a released architecture small enough for a test, in the catalog


def test_a_hub_down_at_start_then_up_the_server_speaks_without_a_restart(tmp_path: Path, monkeypatch) -> None:
    """The real server process and huggingface_hub's real download code, against a local
    hub serving the model's files (random weights) at the catalog's paths. The hub is down
    (nothing listens at its address) until the server has given up one whole attempt,
    with the hub's own retries (about 25 s), and said it will try again."""
    files = released_model_files(MODEL, tmp_path / "release")
    hub_port = free_port()
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{hub_port}")
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    for name in ("HF_HUB_CACHE", "HF_HUB_OFFLINE", "HF_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    server = start_server_process(tmp_path, "--model", MODEL, "--no-quantize", "--download-retry-max", "0.5")
    hub: LocalHub | None = None
    try:
        deadline = time.monotonic() + 120
        while "trying again in" not in server.log():
            assert server.proc.poll() is None and time.monotonic() < deadline, server.log()
            time.sleep(0.2)
        info, _ = asyncio.run(describe(server.port))
        refused = asyncio.run(one_shot(server.port, "Hello there.", timeout=30))
        hub = LocalHub(files, port=hub_port)
        started = time.monotonic()
        while (spoken := asyncio.run(one_shot(server.port, "Hello there.", timeout=60))).error is not None:
            assert server.proc.poll() is None and time.monotonic() - started < 120, server.log()
            time.sleep(0.2)
        pid_alive = server.proc.poll() is None
    finally:
        code = server.stop()
        if hub is not None:
            hub.close()
    log = server.log()
    assert code == 0, log[-3000:]
    assert pid_alive
    assert [voice.name for voice in info.tts[0].voices][:1] == ["alba"]
    # Told why at once: the server's own retry ("the Hugging Face hub cannot be reached"), or
    # during the next attempt the hub code's ("download of ... failed (Connection refused)").
    assert refused.error is not None and "download" in refused.error, refused.error
    assert spoken.error is None and len(spoken.audio) > 0
    assert f"Model {MODEL} ready" in log
    fetched = {path for _method, path in hub.requests if "/resolve/" in path}
    assert any(path.endswith("/model.safetensors") for path in fetched), fetched

