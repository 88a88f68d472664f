"""The voices page in a real headless Chromium (Debian's, driven by Playwright; never a
downloaded browser), on the real server with the demo model: record from a fake
microphone, upload a phone's recording, preview, edit, make default, delete; after each
change the same server over Wyoming lists it and speaks with it. Also: the page under
Home Assistant's ingress prefix (a stand-in proxy), two tabs, the keyboard, and the
layout at desktop and phone width, light and dark (bench/voices_page_shots.py takes the
screenshots).

One browser and one server for the module.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import re
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from engine_fixtures import local_architecture
from server_fixtures import describe, free_port, one_shot, start_server_process, stop_cleanly, wait_voices
from web_fixtures import CHROMIUM_ARGS, encode, ensure_chromium, speech

playwright_sync = pytest.importorskip("playwright.sync_api", reason="playwright is in the test extra")
from playwright.sync_api import Page, expect  # noqa: E402

# Generous: eight engineers share two cores. Nothing here asserts a duration.
TIMEOUT_MS = 60_000
DONE = r"Request \d+ done: voice (.+?), "
expect.set_options(timeout=TIMEOUT_MS)


def wyoming(coroutine):
    """Run a Wyoming client coroutine off Playwright's thread (it has its own loop)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def voice_names(port: int) -> list[str]:
    info, _ = wyoming(describe(port))
    return [voice.name for voice in info.tts[0].voices]


@dataclass
class Site:
    port: int  # Wyoming
    url: str  # the page
    voices_dir: Path
    server: object
    speech_wav: Path

    def speaks(self, voice: str | None) -> str:
        """A synthesize in `voice` answers with audio, spoken in that voice (the log says so)."""
        before = len(re.findall(DONE, self.server.log()))
        response = wyoming(one_shot(self.port, "Hello from the voices page.", voice=voice, timeout=120))
        assert response.error is None and response.audio, response.types
        deadline = time.monotonic() + 10  # the line is logged just after the audio is sent
        while len(done := re.findall(DONE, self.server.log())) <= before:
            assert time.monotonic() < deadline, self.server.log()[-2000:]
            time.sleep(0.05)
        return done[-1]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    folder = tmp_path_factory.mktemp("voices-page")
    _, _, wav = speech(folder)
    page_port = free_port()
    voices_dir = folder / "voices"
    voices_dir.mkdir()
    server = start_server_process(folder, "--http", f"127.0.0.1:{page_port}", "--voices-dir", str(voices_dir))
    try:
        wait_voices(server, port_timeout=60)
        yield Site(server.port, f"http://127.0.0.1:{page_port}/", voices_dir, server, wav)
    finally:
        stop_cleanly(server)


@pytest.fixture(scope="module")
def browser(site: Site):
    chromium = ensure_chromium()
    assert chromium, "Debian's chromium is needed (apt-get install chromium)"
    with playwright_sync.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            tempfile.mkdtemp(prefix="chromium-"), executable_path=chromium, headless=True,
            args=[*CHROMIUM_ARGS, "--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream",
                  f"--use-file-for-fake-audio-capture={site.speech_wav}"],
            viewport={"width": 1280, "height": 900},
        )  # fmt: skip
        context.set_default_timeout(TIMEOUT_MS)
        try:
            yield context
        finally:
            context.close()


@pytest.fixture
def page(browser, site: Site) -> Iterator[Page]:
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(site.url)
    expect(page.locator("#voices-loading")).to_be_hidden()
    yield page
    page.close()
    assert not errors, errors


def voice_item(page: Page, name: str):
    return page.locator(f'li.voice[data-voice="{name}"]')


def upload(page: Page, path: Path, samples, rate: int, kind: str) -> None:
    """Upload `samples` as a file of `kind`; the page checks it as good."""
    path.write_bytes(encode(samples, rate, kind))
    page.locator("#upload-file").set_input_files(path)
    expect(page.locator("#check-result")).to_contain_text("Good:")


def save_new_voice(page: Page, name: str) -> None:
    page.get_by_label("Name", exact=True).fill(name)
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator("#status")).to_contain_text(f"Voice {name} saved")
    expect(voice_item(page, name)).to_be_visible()


