"""The voices page: an aiohttp application in the server's process, next to Wyoming.

Routes (every one behind `guard.Guard`; the page uses relative URLs only, so it works under
Home Assistant's ingress prefix):

    GET    /                     the page (static/index.html with its settings filled in)
    GET    /static/{name}        its script and style (a fixed list: no client path is a path)
    GET    api/state             the voices as `describe` lists them, and what the page needs
    POST   api/check             multipart `audio`: decoded and checked (quality.py), nothing kept
    POST   api/voices            multipart `audio`, `name`, `description`, `model`: a new voice
    PATCH  api/voices/{name}     JSON: description, length_scale, sentence_silence, temperature
    DELETE api/voices/{name}     ?version=...
    POST   api/default           JSON {"name", "version"}
    POST   api/preview           JSON {"voice", "text"}: a WAV stream (preview.py)

Errors are JSON `{"error": code, "message": English, "values": {...}}` with a 4xx/5xx status;
the page shows the translation of `code`. Every change is followed by a re-read of the
voices (`VoiceServer.refresh`), so the next `describe` lists it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any

from aiohttp import BodyPartReader, web
from wyoming.audio import AudioStart

from . import preview
from .config import WebConfig
from .decode import DecodeError, decode_audio
from .guard import CSRF_HEADER, Guard
from .link import ServedVoice, VoiceServer
from .quality import MAX_SECONDS, MIN_SECONDS, check_recording
from .store import (
    EDITABLE_SETTINGS,
    MAX_DESCRIPTION_LENGTH,
    MAX_NAME_LENGTH,
    Settings,
    Snapshot,
    StoreError,
    StoreModel,
    VoiceRef,
    VoiceStore,
    check_name,
    setting_bounds,
)
from .strings import Strings

_LOGGER = logging.getLogger(__name__)

# A 30 s recording is at most ~6 MB even as 48 kHz stereo WAV; Home Assistant's own HTTP
# server (which ingress passes through) takes 16 MiB at most.
MAX_UPLOAD_BYTES = 15 * 1024 * 1024
_MAX_FIELD_BYTES = 4096
_MAX_JSON_BYTES = 16 * 1024
# Previews running at once from the page (each is one Wyoming request, queued by the
# server's scheduler like any other).
MAX_PREVIEWS = 4
STATIC_FILES = {"app.js": "text/javascript", "style.css": "text/css"}
_INGRESS_PATH_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/_-.")
_SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Permissions-Policy": "microphone=(self)",
}


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, **values: Any) -> None:
        super().__init__(message)
        self.status, self.code, self.values = status, code, values

    def response(self) -> web.Response:
        return _error(self.status, self.code, str(self), self.values)


def _error(status: int, code: str, message: str, values: dict[str, Any] | None = None) -> web.Response:
    return web.json_response({"error": code, "message": message, "values": values or {}}, status=status)


@dataclass
class _Form:
    fields: dict[str, str]
    audio: bytes | None


class VoicesPage:
    """The page's handlers; one per server."""

    def __init__(self, config: WebConfig, server: VoiceServer) -> None:
        self.config = config
        self.server = server
        self.guard = Guard(config)
        self.strings = Strings.load()
        self.store = VoiceStore(server.voices_file, server.voices_dir,
                                [StoreModel(model.label, model.scope) for model in server.models()])  # fmt: skip
        # One decode at a time: uploads are CPU work, and must not crowd out synthesis.
        self._decoding = asyncio.Semaphore(1)
        self._previews = asyncio.Semaphore(MAX_PREVIEWS)
        # One change at a time, on the latest files (the store locks too; this keeps the
        # re-read after a change in order with the next change).
        self._changing = asyncio.Lock()

    # -- the application --------------------------------------------------------------------

    def application(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware], client_max_size=MAX_UPLOAD_BYTES + (1 << 20))
        app.on_response_prepare.append(self._headers)
        app.router.add_get("/", self.index)
        app.router.add_get("/static/{name}", self.static)
        app.router.add_get("/api/state", self.state)
        app.router.add_post("/api/check", self.check)
        app.router.add_post("/api/voices", self.add_voice)
        app.router.add_patch("/api/voices/{name}", self.edit_voice)
        app.router.add_delete("/api/voices/{name}", self.delete_voice)
        app.router.add_post("/api/default", self.set_default)
        app.router.add_post("/api/preview", self.preview)
        return app

    @web.middleware
    async def _middleware(self, request: web.Request,
                          handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:  # fmt: skip
        refusal = self.guard.refusal(request)
        if refusal is not None:
            response: web.StreamResponse = _error(refusal.status, refusal.code, refusal.message)
            if request.path == "/" and request.method == "GET":
                response = web.Response(status=refusal.status, text=refusal.message + "\n")
        else:
            try:
                response = await handler(request)
            except ApiError as err:
                response = err.response()
            except StoreError as err:
                response = _error(err.status, err.code, str(err), err.values)
            except web.HTTPException as err:
                if err.status < 400:
                    raise
                response = _error(err.status, "http", err.reason)
            except (ConnectionResetError, asyncio.CancelledError):
                raise
            except Exception as err:  # noqa: BLE001 - a bug must not cost more than this request
                _LOGGER.exception("voices page: %s %s failed", request.method, request.path)
                response = _error(500, "internal", f"the server failed: {type(err).__name__}: {err}")
        return response

    async def _headers(self, request: web.Request, response: web.StreamResponse) -> None:
        """Every response's security headers, set just before they are sent (a streamed
        preview's too)."""
        for key, value in _SECURITY_HEADERS.items():
            response.headers.setdefault(key, value)
        # Inside Home Assistant's frame when behind ingress (the same origin); nowhere else.
        ancestors = "'self'" if self.config.ingress_proxy else "'none'"
        response.headers.setdefault("Content-Security-Policy", (
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
            f"media-src 'self' blob:; connect-src 'self'; object-src 'none'; base-uri 'self'; "
            f"frame-ancestors {ancestors}; form-action 'self'"))  # fmt: skip
        if request.path.startswith("/api/"):
            response.headers.setdefault("Cache-Control", "no-store")

    # -- the page ---------------------------------------------------------------------------

    async def index(self, request: web.Request) -> web.StreamResponse:
        if self.guard.token_in_query(request):
            # Set the session cookie, and drop the token from the address bar and history.
            redirect = web.Response(status=303, headers={"Location": "./"})
            self.guard.set_session(redirect)
            return redirect
        language = self.strings.choose(request.headers.get("Accept-Language", ""))
        settings = {
            "csrf": self.guard.csrf_token,
            "csrfHeader": CSRF_HEADER,
            "language": language,
            "strings": self.strings.merged(language),
        }
        page = _resource("index.html").replace("{{lang}}", language).replace("{{base}}", _base_href(request))
        page = page.replace("{{settings}}", json.dumps(settings).replace("<", "\\u003c"))
        # Inside Home Assistant, whose own bar names the add-on: no second title bar.
        page = page.replace("{{body_class}}", "ingress" if self.config.ingress_proxy else "")
        response = web.Response(text=page, content_type="text/html", charset="utf-8")
        response.headers["Cache-Control"] = "no-store"
        return response

    async def static(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        content_type = STATIC_FILES.get(name)
        if content_type is None:
            raise ApiError(404, "not_found", "no such file")
        response = web.Response(text=_resource(name), content_type=content_type, charset="utf-8")
        response.headers["Cache-Control"] = "no-cache"
        return response

    async def state(self, request: web.Request) -> web.StreamResponse:
        # Re-read first, as a describe does (a stat per file): a change made by hand, or one
        # that raced with a model's load, shows here too.
        await self.server.refresh()
        return web.json_response(await self._state())

    async def _state(self) -> dict[str, Any]:
        voices = self.server.voices()
        models = list(self.server.models())
        listed = await asyncio.to_thread(self._describe_voices, voices, [model.label for model in models])
        return {
            "voices": listed,
            "models": [{"index": m.index, "name": m.name, "label": m.label, "languages": list(m.languages),
                        "loaded": m.loaded} for m in models],  # fmt: skip
            "fixedDefault": self.server.fixed_default,
            "voicesFile": str(self.server.voices_file),
            "voicesDir": str(self.server.voices_dir),
            "ingress": self.config.ingress_proxy is not None,
            "limits": {
                "minSeconds": MIN_SECONDS, "maxSeconds": MAX_SECONDS, "maxUploadBytes": MAX_UPLOAD_BYTES,
                "maxPreviewChars": preview.MAX_PREVIEW_CHARS, "maxNameLength": MAX_NAME_LENGTH,
                "maxDescriptionLength": MAX_DESCRIPTION_LENGTH,
            },  # fmt: skip
            "settings": {name: setting_bounds(name) for name in EDITABLE_SETTINGS},
        }

    def _describe_voices(self, voices: list[ServedVoice], labels: list[str]) -> list[dict[str, Any]]:
        """The voices as the page shows them, with where each comes from (reads the files:
        run it in a thread)."""
        snapshot: Snapshot | None = None
        problem: StoreError | None = None
        try:
            snapshot = self.store.snapshot()
        except StoreError as err:
            problem = err
        listed = []
        for voice in voices:
            ref = _ref(voice)
            place = snapshot.place(ref) if snapshot is not None else None
            listed.append({
                "name": voice.name,
                "description": voice.info.description,
                "ownDescription": snapshot.description(ref) if snapshot is not None else "",
                "kind": voice.info.kind,
                "source": place.source if place is not None else "unknown",
                "file": place.path.name if place is not None and place.path is not None else None,
                "model": labels[voice.model],
                "modelIndex": voice.model,
                "languages": list(voice.info.languages),
                "settings": {key: voice.info.settings.get(key) for key in EDITABLE_SETTINGS},
                "encoding": voice.encoding,
                "error": voice.error,
                "default": voice.default,
                "version": snapshot.version(ref) if snapshot is not None else None,
                "editable": place is not None and place.source != "command_line",
                "deletable": place is not None and place.deletable,
                "canBeDefault": voice.model == 0 and self.server.fixed_default is None and snapshot is not None,
            })  # fmt: skip
        if problem is not None:
            _LOGGER.warning("voices page: %s", problem)
        return listed

    # -- adding -----------------------------------------------------------------------------

    async def check(self, request: web.Request) -> web.StreamResponse:
        form = await _read_form(request)
        result, _ = await self._checked(form)
        return web.json_response({"check": result.as_json()})

    async def _checked(self, form: _Form) -> tuple[Any, Any]:
        if not form.audio:
            raise ApiError(400, "audio_missing", "no recording was sent")
        async with self._decoding:
            try:
                decoded = await asyncio.to_thread(decode_audio, form.audio)
            except DecodeError as err:
                raise ApiError(415, "not_audio", str(err)) from None
            result = await asyncio.to_thread(check_recording, decoded.samples, decoded.sample_rate)
        return result, decoded

    async def add_voice(self, request: web.Request) -> web.StreamResponse:
        form = await _read_form(request)
        models = list(self.server.models())
        try:
            model = int(form.fields.get("model", "0") or 0)
        except ValueError:
            model = -1
        if not 0 <= model < len(models):
            raise ApiError(400, "model_unknown", "no such model")
        # The name first: a bad name is said before the upload is decoded.
        name = check_name(form.fields.get("name", ""))
        result, decoded = await self._checked(form)
        if not result.ok:
            return web.json_response({"error": "check_failed", "message": "; ".join(p.message for p in result.problems),
                                      "values": {}, "check": result.as_json()}, status=422)  # fmt: skip
        taken = [voice.name for voice in self.server.voices()] + [voice.library_name for voice in self.server.voices()]
        async with self._changing:
            await asyncio.to_thread(self.store.add_recording, model, name, form.fields.get("description", ""),
                                    decoded.samples, decoded.sample_rate, taken)  # fmt: skip
            await self.server.refresh()
        return web.json_response({"name": name, "check": result.as_json(), "state": await self._state()}, status=201)

    # -- changing ---------------------------------------------------------------------------

    def _voice(self, name: str) -> ServedVoice:
        wanted = name.strip().lower()
        for voice in self.server.voices():
            if voice.name.lower() == wanted:
                return voice
        raise ApiError(404, "voice_unknown", f"there is no voice named {name!r} (deleted meanwhile?)", name=name)

    async def edit_voice(self, request: web.Request) -> web.StreamResponse:
        voice = self._voice(request.match_info["name"])
        body = await _read_json(request)
        values: dict[str, float | None] = {}
        for key in EDITABLE_SETTINGS:
            if key in body:
                value = body[key]
                values[key] = None if value in (None, "") else value
        # A field left out is left as it is (an API client changing one setting keeps the rest).
        description = str(body.get("description") or "") if "description" in body else None
        settings = Settings(description=description, values=values)
        async with self._changing:
            await asyncio.to_thread(self.store.edit, _ref(voice), _version(body.get("version")), settings)
            await self.server.refresh()
        return web.json_response({"state": await self._state()})

    async def delete_voice(self, request: web.Request) -> web.StreamResponse:
        voice = self._voice(request.match_info["name"])
        async with self._changing:
            removed = await asyncio.to_thread(self.store.delete, _ref(voice), _version(request.query.get("version")))
            await self.server.refresh()
        return web.json_response({"removed": removed.name if removed else None, "state": await self._state()})

    async def set_default(self, request: web.Request) -> web.StreamResponse:
        body = await _read_json(request)
        voice = self._voice(str(body.get("name", "")))
        if self.server.fixed_default is not None:
            raise ApiError(409, "default_fixed", "the default voice is set on the command line (--voice, or the "
                           "add-on's Default voice option): change it there", voice=self.server.fixed_default)
        async with self._changing:
            await asyncio.to_thread(self.store.set_default, _ref(voice))
            await self.server.refresh()
        return web.json_response({"state": await self._state()})

    # -- preview ----------------------------------------------------------------------------

    async def preview(self, request: web.Request) -> web.StreamResponse:
        body = await _read_json(request)
        voice = self._voice(str(body.get("voice", "")))
        text = " ".join(str(body.get("text", "")).split())
        if not text:
            raise ApiError(400, "text_missing", "type a sentence to hear")
        if len(text) > preview.MAX_PREVIEW_CHARS:
            raise ApiError(400, "text_long", f"a preview is at most {preview.MAX_PREVIEW_CHARS} characters",
                           max=preview.MAX_PREVIEW_CHARS)  # fmt: skip
        if self._previews.locked():
            raise ApiError(429, "previews_busy", "too many previews at once; wait for one to end")
        async with self._previews:
            stream = preview.speak(self.server.wyoming_uri, voice.name, text)
            try:
                start = await stream.__anext__()
            except preview.PreviewError as err:
                await stream.aclose()
                raise ApiError(502, "preview_failed", str(err)) from None
            except StopAsyncIteration:
                raise ApiError(502, "preview_failed", "the server sent no audio") from None
            assert isinstance(start, AudioStart)
            response = web.StreamResponse(headers={"Content-Type": "audio/wav", "Cache-Control": "no-store",
                                                   "X-Accel-Buffering": "no"})  # fmt: skip
            try:
                await response.prepare(request)
                await response.write(preview.wav_header(start.rate, start.width, start.channels))
                async for chunk in stream:
                    assert isinstance(chunk, bytes)
                    await response.write(chunk)
                await response.write_eof()
            except preview.PreviewError as err:
                _LOGGER.warning("voices page: preview of %r ended early: %s", voice.name, err)
            except (ConnectionResetError, asyncio.CancelledError):
                _LOGGER.debug("voices page: the browser left during a preview")
                raise
            finally:
                await stream.aclose()
            return response


def _ref(voice: ServedVoice) -> VoiceRef:
    return VoiceRef(voice.model, voice.library_name, voice.info.kind)


def _version(value: Any) -> str | None:
    return str(value) if value else None


def _resource(name: str) -> str:
    return resources.files(__package__).joinpath("static", name).read_text(encoding="utf-8")


def _base_href(request: web.Request) -> str:
    """The page's own address: under ingress, Home Assistant's prefix for it."""
    prefix = request.headers.get("X-Ingress-Path", "").rstrip("/")
    if prefix and prefix.startswith("/") and set(prefix) <= _INGRESS_PATH_CHARS and ".." not in prefix:
        return prefix + "/"
    return "./"


async def _read_form(request: web.Request) -> _Form:
    """A multipart form: short text fields and one `audio` file, within the upload limit
    (checked as the bytes arrive, whatever Content-Length says)."""
    if request.content_length is not None and request.content_length > MAX_UPLOAD_BYTES + _MAX_FIELD_BYTES * 8:
        raise _too_large()
    if not request.content_type.startswith("multipart/"):
        raise ApiError(400, "bad_request", "send the recording as multipart/form-data")
    fields: dict[str, str] = {}
    audio: bytes | None = None
    reader = await request.multipart()
    while (part := await reader.next()) is not None:
        if not isinstance(part, BodyPartReader):
            raise ApiError(400, "bad_request", "nested multipart is not accepted")
        if part.name == "audio":
            data = bytearray()
            while chunk := await part.read_chunk(1 << 16):
                data += chunk
                if len(data) > MAX_UPLOAD_BYTES:
                    raise _too_large()
            audio = bytes(data)
        elif part.name in ("name", "description", "model"):
            data = bytearray()
            while chunk := await part.read_chunk(1024):
                data += chunk
                if len(data) > _MAX_FIELD_BYTES:
                    raise ApiError(400, "field_long", f"the field {part.name} is too long")
            fields[part.name] = data.decode("utf-8", errors="replace")
        else:
            raise ApiError(400, "bad_request", f"unexpected field {str(part.name)[:40]!r}")
    return _Form(fields, audio)


def _too_large() -> ApiError:
    return ApiError(413, "too_large", f"the file is larger than {MAX_UPLOAD_BYTES // (1024 * 1024)} MB; a "
                    f"recording of at most {MAX_SECONDS:g} s is far smaller (save it as FLAC, MP3 or M4A)",
                    max_mb=MAX_UPLOAD_BYTES // (1024 * 1024))  # fmt: skip


async def _read_json(request: web.Request) -> dict[str, Any]:
    if request.content_length is not None and request.content_length > _MAX_JSON_BYTES:
        raise ApiError(413, "too_large_json", "the request is too large")
    data = await request.content.read(_MAX_JSON_BYTES + 1)
    if len(data) > _MAX_JSON_BYTES:
        raise ApiError(413, "too_large_json", "the request is too large")
    try:
        body = json.loads(data or b"{}")
    except ValueError:
        raise ApiError(400, "bad_request", "the request is not JSON") from None
    if not isinstance(body, dict):
        raise ApiError(400, "bad_request", "the request is not a JSON object")
    return body


@dataclass
class RunningPage:
    runner: web.AppRunner
    url: str

    async def stop(self) -> None:
        await self.runner.cleanup()


async def start_page(config: WebConfig, server: VoiceServer) -> RunningPage:
    """Listen on `config.listen`; raises OSError if the address cannot be used."""
    page = VoicesPage(config, server)
    runner = web.AppRunner(page.application(), access_log=None, handle_signals=False)
    await runner.setup()
    host, port = config.address
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}/"
    _LOGGER.info("Voices page on %s (%s)", url, "Home Assistant ingress only" if config.ingress_proxy else
                 "token required" if config.token else "this machine only")  # fmt: skip
    return RunningPage(runner, url)
