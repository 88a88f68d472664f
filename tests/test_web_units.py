"""The voices page's parts without a browser or a model: the recording check, the decoder,
names, the store's writes to the voices file and folder, the settings, the guard and the
routes (in process, on a voice list built from the files as the server builds it)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import numpy as np
import pytest
import soundfile
from aiohttp.test_utils import TestServer

from web_fixtures import FORMATS, encode, speech
from wyoming_pocket_tts.__main__ import build_parser, config_from_args
from wyoming_pocket_tts.settings import SettingError
from wyoming_pocket_tts.voices.catalog import build_catalog, sources_signature, voice_info
from wyoming_pocket_tts.voices.config import ModelScope, VoiceLibraryConfig, parse_voices_file
from wyoming_pocket_tts.web import quality
from wyoming_pocket_tts.web.app import MAX_UPLOAD_BYTES, VoicesPage
from wyoming_pocket_tts.web.config import WebConfig, web_config
from wyoming_pocket_tts.web.decode import DecodeError, decode_audio
from wyoming_pocket_tts.web.guard import CSRF_HEADER, SESSION_COOKIE
from wyoming_pocket_tts.web.link import ServedModel, ServedVoice
from wyoming_pocket_tts.web.store import (
    Conflict,
    NameTaken,
    Settings,
    StoreError,
    StoreModel,
    VoiceRef,
    VoiceStore,
    check_name,
)
from wyoming_pocket_tts.web.strings import Strings

RATE = 24_000
STATIC = Path(__file__).resolve().parents[1] / "wyoming_pocket_tts" / "web" / "static"


@pytest.fixture(scope="module")
def voice(tmp_path_factory: pytest.TempPathFactory) -> tuple[np.ndarray, int]:
    samples, rate, _ = speech(tmp_path_factory.mktemp("speech"), seconds=8.0)
    return samples, rate


# -- the recording check ----------------------------------------------------------------


def test_check_accepts_speech_and_says_its_level(voice: tuple[np.ndarray, int]) -> None:
    result = quality.check_recording(*voice)
    assert result.ok, result.problems
    assert 7.9 < result.seconds < 8.1
    assert result.speech_seconds > quality.MIN_SPEECH_SECONDS
    assert -40 < result.speech_dbfs < 0


@pytest.mark.parametrize(
    ("change", "code"),
    [
        (lambda x, r: x[: int(3 * r)], "too_short"),
        (lambda x, r: np.resize(x, int(31 * r)), "too_long"),
        (lambda x, r: np.zeros_like(x), "silent"),
        (lambda x, r: x * 10 ** (-70 / 20), "silent"),
        (lambda x, r: x * 10 ** (-35 / 20), "too_quiet"),
        (lambda x, r: np.clip(x * 20, -1, 1), "clipped"),
        (lambda x, r: np.concatenate([x[: int(1 * r)], np.zeros(int(7 * r), np.float32)]), "little_speech"),
    ],
)
def test_check_refuses_what_cannot_be_cloned(voice: tuple[np.ndarray, int], change, code: str) -> None:
    samples, rate = voice
    result = quality.check_recording(change(samples, rate).astype(np.float32), rate)
    assert not result.ok
    codes = [problem.code for problem in result.problems]
    assert code in codes, result.problems
    problem = result.problems[codes.index(code)]
    assert problem.message and problem.values  # English for logs and API clients, values for the page


# -- decoding: by content, every format phones and browsers record --------------------


@pytest.mark.parametrize("kind", sorted(FORMATS))
def test_every_accepted_format_decodes(voice: tuple[np.ndarray, int], kind: str) -> None:
    samples, rate = voice
    data = encode(samples, rate, kind)
    decoded = decode_audio(data)
    assert abs(decoded.samples.size / decoded.sample_rate - samples.size / rate) < 0.1
    assert decoded.samples.dtype == np.float32 and decoded.samples.ndim == 1
    assert quality.check_recording(decoded.samples, decoded.sample_rate).ok


def test_decoding_ignores_the_name_and_refuses_what_is_not_audio(tmp_path: Path) -> None:
    with pytest.raises(DecodeError, match="not a recording"):
        decode_audio(b"I am a text file, whatever my name says.\n" * 40)
    with pytest.raises(DecodeError, match="empty"):
        decode_audio(b"")
    png = b"\x89PNG\r\n\x1a\n" + bytes(200)
    with pytest.raises(DecodeError):
        decode_audio(png)


def test_decoding_stops_after_the_limit(voice: tuple[np.ndarray, int]) -> None:
    samples, rate = voice
    long = np.resize(samples, rate * 600)  # ten minutes: decoded only as far as needed
    decoded = decode_audio(encode(long, rate, "flac"))
    assert decoded.cut
    assert decoded.samples.size / decoded.sample_rate < quality.MAX_SECONDS + 1
    assert [p.code for p in quality.check_recording(decoded.samples, decoded.sample_rate).problems] == ["too_long"]


def test_truncated_file_is_checked_as_far_as_it_goes(voice: tuple[np.ndarray, int]) -> None:
    samples, rate = voice
    data = encode(samples, rate, "mp3")
    decoded = decode_audio(data[: len(data) // 3])
    assert 1.0 < decoded.samples.size / decoded.sample_rate < 4.0


# -- names ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["Grandma", "Grand-mère", "Opa 2", "o'neil", "日本語の声", "a_b"])
def test_good_names(name: str) -> None:
    assert check_name(f"  {name} ") == name


@pytest.mark.parametrize(
    ("name", "code"),
    [("", "name_missing"), ("../etc/passwd", "name_chars"), ("a/b", "name_chars"), ("..", "name_chars"),
     (".hidden", "name_chars"), ("a\\b", "name_chars"), ("tab\there", "name_chars"), ("x" * 41, "name_long"),
     ("CON", "name_reserved"), ("nul", "name_reserved"), ("-dash", "name_chars"), ("a:b", "name_chars")],
)  # fmt: skip
def test_bad_names(name: str, code: str) -> None:
    with pytest.raises(StoreError) as caught:
        check_name(name)
    assert caught.value.code == code


# -- the store --------------------------------------------------------------------------

VOICES_FILE = """\
# Our voices. This comment stays.
default: alba
voices:
  # Grandpa, recorded at Christmas
  - name: grandpa
    audio: grandpa.wav
    description: Grandpa reading
  - marius   # a predefined voice, as a bare name