def test_record_from_the_microphone(page: Page, site: Site) -> None:
    page.get_by_role("button", name="Record").click()
    expect(page.get_by_role("button", name="Stop")).to_be_enabled()
    expect(page.locator("#elapsed")).to_contain_text("0:06 / 0:30")  # the elapsed time runs
    page.get_by_role("button", name="Stop").click()
    # The level meter followed the fake microphone's speech (its loudest moment is kept).
    assert float(page.locator("#level").get_attribute("data-peak")) > 0.3
    expect(page.locator("#check-result")).to_contain_text("Good:")
    save_new_voice(page, "Grandma")
    assert (site.voices_dir / "Grandma.flac").is_file()
    assert "Grandma" in voice_names(site.port)  # listed at once by describe
    assert site.speaks("Grandma") == "Grandma"
    page.reload()
    expect(voice_item(page, "Grandma").locator(".voice-facts")).to_contain_text("ready")  # encoded


def test_upload_a_phone_recording(page: Page, site: Site, tmp_path: Path) -> None:
    samples, rate, _ = speech(tmp_path, seconds=9.0)
    upload(page, tmp_path / "Voice memo 12.m4a", samples, rate, "m4a-aac")
    expect(page.locator("#check-result")).to_contain_text("Good: 9.")
    page.locator("#new-description").fill("Grandpa, from his phone")
    save_new_voice(page, "Grandpa")
    info, _ = wyoming(describe(site.port))
    grandpa = next(voice for voice in info.tts[0].voices if voice.name == "Grandpa")
    assert grandpa.description == "Grandpa, from his phone"
    assert site.speaks("Grandpa") == "Grandpa"


def test_bad_recordings_are_refused_on_the_page(page: Page, site: Site, tmp_path: Path) -> None:
    text = tmp_path / "notes.wav"
    text.write_text("not audio at all\n" * 50)
    page.locator("#upload-file").set_input_files(text)
    expect(page.locator("#check-result")).to_contain_text("not a recording")
    short = tmp_path / "short.flac"
    samples, rate, _ = speech(tmp_path, seconds=2.0)
    short.write_bytes(encode(samples, rate, "flac"))
    page.locator("#upload-file").set_input_files(short)
    expect(page.locator("#check-result")).to_contain_text("record at least 5 s")
    page.get_by_label("Name", exact=True).fill("../evil")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.get_by_role("alert")).to_contain_text("letters, digits")
    assert not any(path.stem == "evil" for path in site.voices_dir.rglob("*"))


def preview(page: Page, name: str) -> float:
    """Preview `name` on the page; it played sound. Returns the seconds played. (How many
    pieces the page reads the stream in depends on timing: a short preview made faster
    than the network hands it over arrives in one.)"""
    item = voice_item(page, name)
    item.get_by_role("button", name="Preview").click()
    status = item.locator(".preview-status")
    expect(status).to_have_attribute("data-state", "done")
    expect(status).to_contain_text("Played")
    played = float(status.get_attribute("data-played"))
    assert played > 0.3 and int(status.get_attribute("data-buffers")) >= 1
    assert float(status.get_attribute("data-peak")) > 0.01  # sound, not silence
    return played


def test_preview_plays_the_voice(page: Page, site: Site) -> None:
    page.get_by_label("Sentence to hear").fill("The front door is locked.")
    preview(page, "demo")
    first = float(voice_item(page, "demo").locator(".preview-status").get_attribute("data-first"))
    assert 0 < first < 30  # generous: the machine is shared; the figure is shown on the page


