"""One Wyoming connection: describe, one-shot synthesize, and streamed synthesize.

The read loop never waits for audio: each response (one-shot or streamed) runs in its own
task, so the loop keeps reading while frames are produced. That is what lets a streamed
request start speaking its first sentence while later text chunks still arrive, and lets a
disconnect (end of stream on the socket) cancel the synthesis within one frame. Responses
on one connection are chained, so a client that pipelines two requests gets them in order.

What one connection may cost is bounded:

* Pipelining: at most ``max_queued`` requests (the one being answered plus the ones waiting
  behind it, 2 by default: all a real client needs); one more gets an ``error``. When the
  connection closes, every queued request is cancelled, not only the last.
* A client that stops reading: each audio chunk is written and drained; a write not drained
  within ``STALL_GRACE_S`` means the client is behind, so the reply gives its scheduler slot
  back while it waits (its worker is paused on the bounded hand-off meanwhile) and takes it
  again, as a continuation, once the client reads. A client that takes nothing for
  ``stall_timeout`` seconds is dropped and its synthesis cancelled. The audio ahead of the
  client is bounded by the hand-off (12 frames) plus the write buffers (set where the server
  listens, see connections.py).
* A wait for a synthesis slot longer than ``slot_wait`` ends with a "server busy" ``error``.
* A connection with nothing in flight that sends no complete event for ``idle_timeout``
  seconds is closed (an idle socket, or a header that never ends). While a request is in
  flight the clock does not run: a streamed request may wait long for its LLM's next words.
  Except for a stream that got no word yet: it ends ``idle_timeout`` after its start.
* Streamed text: at most MAX_PENDING_TEXT_CHARS without a sentence end, and at most
  MAX_QUEUED_TEXT_CHARS cut into sentences and waiting to be spoken. A long text (an event
  of a megabyte) is parsed and cut in a worker thread, never on the event loop (see
  text_work.py), and that work stops when the client leaves.

Any protocol violation or failed synthesis ends the connection the same way: an `error`
event with a readable text, then the socket closes (Home Assistant ignores `error` events
but stops reading at the close). Nothing escapes to the server. An event type we do not
know is dropped (the wyoming library asks servers to, so that clients can add events).

A request with `text_format: ssml` (or a one-shot text that starts with `<speak`) is read
as SSML (`text/ssml.py`) and spoken by `_respond_ssml` (`ssml_reply.py`).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Coroutine, Iterable
from contextlib import aclosing
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

import numpy as np
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error
from wyoming.event import Event
from wyoming.info import Describe
from wyoming.ping import Ping, Pong
from wyoming.server import AsyncEventHandler
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeStopped,
)

from ..audio import ReplyAudio
from ..core import EngineError, SessionLike, TextError, VoiceError
from ..settings import default
from ..text import SentenceSplitter, normalize
from ..text.ssml import Pause, Segment, SsmlReader
from .logsafe import clip, without_paths
from .protocol import Limits, ProtocolError, read_event
from .scheduler import Priority, Slot, SlotBusy
from .loading import LoadFailed, error_text
from .service import Backend, ReplyOptions, TtsService
from .ssml_reply import ReplySpeaker, ReplyVoices
from .synthesis import FrameIterator, stream_pcm, to_pcm16
from .text_work import INLINE_TEXT_CHARS, TextQueue, cut_text, off_loop

_LOGGER = logging.getLogger(__name__)
T = TypeVar("T")

# How long we try to deliver an `error` event to a client that does not read.
ERROR_WRITE_TIMEOUT_S = 2.0
# Streamed text not yet released as a sentence (no sentence end seen yet).
MAX_PENDING_TEXT_CHARS = 100_000
# Streamed text cut into sentences and not yet spoken (with an overhead per sentence, see
# text_work.piece_chars): about an hour of speech. An LLM writes faster than it is spoken,
# so a whole answer may wait here; a client sending far more is refused.
MAX_QUEUED_TEXT_CHARS = 50_000
# The longest one-shot text a client may send (about half an hour of speech). Checked on
# the text as sent: reading numbers and units as words makes it longer, which the engine
# accepts (its own bound, engine.model.MAX_TEXT_CHARS, is on the words).
MAX_REQUEST_CHARS = 20_000
SAMPLE_WIDTH = 2
CHANNELS = 1
# A write not drained within this time means the client is behind: give the slot back.
# Long enough that a short network hiccup does not cost a trip through the queue.
STALL_GRACE_S = 0.25
# More than the JSON header and data of an audio chunk take (about 150 bytes).
CHUNK_HEADER_BYTES = 512
# How long a closing connection may take to send what is still buffered for it (the rest
# of its last event); a client that does not take it by then is cut off.
CLOSE_FLUSH_S = 1.0


class RequestError(Exception):
    """A request that cannot be served; the message goes to the client's `error` event."""


