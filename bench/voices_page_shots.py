"""Screenshots of the voices page at desktop and phone width, light and dark (PNG).

    python bench/voices_page_shots.py                        # into ./shots
    python bench/voices_page_shots.py --out /work/notes/shots

Starts the real server (demo model) with the page on loopback, and drives Debian's
Chromium (/usr/bin/chromium, through Playwright; no browser is downloaded) as a user would:
records "Grandma" from a fake microphone playing an espeak-ng recording, saves it with a
description, previews her, and opens the edit form of another voice; then shoots the whole
page four times. A script, not a test: the layout's checks (no sideways scrolling on a
phone, Home Assistant's colours) are in tests/test_web_browser.py.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from server_fixtures import free_port, start_server_process, wait_voices  # noqa: E402
from web_fixtures import CHROMIUM, CHROMIUM_ARGS, speech  # noqa: E402

_LOGGER = logging.getLogger("voices_page_shots")
SIZES = {"desktop": (1280, 900), "phone": (390, 844)}
TIMEOUT_MS = 120_000


def prepare(page, url: str) -> None:
    """The page as a household would see it after adding a voice."""
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    page.goto(url)
    expect(page.locator("#voices-loading")).to_be_hidden()
    page.get_by_role("button", name="Record").click()
    expect(page.locator("#elapsed")).to_contain_text("0:07 / 0:30")
    page.get_by_role("button", name="Stop").click()
    expect(page.locator("#check-result")).to_contain_text("Good:")
    page.get_by_label("Name", exact=True).fill("Grandma")
    page.locator("#new-description").fill("Grandma, recorded in the kitchen")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator("#status")).to_contain_text("Voice Grandma saved")
    page.reload()
    grandma = page.locator('li.voice[data-voice="Grandma"]')
    expect(grandma.locator(".voice-facts")).to_contain_text("ready")
    page.get_by_label("Sentence to hear").fill("Dinner is ready at seven.")
    grandma.get_by_role("button", name="Preview").click()
    expect(grandma.locator(".preview-status")).to_have_attribute("data-state", "done")
    demo = page.locator('li.voice[data-voice="demo"]')
    demo.get_by_role("button", name="Edit").click()
    page.evaluate("() => document.activeElement && document.activeElement.blur()")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("shots"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if not Path(CHROMIUM).exists():
        sys.exit(f"{CHROMIUM} is missing: apt-get install chromium")
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        _, _, wav = speech(folder)
        (folder / "voices").mkdir()
        page_port = free_port()
        server = start_server_process(folder, "--http", f"127.0.0.1:{page_port}",
                                      "--voices-dir", str(folder / "voices"))  # fmt: skip
        try:
            wait_voices(server, port_timeout=60)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch_persistent_context(
                    str(folder / "chromium"), executable_path=CHROMIUM, headless=True,
                    args=[*CHROMIUM_ARGS, "--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream",
                          f"--use-file-for-fake-audio-capture={wav}"],
                    viewport={"width": SIZES["desktop"][0], "height": SIZES["desktop"][1]},
                )  # fmt: skip
                try:
                    page = browser.new_page()
                    prepare(page, f"http://127.0.0.1:{page_port}/")
                    for scheme in ("light", "dark"):
                        page.emulate_media(color_scheme=scheme)
                        for label, (width, height) in SIZES.items():
                            page.set_viewport_size({"width": width, "height": height})
                            path = args.out / f"voices-page-{label}-{scheme}.png"
                            page.screenshot(path=path, full_page=True)
                            _LOGGER.info("%s (%d px wide)", path, width)
                finally:
                    browser.close()
        finally:
            server.stop()


if __name__ == "__main__":
    main()