def test_edit_make_default_and_delete(page: Page, site: Site, tmp_path: Path) -> None:
    samples, rate, _ = speech(tmp_path, seconds=7.0)
    upload(page, tmp_path / "aunt.webm", samples, rate, "webm-opus")
    save_new_voice(page, "Aunt May")

    item = voice_item(page, "Aunt May")
    item.get_by_role("button", name="Edit").click()
    item.get_by_label("Description").fill("Aunt May, slowly")
    item.get_by_label("Speaking rate").fill("1.3")
    item.get_by_label("Pause between sentences").fill("0.4")
    item.get_by_label("Temperature").fill("0.5")
    item.get_by_role("button", name="Save").click()
    expect(page.locator("#status")).to_contain_text("Voice Aunt May changed")
    expect(voice_item(page, "Aunt May").locator(".voice-settings")).to_contain_text(
        "rate 1.3, pause 0.4 s, temperature 0.5")
    info, _ = wyoming(describe(site.port))
    assert next(v for v in info.tts[0].voices if v.name == "Aunt May").description == "Aunt May, slowly"
    text = (site.voices_dir / "voices.yaml").read_text()
    assert "length_scale: 1.3" in text and "sentence_silence: 0.4" in text and "temperature: 0.5" in text
    assert site.speaks("Aunt May") == "Aunt May"
    # The edited voice's item was drawn anew: its Preview still plays, and says so.
    preview(page, "Aunt May")

    voice_item(page, "Aunt May").get_by_role("button", name="Make default").click()
    expect(page.locator("#status")).to_contain_text("Aunt May is now the default voice")
    expect(page.locator("li.voice").first).to_have_attribute("data-voice", "Aunt May")
    assert voice_names(site.port)[0] == "Aunt May"
    assert site.speaks(None) == "Aunt May"  # a request without a voice gets the new default

    voice_item(page, "Aunt May").get_by_role("button", name="Delete").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("Delete the voice Aunt May?")
    dialog.get_by_role("button", name="Cancel").click()  # a confirmation: nothing yet
    assert "Aunt May" in voice_names(site.port)
    voice_item(page, "Aunt May").get_by_role("button", name="Delete").click()
    dialog.get_by_role("button", name="Delete").click()
    expect(page.locator("#status")).to_contain_text("Voice Aunt May deleted")
    expect(voice_item(page, "Aunt May")).to_have_count(0)
    assert "Aunt May" not in voice_names(site.port)
    assert not (site.voices_dir / "Aunt May.flac").exists()
    assert "Aunt May" not in (site.voices_dir / "voices.yaml").read_text()
    assert site.speaks(None) != "Aunt May"


def test_two_tabs_lose_nothing(browser, page: Page, site: Site) -> None:
    other = browser.new_page()
    try:
        other.goto(site.url)
        for tab, words in ((page, "first tab"), (other, "second tab")):
            item = voice_item(tab, "demo")
            item.get_by_role("button", name="Edit").click()
            item.get_by_label("Description").fill(f"Demo, {words}")
        voice_item(page, "demo").get_by_role("button", name="Save").click()
        expect(page.locator("#status")).to_contain_text("Voice demo changed")
        voice_item(other, "demo").get_by_role("button", name="Save").click()
        expect(other.get_by_role("alert")).to_contain_text("was changed meanwhile")  # not overwritten
        expect(voice_item(other, "demo").locator(".voice-description")).to_have_text("Demo, first tab")
        info, _ = wyoming(describe(site.port))
        assert next(v for v in info.tts[0].voices if v.name == "demo").description == "Demo, first tab"
    finally:
        other.close()


def test_controls_have_names_and_work_from_the_keyboard(page: Page) -> None:
    for name in ("Record", "Stop", "Upload", "Save"):
        expect(page.get_by_role("button", name=name, exact=True)).to_have_count(1)
    expect(page.get_by_role("button", name="Preview demo")).to_be_visible()
    expect(page.get_by_role("textbox", name="Name", exact=True)).to_be_visible()
    expect(page.get_by_role("meter", name="Level")).to_be_visible()
    expect(page.get_by_role("timer", name="Elapsed time")).to_be_visible()
    # Tab reaches every control in order, each showing where the focus is.
    seen: list[str] = []
    while "Save" not in seen:
        assert len(seen) < 60, seen
        page.keyboard.press("Tab")
        focused = page.evaluate("() => [document.activeElement.getAttribute('aria-label') || "
                                "document.activeElement.textContent.trim() || document.activeElement.id, "
                                "getComputedStyle(document.activeElement).outlineStyle]")  # fmt: skip
        seen.append(focused[0])
        assert focused[1] != "none", focused
    for name in ("preview-text", "Preview demo", "Edit demo", "new-name", "Record", "Upload"):
        assert name in seen, seen
    # Enter on a focused button works; Escape closes the confirmation, nothing deleted.
    page.get_by_role("button", name="Preview demo").focus()
    page.keyboard.press("Enter")
    expect(voice_item(page, "demo").locator(".preview-status")).to_have_attribute("data-state", "done")
    page.get_by_role("button", name="Delete Grandpa").focus()
    page.keyboard.press("Enter")
    expect(page.get_by_role("dialog")).to_be_visible()
    expect(page.get_by_role("dialog").get_by_role("button", name="Cancel")).to_be_focused()
    page.keyboard.press("Escape")
    expect(page.get_by_role("dialog")).to_be_hidden()
    expect(voice_item(page, "Grandpa")).to_have_count(1)