class ClientStalled(Exception):
    """The client took no audio for the stall timeout; the message says so."""


@dataclass
class _TextStream:
    """A streamed request whose text is still arriving."""

    request_id: int
    voice_name: str | None
    # Knows the language's abbreviations, ordinals and list markers ("am 3. März", "1. Milk").
    splitter: SentenceSplitter
    # The sentences (SSML: the segments) ready to speak; None ends them. Bounded by the
    # handler (MAX_QUEUED_TEXT_CHARS).
    sentences: TextQueue = field(default_factory=TextQueue)
    chars: int = 0
    # Reads the text as SSML (`text_format: ssml`); it has a splitter per span of its own.
    ssml: SsmlReader | None = None
    # Whether any text with a letter or a digit came: a stream without is closed at the
    # idle timeout, counted from its start (see _next_event).
    has_words: bool = False
    started: float = field(default_factory=time.monotonic)
    # Its response task (what the idle clock looks at).
    response: asyncio.Task[None] | None = None

    def cut(self, text: str, cancel: threading.Event) -> list[str | Segment]:
        """More text: its complete sentences (or SSML segments), to `queue`. May run in a
        worker thread (long text, see text_work); stops early past the stream's bounds."""
        room = MAX_QUEUED_TEXT_CHARS - self.sentences.chars
        return cut_text(self.ssml or self.splitter, text, cancel, room, MAX_PENDING_TEXT_CHARS)

    def queue(self, pieces: list[str | Segment]) -> None:
        for piece in pieces:
            self.sentences.put_nowait(piece)

    @property
    def pending_chars(self) -> int:
        return (self.ssml or self.splitter).pending_chars

    def rest(self) -> list[str | Segment]:
        """The text is complete: what was held back (to `end`). SSML's may take a while
        (~40 ms for 100,000 characters): it may run in a worker thread."""
        if self.ssml is not None:
            return [*self.ssml.finish()]
        return [sentence] if (sentence := self.splitter.finish()) else []

    def end(self, rest: list[str | Segment]) -> None:
        """What was held back goes to the queue, then the end."""
        self.queue(rest)
        self.sentences.put_nowait(None)


@dataclass
class _Timing:
    """Per-response figures for the log."""

    start: float = field(default_factory=time.monotonic)
    first_audio: float | None = None
    frames: int = 0
    # Samples sent: frames times the length scale, plus the pauses.
    samples: int = 0


