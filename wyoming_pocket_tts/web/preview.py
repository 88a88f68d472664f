"""A preview: the page's sentence spoken in a voice, streamed to the browser as it comes.

The page is a Wyoming client of its own server, over loopback: a preview takes the same
path as any request (the same limits, the same scheduler, the same voice settings), and
cannot jump the queue. The audio goes to the browser as a WAV stream (a header that
declares no length, then the PCM chunks as the server sends them), which the page plays
through Web Audio as it arrives. A browser that goes away closes the Wyoming connection,
which cancels the synthesis on the server within a frame.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncGenerator
from urllib.parse import urlsplit, urlunsplit

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncClient
from wyoming.error import Error
from wyoming.tts import Synthesize, SynthesizeVoice

MAX_PREVIEW_CHARS = 300
# The first audio may wait for the model to load and the voice to be encoded.
FIRST_AUDIO_TIMEOUT_S = 120.0
# Between chunks, once speaking: the server streams a frame every 80 ms of audio.
CHUNK_TIMEOUT_S = 30.0
_UNKNOWN_LENGTH = 0xFFFFFFFF


class PreviewError(Exception):
    """The preview cannot be made; the message is the server's (or ours), for the user."""


def loopback_uri(uri: str) -> str:
    """The server's Wyoming URI as this process reaches it: a listener on every address
    (0.0.0.0, ::) is reached on loopback. Raises PreviewError for stdio://."""
    parts = urlsplit(uri)
    if parts.scheme == "unix":
        return uri
    if parts.scheme != "tcp" or parts.port is None:
        raise PreviewError(f"previews need the server to listen on tcp:// or unix://, not {uri}")
    host = parts.hostname or "127.0.0.1"
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    shown = f"[{host}]" if ":" in host else host
    return urlunsplit(("tcp", f"{shown}:{parts.port}", "", "", ""))


def wav_header(rate: int, width: int, channels: int) -> bytes:
    """A 44-byte WAV header for a stream of unknown length (the sizes say 0xFFFFFFFF)."""
    return b"".join((
        b"RIFF", struct.pack("<I", _UNKNOWN_LENGTH), b"WAVE",
        b"fmt ", struct.pack("<IHHIIHH", 16, 1, channels, rate, rate * width * channels, width * channels, width * 8),
        b"data", struct.pack("<I", _UNKNOWN_LENGTH),
    ))  # fmt: skip


async def speak(uri: str, voice: str, text: str) -> AsyncGenerator[AudioStart | bytes, None]:
    """Yield the reply's AudioStart, then its PCM chunks; raises PreviewError (before the
    AudioStart for errors the server reports at once: unknown voice, busy, bad text)."""
    client = AsyncClient.from_uri(loopback_uri(uri))
    try:
        await client.connect()
    except OSError as err:
        raise PreviewError(f"the server's Wyoming port cannot be reached: {err.strerror or err}") from None
    try:
        await client.write_event(Synthesize(text=text, voice=SynthesizeVoice(name=voice)).event())
        timeout = FIRST_AUDIO_TIMEOUT_S
        started = False
        while True:
            try:
                event = await asyncio.wait_for(client.read_event(), timeout)
            except asyncio.TimeoutError:
                raise PreviewError(f"the server sent no audio for {timeout:.0f} s") from None
            if event is None:
                raise PreviewError("the server closed the connection before the end of the audio")
            if Error.is_type(event.type):
                raise PreviewError(Error.from_event(event).text)
            if AudioStart.is_type(event.type) and not started:
                started = True
                timeout = CHUNK_TIMEOUT_S
                yield AudioStart.from_event(event)
            elif AudioChunk.is_type(event.type) and started:
                yield AudioChunk.from_event(event).audio
            elif AudioStop.is_type(event.type) and started:
                return
    finally:
        await client.disconnect()
