"""One Wyoming connection: describe, one-shot synthesize, and streamed synthesize.

The read loop never waits for audio: each response (one-shot or streamed) runs in its own
task, so the loop keeps reading while frames are produced. That is what lets a streamed
request start speaking its first sentence while later text chunks still arrive, and lets a
disconnect (end of stream on the socket) cancel the synthesis within one frame. Responses
on one connection are chained, so a client that pipelines two requests gets them in order.

Any protocol violation or failed synthesis ends the connection the same way: an `error`
event with a readable text, then the socket closes (Home Assistant ignores `error` events
but stops reading at the close). Nothing escapes to the server.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Coroutine, Iterable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

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
from ..core import EngineError, SessionLike, TextError
from ..text import SentenceSplitter, normalize
from .protocol import Limits, ProtocolError, read_event
from .scheduler import Priority, Slot
from .service import Backend, LoadFailed, ReplyOptions, TtsService, error_text
from .synthesis import FrameIterator, stream_pcm, to_pcm16

_LOGGER = logging.getLogger(__name__)

# How long `describe` may wait for a model that is about to be ready, so that a client
# connecting just after start sees the voices; Home Assistant gives up after 1 s.
DESCRIBE_READY_WAIT_S = 0.5
# How long we try to deliver an `error` event to a client that does not read.
ERROR_WRITE_TIMEOUT_S = 2.0
# Streamed text not yet released as a sentence (no sentence end seen yet).
MAX_PENDING_TEXT_CHARS = 100_000
SAMPLE_WIDTH = 2
CHANNELS = 1


class RequestError(Exception):
    """A request that cannot be served; the message goes to the client's `error` event."""