class PocketTtsEventHandler(AsyncEventHandler):
    """Wyoming event handler for one client connection."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        service: TtsService,
        limits: Limits | None = None,
        *,
        # Their meaning and defaults: the settings of the same names (wyoming_pocket_tts.settings).
        stall_timeout: float = default("stall_timeout"),
        slot_wait: float = default("max_queue_wait"),
        max_queued: int = default("max_queued_requests"),
        idle_timeout: float | None = default("idle_timeout"),
    ) -> None:
        super().__init__(reader, writer)
        if max_queued < 1:
            raise ValueError("max_queued must be at least 1")
        self._service = service
        self._limits = limits or Limits()
        self._stall_timeout = stall_timeout
        self._slot_wait = slot_wait
        self._max_queued = max_queued
        self._idle_timeout = idle_timeout
        self._stream: _TextStream | None = None
        # Every response not yet finished, in order; each waits for the one before it.
        self._responses: list[asyncio.Task[None]] = []
        # When the connection last did something (an event, or a response ending).
        self._active_at = time.monotonic()
        self._closing = False
        self._peer = writer.get_extra_info("peername") or "stdio"

    # -- connection ------------------------------------------------------------------------

    async def run(self) -> None:
        """Read events until the client leaves, a request fails, or the server stops.

        Replaces the base class loop to read with limits and report bad input to the client.
        """
        self._is_running = True
        task = asyncio.current_task()
        if task is not None:
            self._service.connections.add(task)
        try:
            while self._is_running and not self._closing:
                try:
                    event = await self._next_event()
                except ProtocolError as err:
                    await self._fail(str(err))
                    break
                if event is None:
                    break
                self._active_at = time.monotonic()
                if not await self.handle_event(event):
                    break
        except (ConnectionError, OSError) as err:
            _LOGGER.debug("Connection %s lost: %s", self._peer, err)
        except Exception as err:  # noqa: BLE001 - a bug must cost one connection, no more
            if isinstance(err.__cause__ or err.__context__, (ConnectionError, OSError)):
                # Raised while the socket was failing under it (a client gone during
                # shutdown): the connection's end, not a bug worth a traceback.
                _LOGGER.info("Connection %s lost: %s", self._peer, error_text(err))
            else:
                _LOGGER.exception("Unexpected error on connection %s", self._peer)
            await self._fail(f"internal error: {error_text(err)}")
        finally:
            try:
                await self.disconnect()
                await self._close()
            finally:
                self._service.connections.discard(task)  # type: ignore[arg-type]

    async def _close(self) -> None:
        """Close the connection once what is buffered for it has been sent.

        `close()` alone only starts that: at shutdown the process exits right after the
        connections end, and the client would get the last event cut in the middle.
        Nothing buffered (the usual end: the client left): closed at once, so that its place
        under --max-connections is free for the next client without a wait.
        """
        buffered = self.writer.transport.get_write_buffer_size()
        self.writer.close()
        if not buffered:
            return
        try:
            await asyncio.wait_for(self.writer.wait_closed(), CLOSE_FLUSH_S)
        except asyncio.TimeoutError:
            self.writer.transport.abort()  # the client does not read: drop its buffer
        except (ConnectionError, OSError):
            pass  # gone already

    async def _next_event(self) -> Event | None:
        """The next event; ProtocolError if the connection idles past the idle timeout.

        The clock runs only while no response is in flight, from the connection's last
        activity; it covers a socket that sends nothing and a header that never ends.
        No clock for ``idle_timeout=None`` (stdio, where the parent process decides).
        """
        read = asyncio.ensure_future(read_event(self.reader, self._limits, self._off_loop))
        try:
            while True:
                live = self._live_responses()
                wordless = self._wordless_stream(live)
                if self._idle_timeout is None:  # stdio: the parent process decides
                    await asyncio.wait([read, *live], return_when=asyncio.FIRST_COMPLETED)
                elif wordless is not None:
                    # Its response waits for text that may never come: the clock runs
                    # from its start (events without text do not reset it).
                    left = wordless.started + self._idle_timeout - time.monotonic()
                    if left <= 0:
                        raise ProtocolError(
                            f"the streamed request got no text in {self._idle_timeout:g} s: closing the connection"
                        )
                    await asyncio.wait([read, *live], timeout=left, return_when=asyncio.FIRST_COMPLETED)
                elif live:
                    await asyncio.wait([read, *live], return_when=asyncio.FIRST_COMPLETED)
                else:
                    left = self._active_at + self._idle_timeout - time.monotonic()
                    if left <= 0:
                        raise ProtocolError(
                            f"no complete event in {self._idle_timeout:g} s: closing the idle connection"
                        )
                    await asyncio.wait([read], timeout=left)
                if read.done():
                    return read.result()
        finally:
            if not read.done():
                read.cancel()

    def _wordless_stream(self, live: list[asyncio.Task[None]]) -> _TextStream | None:
        """The open stream, if it is all that is in flight and no words came for it yet."""
        stream = self._stream
        if stream is None or stream.has_words or live != [stream.response]:
            return None
        return stream

    async def _off_loop(self, work: Callable[[], T]) -> T:
        """`work()` in the service's text worker (see text_work.off_loop)."""
        return await off_loop(self._service.text_executor, lambda _cancel: work(), self._gone)

    def _gone(self) -> bool:
        """Whether the client has left (or the connection is closing): work for it stops."""
        return self._closing or self.writer.is_closing() or self.reader.at_eof()

    async def _cut(self, stream: _TextStream, text: str) -> None:
        """Streamed text into sentences, off the loop if long; RequestError past a bound."""
        stream.chars += len(text)
        stream.has_words = stream.has_words or any(char.isalnum() for char in text)
        if len(text) <= INLINE_TEXT_CHARS:
            pieces = stream.cut(text, threading.Event())
        else:
            pieces = await off_loop(self._service.text_executor, partial(stream.cut, text), self._gone)
        stream.queue(pieces)
        if stream.pending_chars > MAX_PENDING_TEXT_CHARS:
            raise RequestError(f"streamed text has no sentence end in {MAX_PENDING_TEXT_CHARS} characters")
        if stream.sentences.chars > MAX_QUEUED_TEXT_CHARS:
            raise RequestError(
                f"streamed text arrives much faster than it is spoken: more than {MAX_QUEUED_TEXT_CHARS} "
                "characters wait to be spoken"
            )

    def _live_responses(self) -> list[asyncio.Task[None]]:
        self._responses = [task for task in self._responses if not task.done()]
        return self._responses

    async def _cancel_responses(self, keep: asyncio.Task[Any] | None = None) -> None:
        """Cancel every queued response (but `keep`) and wait for their cleanup."""
        doomed = [task for task in self._live_responses() if task is not keep]
        for task in doomed:
            task.cancel()
        if doomed:
            # Let each response's cleanup (cancel event, worker join) run before we return.
            await asyncio.wait(doomed)

    async def disconnect(self) -> None:
        """The client went away (or we closed): cancel everything it asked for."""
        if self._live_responses():
            _LOGGER.info("Client %s disconnected: cancelling its synthesis", self._peer)
            await self._cancel_responses()

    async def write_event(self, event: Event) -> None:
        """Send an event, unless the connection is closing (the client left, or the server
        stops and closed it): the reply ends there, as for a client that went away.

        Python 3.11's socket transport, once a closing connection has sent its buffer, fails
        on a further write with an AttributeError logged as a fatal error.
        """
        if self.writer.is_closing():
            raise ConnectionResetError("the connection is closing")
        await super().write_event(event)

    async def _fail(self, message: str) -> None:
        """Send `error` (without the server's paths: see logsafe.without_paths), then close
        the connection. Safe to call from a response task."""
        if self._closing:
            return
        self._closing = True
        _LOGGER.warning("Client %s: %s", self._peer, clip(message, 200))
        await self._cancel_responses(keep=asyncio.current_task())
        try:
            error = Error(text=without_paths(message)).event()
            await asyncio.wait_for(self.write_event(error), ERROR_WRITE_TIMEOUT_S)
        except asyncio.TimeoutError:
            # The client does not read: drop what is buffered for it (close() would keep
            # the socket and the buffer until it reads).
            self.writer.transport.abort()
        except (ConnectionError, OSError):
            pass  # gone, or closing already (what is buffered for it still goes out)
        # Closing the transport feeds end-of-stream to our reader, which ends run().
        self.writer.close()

    # -- events ----------------------------------------------------------------------------

    async def handle_event(self, event: Event) -> bool:
        if self._closing:
            return False  # an error was sent; nothing more is read from this client
        try:
            return await self._dispatch(event)
        except RequestError as err:
            await self._fail(str(err))
            return False

    async def _dispatch(self, event: Event) -> bool:
        if Describe.is_type(event.type):
            # Every voice that will be served, even while the model loads (see describe()).
            info = await self._service.describe()
            await self.write_event(info.event())
            return True

        if Synthesize.is_type(event.type):
            if self._stream is not None:
                # The compatibility copy of the whole text that HA sends inside a stream.
                _LOGGER.debug("Ignoring synthesize inside a stream (compatibility copy)")
                return True
            text = _text_field(event, "synthesize")
            if not text.strip():
                raise RequestError("empty text: nothing to synthesize")
            if len(text) > MAX_REQUEST_CHARS:
                raise RequestError(
                    f"the text has {len(text)} characters; at most {MAX_REQUEST_CHARS} are spoken at once"
                )
            voice_name = self._requested_voice(event)
            self._check_queue()
            request_id = self._service.next_request_id()
            ssml = _is_ssml(event, text)
            _LOGGER.info(
                "Request %d from %s: one-shot%s, %d characters, voice %s",
                request_id, self._peer, " SSML" if ssml else "", len(text), clip(voice_name or "(default)"),
            )  # fmt: skip
            if ssml:
                self._start_response(lambda: self._respond_ssml_text(request_id, text, voice_name))
            else:
                self._start_response(lambda: self._respond_one_shot(request_id, text, voice_name))
            return True

        if SynthesizeStart.is_type(event.type):
            if self._stream is not None:
                raise RequestError("synthesize-start received while a streamed request is open")
            self._check_queue()
            voice_name = self._requested_voice(event)
            # The language of the voice's model (every language's rules if not known yet).
            splitter = SentenceSplitter(self._service.text_language(voice_name))
            stream = _TextStream(self._service.next_request_id(), voice_name, splitter)
            if _is_ssml(event, None):
                stream.ssml = self._ssml_reader(voice_name)
            _LOGGER.info(
                "Request %d from %s: streamed%s, voice %s",
                stream.request_id, self._peer, " SSML" if stream.ssml else "", clip(stream.voice_name or "(default)"),
            )  # fmt: skip
            self._stream = stream
            if stream.ssml is not None:
                stream.response = self._start_response(lambda: self._respond_ssml(
                    stream.request_id, stream.sentences, voice_name, streamed=True))  # fmt: skip
            else:
                stream.response = self._start_response(lambda: self._respond_streamed(stream))
            return True

        if SynthesizeChunk.is_type(event.type):
            stream = self._require_stream("synthesize-chunk")
            await self._cut(stream, _text_field(event, "synthesize-chunk"))
            return True

        if SynthesizeStop.is_type(event.type):
            stream = self._require_stream("synthesize-stop")
            _LOGGER.debug("Request %d: text complete, %d characters", stream.request_id, stream.chars)
            short = stream.pending_chars <= INLINE_TEXT_CHARS
            stream.end(stream.rest() if short else await self._off_loop(stream.rest))
            self._stream = None
            return True

        if Ping.is_type(event.type):
            await self.write_event(Pong(text=Ping.from_event(event).text).event())
            return True

        if event.type == "select-program":
            # We serve a single program; clients such as wyoming-bench may still select it.
            return True

        # Servers drop events they do not know, so that newer clients can add events; it
        # was read within the limits like any other (protocol.read_event).
        _LOGGER.debug("Client %s: ignoring an event of unknown type %s", self._peer, clip(repr(event.type)))
        return True

    def _requested_voice(self, event: Event) -> str | None:
        """The voice a request names; for one that gives only a language, that language's
        voice (TtsService.voice_for_language); None: the default voice."""
        name = _voice_name(event)
        language = _voice_language(event)
        if name is None and language is not None:
            name = self._service.voice_for_language(language)
            _LOGGER.debug("Client %s asks for language %s: voice %s", self._peer, clip(repr(language)),
                          clip(name or "(default)"))  # fmt: skip
        return name

    def _ssml_reader(self, voice_name: str | None) -> SsmlReader:
        """An SSML reader with the request's voice's language (say-as, sentence ends) and
        the languages of the voices it may switch to."""
        languages = self._service.voice_languages(voice_name)
        first = self._service.text_language(voice_name) or (languages[0] if languages else "en")
        return SsmlReader(first, lambda name: next(iter(self._service.voice_languages(name)), None))

    async def _respond_ssml_text(self, request_id: int, text: str, voice_name: str | None) -> None:
        """A one-shot SSML text, read (off the loop: ~1 ms per 1,000 characters) into
        segments queued as a stream's would be, then spoken."""
        reader = self._ssml_reader(voice_name)
        segments: asyncio.Queue[str | Segment | None] = asyncio.Queue()
        for segment in await self._off_loop(lambda: [*reader.add_chunk(text), *reader.finish()]):
            segments.put_nowait(segment)
        segments.put_nowait(None)
        await self._respond_ssml(request_id, segments, voice_name)

    def _require_stream(self, event_type: str) -> _TextStream:
        if self._stream is None:
            raise RequestError(f"{event_type} received without synthesize-start")
        return self._stream

    def _check_queue(self) -> None:
        if len(self._live_responses()) >= self._max_queued:
            raise RequestError(
                f"too many requests queued on this connection (limit {self._max_queued}): "
                "wait for a reply to end before sending the next request"
            )

    def _start_response(self, make: Callable[[], Coroutine[Any, Any, None]]) -> asyncio.Task[None]:
        live = self._live_responses()
        previous = live[-1] if live else None

        async def chained() -> None:
            if previous is not None:
                await asyncio.wait([previous])
            await self._guard(make())

        task = asyncio.create_task(chained(), name=f"response to {self._peer}")
        task.add_done_callback(self._response_done)
        live.append(task)
        return task

    def _response_done(self, _task: asyncio.Task[None]) -> None:
        self._active_at = time.monotonic()  # the idle clock starts when the last reply ends

    async def _guard(self, response: Coroutine[Any, Any, None]) -> None:
        """Run a response; turn its failures into `error` + close."""
        try:
            await response
        except RequestError as err:
            await self._fail(str(err))
        except LoadFailed as err:
            await self._fail(f"model not available: {err}")
        except SlotBusy as err:
            await self._fail(f"server busy: {err}; try again later")
        except ClientStalled as err:
            await self._fail(str(err))
        except (ConnectionError, OSError) as err:
            # The client is gone; nobody to tell.
            _LOGGER.info("Client %s went away during synthesis (%s)", self._peer, err)
            self.writer.close()
        except asyncio.CancelledError:
            raise
        except Exception as err:  # noqa: BLE001 - one failed synthesis must not hurt others
            if isinstance(err, VoiceError):
                await self._fail(f"voice unavailable: {err.public or error_text(err)}")
            elif isinstance(err, EngineError):
                await self._fail(f"synthesis failed: {error_text(err)}")
            else:
                _LOGGER.exception("Synthesis failed for %s", self._peer)
                await self._fail(f"synthesis failed: internal error ({error_text(err)})")

    # -- responses -------------------------------------------------------------------------

    async def _respond_one_shot(self, request_id: int, text: str, voice_name: str | None) -> None:
        timing = _Timing()
        # The voice's model (requests that arrive while it loads simply wait for it), held
        # until the `finally` below releases it: it is not unloaded during the synthesis.
        backend, resolved, voice = await self._service.acquire_voice(voice_name)
        _LOGGER.debug("Request %d: voice %s ready after %.0f ms", request_id, clip(resolved),
                      (time.monotonic() - timing.start) * 1000)  # fmt: skip
        cancel = threading.Event()
        settings = backend.settings_for(resolved)
        options, reply, language = settings.options, settings.reply, settings.language
        shaper = _reply_audio(backend, reply)

        def frames() -> FrameIterator:
            spoken = _spoken(text, language, reply)
            if shaper.sentence_silence == 0:
                return shaper.sentence(backend.model.synthesize(spoken, voice, options, cancel))
            session = backend.model.session(voice, options, cancel)
            return _by_sentence(shaper, session, _sentences(spoken, language))

        try:
            async with self._service.scheduler.slot(Priority.NEW, self._slot_wait) as slot:
                await self._send_frames(backend, frames, cancel, timing, slot)
        except TextError as err:
            raise RequestError(f"cannot speak this text: {error_text(err)}") from None
        finally:
            cancel.set()
            self._service.release(backend)
        if timing.frames == 0:
            raise RequestError("the engine produced no audio for this text")
        await self._send_audio(backend, shaper.finish(), timing)
        await self.write_event(AudioStop().event())
        self._log_done(request_id, resolved, backend, timing)

    async def _respond_streamed(self, stream: _TextStream) -> None:
        # Fetch (maybe load its model, encode) the voice while the first sentence is still
        # being written; the model is held until the `finally` below releases it.
        timing = _Timing()  # from synthesize-start: loading the voice's model counts, as for one-shot
        backend, resolved, voice = await self._service.acquire_voice(stream.voice_name)
        cancel = threading.Event()
        settings = backend.settings_for(resolved)
        options, reply, language = settings.options, settings.reply, settings.language
        # One for the whole reply: the stretch runs on across sentences, without a seam.
        shaper = _reply_audio(backend, reply)
        session: Any = None

        def speak(sentence: str) -> Callable[[], FrameIterator]:
            def frames() -> FrameIterator:
                nonlocal session
                if session is None:
                    # One session per response: its decoder state carries across sentences.
                    session = backend.model.session(voice, options, cancel)
                return shaper.sentence(session.speak(_spoken(sentence, language, reply)))

            return frames

        sentence: str | None = ""
        try:
            while (sentence := await stream.sentences.get()) is not None:
                # A reply already playing is never refused; a new one waits a bounded time.
                if timing.frames:
                    wait: tuple[Priority, float | None] = (Priority.CONTINUATION, None)
                else:
                    wait = (Priority.NEW, self._slot_wait)
                async with self._service.scheduler.slot(*wait) as slot:
                    # Keep the slot while the next sentence is already here: releasing it
                    # would let a waiting request in and open a gap in this reply. It is
                    # given up only while we wait for more text.
                    while sentence is not None:
                        _LOGGER.debug("Request %d: sentence %s", stream.request_id, clip(repr(sentence)))
                        try:
                            await self._send_frames(backend, speak(sentence), cancel, timing, slot)
                        except TextError as err:
                            # One unpronounceable sentence ("---") must not end the reply.
                            _LOGGER.warning("Request %d: skipping a sentence: %s",
                                            stream.request_id, clip(error_text(err), 200))  # fmt: skip
                        if stream.sentences.empty():
                            break
                        sentence = stream.sentences.get_nowait()
                if sentence is None:
                    break
        finally:
            cancel.set()
            self._service.release(backend)
        if timing.frames == 0:
            raise RequestError("empty text: nothing to synthesize in the streamed request")
        await self._send_audio(backend, shaper.finish(), timing)
        await self.write_event(AudioStop().event())
        await self.write_event(SynthesizeStopped().event())
        self._log_done(stream.request_id, resolved, backend, timing)

    async def _respond_ssml(self, request_id: int, segments: asyncio.Queue[str | Segment | None],
                            voice_name: str | None, streamed: bool = False) -> None:  # fmt: skip
        """Speak SSML segments (one-shot: all queued; streamed: as they are read) in the
        voices, rates and breaks they ask for. Like a streamed reply, it keeps its scheduler
        slot while segments are ready, gives it up while it waits for text, and makes a
        model or a voice ready outside it."""
        timing = _Timing()
        voices = ReplyVoices(self._service, voice_name)
        cancel = threading.Event()
        try:
            speaker = ReplySpeaker(await voices.start(), cancel, _spoken)
            segment = _segment(await segments.get())
            while segment is not None:
                await voices.prepare(segment)
                wait = (Priority.CONTINUATION, None) if timing.frames else (Priority.NEW, self._slot_wait)
                waiting = False
                async with self._service.scheduler.slot(*wait) as slot:
                    while segment is not None and voices.ready(segment):
                        await self._speak_segment(request_id, voices, speaker, segment, cancel, timing, slot)
                        if segments.empty():
                            waiting = True
                            break
                        segment = _segment(segments.get_nowait())
                if waiting:
                    segment = _segment(await segments.get())
        finally:
            cancel.set()
            voices.release()
        if timing.frames == 0:
            raise RequestError("empty text: nothing to synthesize in the SSML")
        assert voices.request is not None
        await self._send_audio(voices.request.backend, speaker.finish(), timing)
        await self.write_event(AudioStop().event())
        if streamed:
            await self.write_event(SynthesizeStopped().event())
        self._log_done(request_id, voices.request.name, voices.request.backend, timing)

    async def _speak_segment(self, request_id: int, voices: ReplyVoices, speaker: ReplySpeaker, segment: Segment,
                             cancel: threading.Event, timing: _Timing, slot: Slot) -> None:  # fmt: skip
        if isinstance(segment, Pause):
            speaker.pause(segment)
            return
        _LOGGER.debug("Request %d: SSML %s", request_id, clip(repr(segment)))
        voice = voices.voice_for(segment)
        try:
            await self._send_frames(voice.backend, speaker.frames(segment, voice), cancel, timing, slot)
        except TextError as err:
            # One unpronounceable piece ("---") must not end the reply.
            _LOGGER.warning("Request %d: skipping an SSML segment: %s", request_id, clip(error_text(err), 200))

    async def _send_frames(
        self,
        backend: Backend,
        frames: Callable[[], FrameIterator],
        cancel: threading.Event,
        timing: _Timing,
        slot: Slot,
    ) -> None:
        rate = backend.model.sample_rate
        async with aclosing(stream_pcm(frames, cancel, self._service.synth_executor)) as pcm_frames:
            async for pcm in pcm_frames:
                if timing.frames == 0:
                    timing.first_audio = time.monotonic()
                    await self.write_event(
                        AudioStart(rate=rate, width=SAMPLE_WIDTH, channels=CHANNELS).event()
                    )
                await self._write_audio(
                    AudioChunk(rate=rate, width=SAMPLE_WIDTH, channels=CHANNELS, audio=pcm).event(), slot
                )
                timing.frames += 1
                timing.samples += len(pcm) // SAMPLE_WIDTH

    async def _write_audio(self, event: Event, slot: Slot) -> None:
        """Write one chunk; while the client is behind, wait for it without the slot."""
        transport = self.writer.transport
        _, high = transport.get_write_buffer_limits()
        if transport.get_write_buffer_size() + len(event.payload or b"") + CHUNK_HEADER_BYTES <= high:
            # Stays under the high-water mark: drain() returns at once (the common case,
            # kept free of the task and timer below).
            await self.write_event(event)
            return
        write = asyncio.ensure_future(self.write_event(event))
        try:
            # shield: the grace running out must not cancel the write itself.
            await asyncio.wait_for(asyncio.shield(write), STALL_GRACE_S)
            return
        except asyncio.TimeoutError:
            pass
        except asyncio.CancelledError:
            write.cancel()
            raise
        _LOGGER.debug("Client %s is not reading: synthesis paused, slot given up", self._peer)
        async with self._service.scheduler.released(slot):
            try:
                await asyncio.wait_for(write, self._stall_timeout)
            except asyncio.TimeoutError:
                raise ClientStalled(
                    f"the client took no audio for {self._stall_timeout:g} s: disconnecting"
                ) from None
        _LOGGER.debug("Client %s reads again: synthesis resumed", self._peer)

    async def _send_audio(self, backend: Backend, samples: np.ndarray, timing: _Timing) -> None:
        """One more chunk after the frames (the stretcher's tail), if there is any."""
        if samples.size:
            rate = backend.model.sample_rate
            await self.write_event(
                AudioChunk(rate=rate, width=SAMPLE_WIDTH, channels=CHANNELS, audio=to_pcm16(samples)).event()
            )
            timing.samples += samples.size

    def _log_done(self, request_id: int, voice: str, backend: Backend, timing: _Timing) -> None:
        elapsed = time.monotonic() - timing.start
        audio_s = timing.samples / backend.model.sample_rate
        first = (timing.first_audio or timing.start) - timing.start
        # With several models, a voice's name in its library may be another model's too.
        entry = self._service.pool.entry_of(backend) if self._service.pool.several else None
        model = f" of model {entry.label}" if entry is not None else ""
        _LOGGER.info(
            "Request %d done: voice %s%s, %.2f s of audio in %.2f s, first audio after %.0f ms",
            request_id, voice, model, audio_s, elapsed, first * 1000,
        )  # fmt: skip