def test_layout_at_desktop_and_phone_width_light_and_dark(page: Page) -> None:
    voice_item(page, "demo").get_by_role("button", name="Edit").click()  # the widest part open too
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for size in ({"width": 1280, "height": 900}, {"width": 390, "height": 844}):
            page.set_viewport_size(size)
            # Nothing is wider than the screen: no sideways scrolling on a phone.
            assert page.evaluate("() => document.documentElement.scrollWidth") <= size["width"]
        background = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
        assert background == ("rgb(17, 17, 17)" if scheme == "dark" else "rgb(250, 250, 250)")


# -- under Home Assistant's ingress -------------------------------------------------------

INGRESS_PATH = "/api/hassio_ingress/Xy9_ab-CD"


class IngressProxy:
    """What Home Assistant and the Supervisor do, in small: the page's URLs live under
    /api/hassio_ingress/TOKEN/, the prefix is cut and sent in X-Ingress-Path, and the add-on
    is reached from the proxy's own address (here 127.0.0.2, standing for 172.30.32.2)."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.port = free_port()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        path = request.match_info["path"]
        headers = {key: value for key, value in request.headers.items()
                   if key.lower() not in ("host", "content-length", "transfer-encoding")}  # fmt: skip
        headers.update({"X-Ingress-Path": INGRESS_PATH, "X-Forwarded-Host": request.host,
                        "Host": request.host})  # fmt: skip
        connector = aiohttp.TCPConnector(local_addr=("127.0.0.2", 0))
        async with aiohttp.ClientSession(connector=connector) as session:
            async with session.request(request.method, f"{self.target}/{path}", params=request.query,
                                       headers=headers, data=await request.read(), allow_redirects=False) as upstream:  # fmt: skip
                response = web.StreamResponse(status=upstream.status, headers={
                    key: value for key, value in upstream.headers.items()
                    if key.lower() not in ("content-length", "transfer-encoding", "content-encoding")})  # fmt: skip
                await response.prepare(request)
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
                await response.write_eof()
                return response

    async def _run(self) -> None:
        app = web.Application(client_max_size=64 << 20)
        app.router.add_route("*", INGRESS_PATH + "/{path:.*}", self._forward)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", self.port).start()
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self._ready.set()
        await self._stop.wait()
        await runner.cleanup()

    def __enter__(self) -> IngressProxy:
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._stop is not None and self._loop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)


def test_the_page_under_the_ingress_prefix_with_two_models(browser, tmp_path: Path) -> None:
    """The add-on's way in, serving two models: a voice recorded for the second one (chosen
    on the page) is saved in its sub-folder, listed, previewed and spoken by that model."""
    page_port = free_port()
    (tmp_path / "voices").mkdir()
    second = local_architecture("english_7m_2026-10", tmp_path / "model")
    server = start_server_process(tmp_path, "--model", "demo", "--model", str(second.config_path),
                                  "--http", f"0.0.0.0:{page_port}", "--http-ingress", "127.0.0.2",
                                  "--voices-dir", str(tmp_path / "voices"))  # fmt: skip
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:  # asyncio, off Playwright's thread
            pool.submit(wait_voices, server, port_timeout=60).result()
        direct = browser.new_page()
        try:
            response = direct.goto(f"http://127.0.0.1:{page_port}/")  # not from the proxy: refused
            assert response is not None and response.status == 403
            assert "through Home Assistant" in direct.content()
        finally:
            direct.close()
        with IngressProxy(f"http://127.0.0.1:{page_port}") as proxy:
            page = browser.new_page()
            try:
                page.goto(f"http://127.0.0.1:{proxy.port}{INGRESS_PATH}/")
                expect(page.locator("#voices-loading")).to_be_hidden()
                samples, rate, _ = speech(tmp_path, seconds=7.0)
                upload(page, tmp_path / "ingress.ogg", samples, rate, "ogg-opus")
                model = page.get_by_label("Model", exact=True)
                expect(model.locator("option")).to_have_count(2)
                model.select_option(index=1)
                save_new_voice(page, "Ingress voice")
                expect(voice_item(page, "Ingress voice").locator(".voice-facts")).to_contain_text(
                    "model english_7m_2026-10")
                preview(page, "Ingress voice")
            finally:
                page.close()
        assert "Ingress voice" in voice_names(server.port)
        assert [path.name for path in (tmp_path / "voices").rglob("*.flac")] == ["Ingress voice.flac"]
        assert "english_7m" in next((tmp_path / "voices").rglob("*.flac")).parent.name
        response = wyoming(one_shot(server.port, "Hello from the second model.", voice="Ingress voice", timeout=120))
        assert response.error is None and response.audio, response.types
    finally:
        stop_cleanly(server)