@dataclass
class _TextStream:
    """A streamed request whose text is still arriving."""

    request_id: int
    voice_name: str | None
    # Knows the language's abbreviations, ordinals and list markers ("am 3. März", "1. Milk").
    splitter: SentenceSplitter
    sentences: asyncio.Queue[str | None] = field(default_factory=asyncio.Queue)
    chars: int = 0


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
    ) -> None:
        super().__init__(reader, writer)
        self._service = service
        self._limits = limits or Limits()
        self._stream: _TextStream | None = None
        self._response: asyncio.Task[None] | None = None
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
                    event = await read_event(self.reader, self._limits)
                except ProtocolError as err:
                    await self._fail(str(err))
                    break
                if event is None:
                    break
                if not await self.handle_event(event):
                    break
        except (ConnectionError, OSError) as err:
            _LOGGER.debug("Connection %s lost: %s", self._peer, err)
        except Exception as err:  # noqa: BLE001 - a bug must cost one connection, no more
            _LOGGER.exception("Unexpected error on connection %s", self._peer)
            await self._fail(f"internal error: {error_text(err)}")
        finally:
            try:
                await self.disconnect()
                self.writer.close()
            finally:
                self._service.connections.discard(task)  # type: ignore[arg-type]

    async def disconnect(self) -> None:
        """The client went away (or we closed): cancel what it asked for."""
        response = self._response
        if response is not None and not response.done():
            _LOGGER.info("Client %s disconnected: cancelling its synthesis", self._peer)
            response.cancel()
            # Let the response's cleanup (cancel event, worker join) run before we return.
            await asyncio.wait([response])

    async def _fail(self, message: str) -> None:
        """Send `error`, then close the connection. Safe to call from a response task."""
        if self._closing:
            return
        self._closing = True
        _LOGGER.warning("Client %s: %s", self._peer, message)
        current = asyncio.current_task()
        response = self._response
        if response is not None and response is not current and not response.done():
            response.cancel()
            await asyncio.wait([response])
        try:
            await asyncio.wait_for(self.write_event(Error(text=message).event()), ERROR_WRITE_TIMEOUT_S)
        except (asyncio.TimeoutError, ConnectionError, OSError):
            pass
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
            # Briefly wait for a model about to be ready, never long enough to miss HA's 1 s.
            await self._service.settle(DESCRIBE_READY_WAIT_S)
            await self.write_event(self._service.info().event())
            return True

        if Synthesize.is_type(event.type):
            if self._stream is not None:
                # The compatibility copy of the whole text that HA sends inside a stream.
                _LOGGER.debug("Ignoring synthesize inside a stream (compatibility copy)")
                return True
            text = _text_field(event, "synthesize")
            if not text.strip():
                raise RequestError("empty text: nothing to synthesize")
            voice_name = _voice_name(event)
            request_id = self._service.next_request_id()
            _LOGGER.info(
                "Request %d from %s: one-shot, %d characters, voice %s",
                request_id, self._peer, len(text), voice_name or "(default)",
            )  # fmt: skip
            self._start_response(lambda: self._respond_one_shot(request_id, text, voice_name))
            return True

        if SynthesizeStart.is_type(event.type):
            if self._stream is not None:
                raise RequestError("synthesize-start received while a streamed request is open")
            voice_name = _voice_name(event)
            # The voice's language once the model is loaded; before that, every language's rules.
            splitter = SentenceSplitter(self._service.text_language(voice_name))
            stream = _TextStream(self._service.next_request_id(), voice_name, splitter)
            _LOGGER.info(
                "Request %d from %s: streamed, voice %s",
                stream.request_id, self._peer, stream.voice_name or "(default)",
            )  # fmt: skip
            self._stream = stream
            self._start_response(lambda: self._respond_streamed(stream))
            return True

        if SynthesizeChunk.is_type(event.type):
            stream = self._require_stream("synthesize-chunk")
            text = _text_field(event, "synthesize-chunk")
            stream.chars += len(text)
            for sentence in stream.splitter.add_chunk(text):
                stream.sentences.put_nowait(sentence)
            if stream.splitter.pending_chars > MAX_PENDING_TEXT_CHARS:
                raise RequestError(
                    f"streamed text has no sentence end in {MAX_PENDING_TEXT_CHARS} characters"
                )
            return True

        if SynthesizeStop.is_type(event.type):
            stream = self._require_stream("synthesize-stop")
            _LOGGER.debug("Request %d: text complete, %d characters", stream.request_id, stream.chars)
            rest = stream.splitter.finish()
            if rest:
                stream.sentences.put_nowait(rest)
            stream.sentences.put_nowait(None)
            self._stream = None
            return True

        if Ping.is_type(event.type):
            await self.write_event(Pong(text=Ping.from_event(event).text).event())
            return True

        if event.type == "select-program":
            # We serve a single program; clients such as wyoming-bench may still select it.
            return True

        raise RequestError(f"unknown event type: {event.type!r}")

    def _require_stream(self, event_type: str) -> _TextStream:
        if self._stream is None:
            raise RequestError(f"{event_type} received without synthesize-start")
        return self._stream

    def _start_response(self, make: Callable[[], Coroutine[Any, Any, None]]) -> None:
        previous = self._response

        async def chained() -> None:
            if previous is not None:
                await asyncio.wait([previous])
            await self._guard(make())

        self._response = asyncio.create_task(chained(), name=f"response to {self._peer}")

    async def _guard(self, response: Coroutine[Any, Any, None]) -> None:
        """Run a response; turn its failures into `error` + close."""
        try:
            await response
        except RequestError as err:
            await self._fail(str(err))
        except LoadFailed as err:
            await self._fail(f"model not available: {err}")
        except (ConnectionError, OSError) as err:
            # The client is gone; nobody to tell.
            _LOGGER.info("Client %s went away during synthesis (%s)", self._peer, err)
            self.writer.close()
        except asyncio.CancelledError:
            raise
        except Exception as err:  # noqa: BLE001 - one failed synthesis must not hurt others
            if isinstance(err, EngineError):
                await self._fail(f"synthesis failed: {error_text(err)}")
            else:
                _LOGGER.exception("Synthesis failed for %s", self._peer)
                await self._fail(f"synthesis failed: internal error ({error_text(err)})")

    # -- responses -------------------------------------------------------------------------

    async def _backend(self) -> Backend:
        # Requests that arrive while the model loads simply wait for it.
        return await self._service.wait_ready()

    async def _respond_one_shot(self, request_id: int, text: str, voice_name: str | None) -> None:
        backend = await self._backend()
        timing = _Timing()
        resolved, voice = await self._service.get_voice(backend, voice_name)
        _LOGGER.debug("Request %d: voice %s ready after %.0f ms", request_id, resolved,
                      (time.monotonic() - timing.start) * 1000)  # fmt: skip
        cancel = threading.Event()
        options = backend.options_for(resolved)
        reply = backend.reply_options_for(resolved)
        shaper = _reply_audio(backend, reply)
        language = backend.language_for(resolved)

        def frames() -> FrameIterator:
            spoken = _spoken(text, language, reply)
            if shaper.sentence_silence == 0:
                return shaper.sentence(backend.model.synthesize(spoken, voice, options, cancel))
            session = backend.model.session(voice, options, cancel)
            return _by_sentence(shaper, session, _sentences(spoken, language))

        try:
            async with self._service.scheduler.slot(Priority.NEW) as slot:
                await self._send_frames(backend, frames, cancel, timing, slot)
        except TextError as err:
            raise RequestError(f"cannot speak this text: {error_text(err)}") from None
        finally:
            cancel.set()
        if timing.frames == 0:
            raise RequestError("the engine produced no audio for this text")
        await self._send_audio(backend, shaper.finish(), timing)
        await self.write_event(AudioStop().event())
        self._log_done(request_id, resolved, backend, timing)

    async def _respond_streamed(self, stream: _TextStream) -> None:
        backend = await self._backend()
        # Fetch (maybe encode) the voice while the first sentence is still being written.
        resolved, voice = await self._service.get_voice(backend, stream.voice_name)
        cancel = threading.Event()
        timing = _Timing()
        options = backend.options_for(resolved)
        reply = backend.reply_options_for(resolved)
        # One for the whole reply: the stretch runs on across sentences, without a seam.
        shaper = _reply_audio(backend, reply)
        language = backend.language_for(resolved)
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
                priority = Priority.CONTINUATION if timing.frames else Priority.NEW
                async with self._service.scheduler.slot(priority) as slot:
                    # Keep the slot while the next sentence is already here: releasing it
                    # would let a waiting request in and open a gap in this reply. It is
                    # given up only while we wait for more text.
                    while sentence is not None:
                        _LOGGER.debug("Request %d: sentence %r", stream.request_id, sentence)
                        try:
                            await self._send_frames(backend, speak(sentence), cancel, timing, slot)
                        except TextError as err:
                            # One unpronounceable sentence ("---") must not end the reply.
                            _LOGGER.warning("Request %d: skipping a sentence: %s",
                                            stream.request_id, error_text(err))  # fmt: skip
                        if stream.sentences.empty():
                            break
                        sentence = stream.sentences.get_nowait()
                if sentence is None:
                    break
        finally:
            cancel.set()
        if timing.frames == 0:
            raise RequestError("empty text: nothing to synthesize in the streamed request")
        await self._send_audio(backend, shaper.finish(), timing)
        await self.write_event(AudioStop().event())
        await self.write_event(SynthesizeStopped().event())
        self._log_done(stream.request_id, resolved, backend, timing)

    async def _send_frames(
        self,
        backend: Backend,
        frames: Callable[[], FrameIterator],
        cancel: threading.Event,
        timing: _Timing,
        slot: Slot,
    ) -> None:
        rate = backend.model.sample_rate
        frame_s = backend.model.frame_size / rate
        async with aclosing(stream_pcm(frames, cancel, self._service.synth_executor)) as pcm_frames:
            async for pcm in pcm_frames:
                if timing.frames == 0:
                    timing.first_audio = time.monotonic()
                    await self.write_event(
                        AudioStart(rate=rate, width=SAMPLE_WIDTH, channels=CHANNELS).event()
                    )
                await self.write_event(
                    AudioChunk(rate=rate, width=SAMPLE_WIDTH, channels=CHANNELS, audio=pcm).event()
                )
                timing.frames += 1
                timing.samples += len(pcm) // SAMPLE_WIDTH
                slot.add_audio(frame_s)  # the scheduler learns how fast synthesis runs

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
        _LOGGER.info(
            "Request %d done: voice %s, %.2f s of audio in %.2f s, first audio after %.0f ms",
            request_id, voice, audio_s, elapsed, first * 1000,
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


def _text_field(event: Event, event_type: str) -> str:
    text = event.data.get("text")
    if not isinstance(text, str):
        raise RequestError(f'malformed {event_type}: "text" must be a string')
    return text


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