def _reply_audio(backend: Backend, reply: ReplyOptions) -> ReplyAudio:
    """The audio shaping of one reply, with the voice's rate and pauses (else the server's)."""
    return ReplyAudio(backend.model.sample_rate, reply.length_scale, reply.sentence_silence)


def _spoken(text: str, language: str, reply: ReplyOptions) -> str:
    """The text as the model is to read it: in words, unless normalisation is off. Runs in
    the synthesis worker, before the engine's own text preparation."""
    return normalize(text, language) if reply.normalize else text


def _sentences(text: str, language: str) -> list[str]:
    """The sentences of a one-shot text, as a streamed one is cut; none unspeakable."""
    splitter = SentenceSplitter(language)
    sentences = [*splitter.add_chunk(text), splitter.finish()]
    return [sentence for sentence in sentences if any(char.isalnum() for char in sentence)] or [text]


def _by_sentence(shaper: ReplyAudio, session: SessionLike, sentences: Iterable[str]) -> FrameIterator:
    """A one-shot text spoken sentence by sentence, as a streamed reply is: a pause between
    sentences needs their boundaries. Closing this closes the sentence being spoken."""
    for sentence in sentences:
        yield from shaper.sentence(session.speak(sentence))


def _segment(item: str | Segment | None) -> Segment | None:
    """An SSML request's queue item (its stream's queue holds segments only)."""
    assert not isinstance(item, str)
    return item