"""


def _store(tmp_path: Path, text: str = VOICES_FILE, models: int = 1) -> VoiceStore:
    folder = tmp_path / "voices"
    folder.mkdir(exist_ok=True)
    voices_file = folder / "voices.yaml"
    voices_file.write_text(text)
    labels = ["demo", "german"][:models]
    scopes = [None] if models == 1 else [
        ModelScope(names=frozenset({label}), first=index == 0, others=frozenset(set(labels) - {label}))
        for index, label in enumerate(labels)
    ]  # fmt: skip
    return VoiceStore(voices_file, folder, [StoreModel(label, scope) for label, scope in zip(labels, scopes)])


def test_adding_a_recording_writes_a_flac_and_an_entry_only_when_needed(tmp_path: Path, voice) -> None:
    store = _store(tmp_path)
    before = store.voices_file.read_text()
    path = store.add_recording(0, "Oma", "", *voice, taken=["alba", "grandpa", "marius"])
    assert path == store.voices_dir / "Oma.flac"
    data, rate = soundfile.read(path)
    assert rate == voice[1] and abs(len(data) / rate - 8.0) < 0.01
    assert store.voices_file.read_text() == before  # a folder voice needs no entry
    store.add_recording(0, "Opa", "Grandpa's brother", *voice, taken=["Oma"])
    text = store.voices_file.read_text()
    assert text.startswith(before.rstrip("\n").split("\n  - marius")[0])  # comments and order kept
    assert "# Grandpa, recorded at Christmas" in text and "- marius   # a predefined voice" in text
    parsed = parse_voices_file(store.voices_file)
    assert [(v.name, v.description) for v in parsed.voices][-1] == ("Opa", "Grandpa's brother")
    assert parsed.voices[-1].path == store.voices_dir / "Opa.flac"
    assert not [p for p in store.voices_dir.iterdir() if p.name.startswith(".")]  # no temporary left


def test_adding_refuses_a_taken_name_and_writes_nothing(tmp_path: Path, voice) -> None:
    store = _store(tmp_path)
    (store.voices_dir / "Oma.wav").write_bytes(b"RIFF")
    listing = sorted(store.voices_dir.iterdir())
    with pytest.raises(NameTaken):
        store.add_recording(0, "GRANDPA", "", *voice, taken=["grandpa"])
    with pytest.raises(NameTaken):
        store.add_recording(0, "oma", "", *voice, taken=[])  # a file of that name, any voice suffix
    with pytest.raises(StoreError):
        store.add_recording(0, "../evil", "", *voice, taken=[])
    assert sorted(store.voices_dir.iterdir()) == listing


def test_a_voice_of_another_model_goes_to_its_folder_with_model(tmp_path: Path, voice) -> None:
    store = _store(tmp_path, models=2)
    path = store.add_recording(1, "Oma", "", *voice, taken=[])
    assert path == store.voices_dir / "german" / "Oma.flac"
    entry = parse_voices_file(store.voices_file).voices[-1]
    assert (entry.name, entry.model, entry.path) == ("Oma", "german", path)


def test_edit_default_and_delete(tmp_path: Path, voice) -> None:
    store = _store(tmp_path)
    store.add_recording(0, "Oma", "", *voice, taken=[])
    oma = VoiceRef(0, "Oma", "recording")
    snapshot = store.snapshot()
    assert snapshot.place(oma).source == "folder"
    store.edit(oma, snapshot.version(oma), Settings("Grandma, slowly", {"length_scale": 1.2, "temperature": None}))
    entry = parse_voices_file(store.voices_file).voices[-1]
    assert (entry.name, entry.description, dict(entry.settings)) == ("Oma", "Grandma, slowly", {"length_scale": 1.2})
    assert store.snapshot().place(oma).source == "file"
    # A predefined voice written as a bare name becomes a mapping when given a setting.
    marius = VoiceRef(0, "marius", "predefined")
    store.edit(marius, store.snapshot().version(marius), Settings("", {"sentence_silence": 0.5}))
    assert "# a predefined voice" in store.voices_file.read_text()
    assert dict(parse_voices_file(store.voices_file).voices[1].settings) == {"sentence_silence": 0.5}
    with pytest.raises(StoreError) as caught:
        store.edit(marius, None, Settings("", {"length_scale": 7}))
    assert caught.value.code == "setting_bad" and "at most 2" in str(caught.value)
    # What the page offers: the add-on's temperature bound (the command line has none), and
    # no NaN or infinity (JSON from a script can hold them; they would break every synthesis).
    before = store.voices_file.read_text()
    for values, words in (({"temperature": 2.5}, "at most 2"), ({"temperature": float("inf")}, "finite"),
                          ({"length_scale": float("nan")}, "finite")):  # fmt: skip
        with pytest.raises(StoreError, match=words) as caught:
            store.edit(marius, None, Settings(None, values))
        assert caught.value.code == "setting_bad"
    assert store.voices_file.read_text() == before
    store.set_default(oma)
    assert parse_voices_file(store.voices_file).default == "Oma"
    with pytest.raises(StoreError):
        store.delete(marius, None)
    removed = store.delete(oma, store.snapshot().version(oma))
    assert removed == store.voices_dir / "Oma.flac" and not removed.exists()
    parsed = parse_voices_file(store.voices_file)
    assert parsed.default is None and [v.name for v in parsed.voices] == ["grandpa", "marius"]


def test_a_stale_version_is_refused_and_different_voices_both_keep(tmp_path: Path, voice) -> None:
    store = _store(tmp_path)
    grandpa, marius = VoiceRef(0, "grandpa", "recording"), VoiceRef(0, "marius", "predefined")
    shown = store.snapshot()  # what both tabs show
    store.edit(grandpa, shown.version(grandpa), Settings("Tab one", {}))
    with pytest.raises(Conflict):
        store.edit(grandpa, shown.version(grandpa), Settings("Tab two", {}))
    store.edit(marius, shown.version(marius), Settings("Tab two", {}))  # another voice: no conflict
    descriptions = {v.name: v.description for v in parse_voices_file(store.voices_file).voices}
    assert descriptions == {"grandpa": "Tab one", "marius": "Tab two"}
    # Many changes at once, from threads, to the latest file under one lock: none is lost.
    names = [f"voice{index}" for index in range(8)]
    threads = [threading.Thread(target=store.edit, args=(VoiceRef(0, name, "predefined"), None,
                                                          Settings(f"from thread {name}", {})))
               for name in names]  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    descriptions = {v.name: v.description for v in parse_voices_file(store.voices_file).voices}
    assert all(descriptions[name] == f"from thread {name}" for name in names)


def test_a_broken_voices_file_is_never_overwritten(tmp_path: Path, voice) -> None:
    store = _store(tmp_path, text="voices: [unclosed\n")
    with pytest.raises(StoreError) as caught:
        store.add_recording(0, "Oma", "", *voice, taken=[])
    assert caught.value.code == "file_invalid" and "line" in str(caught.value)
    assert store.voices_file.read_text() == "voices: [unclosed\n"
    assert not (store.voices_dir / "Oma.flac").exists()


def test_a_file_replaced_by_a_rename_is_seen_in_the_same_clock_tick(tmp_path: Path) -> None:
    """The page writes by renaming: the same size and date (the clock's tick) must still
    count as a change, or the next describe would not list it."""
    import os

    from wyoming_pocket_tts.web.store import write_atomically

    folder = tmp_path / "voices"
    folder.mkdir()
    voices_file = folder / "voices.yaml"
    voices_file.write_text("voices:\n- alba\n")
    config = VoiceLibraryConfig(data_dir=tmp_path, voices_file=voices_file, voices_dir=folder)
    before, stat = sources_signature(config), voices_file.stat()
    write_atomically(voices_file, b"voices:\n- erik\n")
    os.utime(voices_file, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert (voices_file.stat().st_size, voices_file.stat().st_mtime_ns) == (stat.st_size, stat.st_mtime_ns)
    assert sources_signature(config) != before


# -- settings ---------------------------------------------------------------------------


def test_web_settings() -> None:
    assert WebConfig("127.0.0.1:8080").loopback
    assert WebConfig("[::1]:8080").address == ("::1", 8080)
    with pytest.raises(SettingError, match="http-token"):
        WebConfig("0.0.0.0:8080")
    assert WebConfig("0.0.0.0:8080", token="a" * 16).address == ("0.0.0.0", 8080)
    assert WebConfig("0.0.0.0:8099", ingress_proxy="172.30.32.2")
    with pytest.raises(SettingError, match="16 to 256"):
        WebConfig("0.0.0.0:8080", token="short")
    with pytest.raises(SettingError):
        WebConfig("localhost:0")
    with pytest.raises(SettingError, match="needs --http"):
        web_config(None, "a" * 16, None)
    assert web_config(None, None, None) is None


def test_command_line(tmp_path: Path) -> None:
    parser = build_parser()
    config = config_from_args(parser.parse_args(["--data-dir", str(tmp_path), "--http", "127.0.0.1:8080"]))
    assert config.web == WebConfig("127.0.0.1:8080")
    args = parser.parse_args(["--data-dir", str(tmp_path), "--http", "0.0.0.0:8099", "--http-ingress"])
    assert config_from_args(args).web.ingress_proxy == "172.30.32.2"
    # The page's own voices file in the voices folder is read when --voices is not given.
    (tmp_path / "voices").mkdir()
    (tmp_path / "voices" / "voices.yaml").write_text("voices:\n")
    config = config_from_args(parser.parse_args(["--data-dir", str(tmp_path)]))
    assert config.library.voices_file == tmp_path / "voices" / "voices.yaml"


# -- strings ----------------------------------------------------------------------------


def test_every_string_the_page_uses_is_translated() -> None:
    import re
    import typing

    from wyoming_pocket_tts.core import VoiceKind
    from wyoming_pocket_tts.web.link import EncodingState
    from wyoming_pocket_tts.web.store import EDITABLE_SETTINGS

    english = Strings.load().by_language["en"]
    html = (STATIC / "index.html").read_text()
    script = (STATIC / "app.js").read_text()
    used = set(re.findall(r'data-i18n(?:-label)?="([a-z_]+)"', html))
    used |= set(re.findall(r'\bt\("([a-z_]+)"(?! \+)', script))
    # Keys made from a prefix and a value the server sends: every value is translated.
    prefixed = set(re.findall(r'\bt\("([a-z_]+_)" \+', script))
    assert prefixed == {"source_", "place_", "encoding_", "setting_"}, prefixed
    used |= {f"source_{kind}" for kind in typing.get_args(VoiceKind)}
    used |= {f"place_{source}" for source in ("file", "folder", "predefined", "command_line")}
    used |= {f"encoding_{state}" for state in typing.get_args(EncodingState)}
    used |= {f"setting_{key}_short" for key in EDITABLE_SETTINGS} | {f"setting_{key}" for key in EDITABLE_SETTINGS}
    used |= {f"problem_{code}" for code in ("too_short", "too_long", "silent", "little_speech", "too_quiet",
                                             "clipped")}  # fmt: skip
    assert not used - set(english), sorted(used - set(english))


def test_language_choice() -> None:
    strings = Strings({"en": {"a": "A", "b": "B"}, "de": {"a": "Ä"}})
    assert strings.choose("de-CH, en;q=0.5") == "de"
    assert strings.choose("fr, en;q=0.8, de;q=0.9") == "de"
    assert strings.choose("") == "en"
    assert strings.merged("de") == {"a": "Ä", "b": "B"}


# -- the routes, in process -------------------------------------------------------------


@dataclass
class FilesServer:
    """A `VoiceServer` whose voices are built from the files as the server builds them."""

    library: VoiceLibraryConfig
    fixed_default: str | None = None
    wyoming_uri: str = "tcp://127.0.0.1:1"
    refreshes: int = 0
    predefined: tuple[str, ...] = ("alba", "marius")
    events: list[str] = field(default_factory=list)

    @property
    def voices_file(self) -> Path:
        assert self.library.voices_file is not None
        return self.library.voices_file

    @property
    def voices_dir(self) -> Path:
        return self.library.effective_voices_dir

    def models(self) -> list[ServedModel]:
        return [ServedModel(0, "demo", "demo", ("en",), None, True)]

    def voices(self) -> list[ServedVoice]:
        catalog = build_catalog(self.library, self.predefined, "demo")
        return [ServedVoice(spec.name, 0, spec.name, voice_info(spec, ("en",)), index == 0, "ready")
                for index, spec in enumerate(catalog.voices)]  # fmt: skip

    async def refresh(self) -> None:
        self.refreshes += 1


@asynccontextmanager
async def page_client(tmp_path: Path, config: WebConfig) -> AsyncIterator[tuple[aiohttp.ClientSession, str, FilesServer]]:
    folder = tmp_path / "voices"
    folder.mkdir(exist_ok=True)
    voices_file = folder / "voices.yaml"
    if not voices_file.exists():
        voices_file.write_text("voices:\n")
    server = FilesServer(VoiceLibraryConfig(data_dir=tmp_path, voices_file=voices_file, voices_dir=folder))
    page = VoicesPage(config, server)
    test_server = TestServer(page.application(), host="127.0.0.1")
    await test_server.start_server()
    try:
        # unsafe=True: keep cookies of an IP address (127.0.0.1), as browsers do.
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as session:
            base = str(test_server.make_url("/"))
            yield session, base, server
    finally:
        await test_server.close()


async def _csrf(session: aiohttp.ClientSession, base: str, **kwargs) -> str:
    async with session.get(base, **kwargs) as response:
        assert response.status == 200, await response.text()
        html = await response.text()
    settings = json.loads(html.split('id="page-settings">', 1)[1].split("</script>", 1)[0])
    return settings["csrf"]


def _listing(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def test_routes_add_edit_default_delete(tmp_path: Path, voice) -> None:
    async def run() -> None:
        async with page_client(tmp_path, WebConfig("127.0.0.1:1")) as (session, base, server):
            csrf = await _csrf(session, base)
            form = aiohttp.FormData()
            form.add_field("name", "Oma")
            form.add_field("description", "Grandma")
            form.add_field("audio", encode(*voice, "m4a-aac"), filename="whatever.txt")
            async with session.post(base + "api/voices", data=form, headers={CSRF_HEADER: csrf}) as response:
                body = await response.json()
                assert response.status == 201, body
            names = [v["name"] for v in body["state"]["voices"]]
            assert names == ["alba", "Oma", "marius"] and server.refreshes == 1
            oma = next(v for v in body["state"]["voices"] if v["name"] == "Oma")
            assert (oma["source"], oma["kind"], oma["file"], oma["ownDescription"]) == ("file", "recording",
                                                                                         "Oma.flac", "Grandma")
            assert oma["deletable"] and oma["editable"] and oma["canBeDefault"]
            patch = {"version": oma["version"], "description": "Oma reads", "temperature": 0.5, "length_scale": None}
            async with session.patch(base + "api/voices/Oma", json=patch, headers={CSRF_HEADER: csrf}) as response:
                assert response.status == 200, await response.text()
            async with session.patch(base + "api/voices/Oma", json=patch, headers={CSRF_HEADER: csrf}) as response:
                assert response.status == 409 and (await response.json())["error"] == "changed"
            async with session.post(base + "api/default", json={"name": "oma"}, headers={CSRF_HEADER: csrf}) as r:
                state = (await r.json())["state"]
            assert state["voices"][0]["name"] == "Oma" and state["voices"][0]["default"]
            assert state["voices"][0]["settings"]["temperature"] == 0.5
            # A field left out is kept: only the setting sent changes.
            patch = {"version": state["voices"][0]["version"], "length_scale": 1.1}
            async with session.patch(base + "api/voices/Oma", json=patch, headers={CSRF_HEADER: csrf}) as response:
                state = (await response.json())["state"]
            assert (state["voices"][0]["ownDescription"], state["voices"][0]["settings"]) == (
                "Oma reads", {"length_scale": 1.1, "sentence_silence": None, "temperature": 0.5})
            version = state["voices"][0]["version"]
            async with session.delete(base + "api/voices/Oma", params={"version": version},
                                      headers={CSRF_HEADER: csrf}) as response:  # fmt: skip
                body = await response.json()
                assert response.status == 200 and body["removed"] == "Oma.flac", body
            assert [v["name"] for v in body["state"]["voices"]] == ["alba", "marius"]
            assert not (tmp_path / "voices" / "Oma.flac").exists()

    asyncio.run(run())


def test_routes_refuse_bad_input_and_write_nothing(tmp_path: Path, voice) -> None:
    async def run() -> None:
        async with page_client(tmp_path, WebConfig("127.0.0.1:1")) as (session, base, server):
            csrf = await _csrf(session, base)
            before = _listing(tmp_path / "voices")

            async def post(name: str, audio: bytes, filename: str = "a.wav") -> tuple[int, dict]:
                form = aiohttp.FormData()
                form.add_field("name", name)
                form.add_field("audio", audio, filename=filename)
                async with session.post(base + "api/voices", data=form, headers={CSRF_HEADER: csrf}) as response:
                    return response.status, await response.json()

            status, body = await post("Text", b"just text, named like a recording\n" * 30, "fake.wav")
            assert (status, body["error"]) == (415, "not_audio") and "not a recording" in body["message"]
            status, body = await post("../../etc/evil", encode(*voice, "wav"))
            assert (status, body["error"]) == (400, "name_chars")
            status, body = await post("Quiet", encode(np.zeros(RATE * 8, np.float32), RATE, "wav"))
            assert status == 422 and [p["code"] for p in body["check"]["problems"]] == ["silent"]
            status, body = await post("alba", encode(*voice, "wav"))
            assert (status, body["error"]) == (409, "name_taken")
            status, body = await post("Big", bytes(MAX_UPLOAD_BYTES + 1))
            assert (status, body["error"]) == (413, "too_large")
            async with session.post(base + "api/voices", data=b"x", headers={CSRF_HEADER: csrf}) as response:
                assert response.status == 400
            assert _listing(tmp_path / "voices") == before and server.refreshes == 0

    asyncio.run(run())


def test_guard(tmp_path: Path) -> None:
    async def run() -> None:
        # Loopback, no token: changes need the page's CSRF token and no foreign origin.
        async with page_client(tmp_path, WebConfig("127.0.0.1:1")) as (session, base, _):
            csrf = await _csrf(session, base)
            async with session.post(base + "api/default", json={"name": "alba"}) as response:
                assert response.status == 403 and (await response.json())["error"] == "csrf"
            headers = {CSRF_HEADER: csrf, "Origin": "http://evil.example"}
            async with session.post(base + "api/default", json={"name": "alba"}, headers=headers) as response:
                assert response.status == 403 and (await response.json())["error"] == "cross_site"
            headers = {CSRF_HEADER: csrf, "Sec-Fetch-Site": "cross-site"}
            async with session.post(base + "api/default", json={"name": "alba"}, headers=headers) as response:
                assert response.status == 403
            async with session.get(base + "api/state", headers={"Host": "evil.example:80"}) as response:
                assert response.status == 403 and (await response.json())["error"] == "bad_host"
            async with session.get(base + "static/..%2fapp.py") as response:
                assert response.status == 404
            async with session.get(base + "static/app.js") as response:
                assert response.status == 200 and "Content-Security-Policy" in response.headers
        # A token: nothing without it; ?token= once sets the session cookie.
        token = "s3cret-token-of-the-house"
        async with page_client(tmp_path, WebConfig("127.0.0.1:1", token=token)) as (session, base, _):
            async with session.get(base + "api/state") as response:
                assert response.status == 401 and (await response.json())["error"] == "token_needed"
            async with session.get(base) as response:
                assert response.status == 401 and "token" in await response.text()
            async with session.get(base, params={"token": "wrong-token-wrong-token"}) as response:
                assert response.status == 401
            async with session.get(base, params={"token": token}, allow_redirects=False) as response:
                assert response.status == 303 and SESSION_COOKIE in response.cookies
                assert token not in response.cookies[SESSION_COOKIE].value
            async with session.get(base + "api/state") as response:
                assert response.status == 200
            async with aiohttp.ClientSession() as other:
                async with other.get(base + "api/state", headers={"Authorization": f"Bearer {token}"}) as response:
                    assert response.status == 200
        # Ingress: only the proxy's address.
        async with page_client(tmp_path, WebConfig("127.0.0.1:1", ingress_proxy="172.30.32.2")) as (session, base, _):
            async with session.get(base + "api/state") as response:
                assert response.status == 403 and (await response.json())["error"] == "not_ingress"
        async with page_client(tmp_path, WebConfig("127.0.0.1:1", ingress_proxy="127.0.0.1")) as (session, base, _):
            headers = {"X-Ingress-Path": "/api/hassio_ingress/AbC-123", "Host": "homeassistant.local:8123"}
            async with session.get(base, headers=headers) as response:
                html = await response.text()
                assert response.status == 200 and '<base href="/api/hassio_ingress/AbC-123/">' in html
                assert "frame-ancestors 'self'" in response.headers["Content-Security-Policy"]
            headers["X-Ingress-Path"] = '/x"><script>alert(1)</script>'
            async with session.get(base, headers=headers) as response:
                assert '<base href="./">' in await response.text()

    asyncio.run(run())