def _is_ssml(event: Event, text: str | None) -> bool:
    """Whether a request's text is SSML: `text_format: ssml` (wyoming 1.10), or a one-shot
    text starting with <speak> from a client that sends no text format."""
    text_format = event.data.get("text_format")
    if text_format is None and text is not None:
        return text.lstrip().startswith("<speak")
    return text_format == "ssml"


def _text_field(event: Event, event_type: str) -> str:
    text = event.data.get("text")
    if not isinstance(text, str):
        raise RequestError(f'malformed {event_type}: "text" must be a string')
    return text


def _voice_language(event: Event) -> str | None:
    """The language a request's voice asks for (a client may give one and no name)."""
    voice = event.data.get("voice")
    language = voice.get("language") if isinstance(voice, dict) else None
    if language is None or (isinstance(language, str) and not language.strip()):
        return None
    if not isinstance(language, str):
        raise RequestError('malformed request: "voice.language" must be a string')
    return language.strip()


def _voice_name(event: Event) -> str | None:
    """The requested voice name; HA sends only the name (and maybe a speaker we ignore)."""
    voice = event.data.get("voice")
    if voice is None:
        return None
    if not isinstance(voice, dict):
        raise RequestError('malformed request: "voice" must be an object')
    name = voice.get("name")
    if name is None or (isinstance(name, str) and not name.strip()):
        return None
    if not isinstance(name, str):
        raise RequestError('malformed request: "voice.name" must be a string')
    return name.strip()
