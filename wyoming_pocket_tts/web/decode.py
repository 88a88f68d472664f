"""An uploaded or recorded file, decoded to mono float samples, whatever its name says.

PyAV (FFmpeg's demuxers and decoders) reads what browsers and phones record: WAV, FLAC,
Ogg (Vorbis, Opus), MP3, M4A/AAC (MP4 and ADTS), WebM/Matroska (Opus). The container is
recognised from the bytes by FFmpeg's probe, never from the file name or the browser's
content type, and only the containers and codecs listed below are decoded: a text file,
an image or a video-only file is refused with a message saying what was found.

Memory is bounded: the bytes are bounded by the page's upload limit, and decoding stops
just after `quality.MAX_SECONDS` (a longer file is refused by the check, so nothing after
that is needed).
"""

from __future__ import annotations

import io
import logging
from dataclasses import dataclass

import numpy as np

from .quality import MAX_SECONDS

_LOGGER = logging.getLogger(__name__)

# FFmpeg's names (`container.format.name`) of the containers accepted, and of their codecs.
CONTAINERS = frozenset({"wav", "flac", "ogg", "mp3", "mov,mp4,m4a,3gp,3g2,mj2", "aac", "matroska,webm"})
CODECS = frozenset({
    "pcm_s16le", "pcm_s24le", "pcm_s32le", "pcm_f32le", "pcm_f64le", "pcm_u8", "pcm_mulaw", "pcm_alaw",
    "flac", "vorbis", "opus", "mp3", "mp3float", "aac", "alac",
})  # fmt: skip
# Decoding goes on this far past the limit, so that "too long" is told from "just at it".
_PAST_LIMIT_S = 0.5
# The rate recordings are kept at, at most (the model resamples to its own 24 kHz anyway).
MAX_RATE = 48_000


class DecodeError(ValueError):
    """Not audio we can use; the message is one sentence for the user."""


@dataclass(frozen=True)
class Decoded:
    samples: np.ndarray  # float32, mono, -1..1
    sample_rate: int
    container: str
    codec: str
    # True if the file goes on after what was decoded (it lasts more than MAX_SECONDS).
    cut: bool


def decode_audio(data: bytes) -> Decoded:
    """Decode `data` (a whole file in memory); raises DecodeError."""
    import av  # imported here: the page is optional, and --help must stay fast

    if not data:
        raise DecodeError("the file is empty")
    try:
        container = av.open(io.BytesIO(data), mode="r")
    except (av.FFmpegError, ValueError, OSError) as err:
        _LOGGER.debug("upload not recognised: %s", err)
        raise DecodeError("this file is not a recording: its content is not a known audio format "
                          "(WAV, FLAC, Ogg, MP3, M4A/AAC, WebM/Opus)") from None
    with container:
        name = container.format.name
        if name not in CONTAINERS:
            raise DecodeError(f"files of type {container.format.long_name or name} are not accepted: use WAV, "
                              "FLAC, Ogg, MP3, M4A/AAC or WebM/Opus")
        if not container.streams.audio:
            raise DecodeError("this file holds no audio")
        stream = container.streams.audio[0]
        codec = stream.codec_context.name
        if codec not in CODECS:
            raise DecodeError(f"audio encoded as {codec} is not accepted: use WAV, FLAC, Ogg, MP3, AAC or Opus")
        rate = int(stream.codec_context.sample_rate or stream.rate or 0)
        if rate <= 0:
            raise DecodeError("this file does not say its sample rate")
        out_rate = min(rate, MAX_RATE)
        resampler = av.AudioResampler(format="flt", layout="mono", rate=out_rate)
        wanted = int((MAX_SECONDS + _PAST_LIMIT_S) * out_rate)
        pieces: list[np.ndarray] = []
        total = 0
        cut = False
        try:
            for frame in container.decode(stream):
                for converted in resampler.resample(frame):
                    piece = converted.to_ndarray().reshape(-1)
                    pieces.append(piece)
                    total += piece.size
                if total >= wanted:
                    cut = True
                    break
            if not cut:
                for converted in resampler.resample(None):  # what the resampler still holds
                    pieces.append(converted.to_ndarray().reshape(-1))
        except (av.FFmpegError, ValueError) as err:
            if total == 0:
                raise DecodeError(f"the audio in this file cannot be decoded ({err})") from None
            # A truncated upload: what decoded is still checked (and may be too short).
            _LOGGER.info("upload: decoding stopped after %.1f s: %s", total / out_rate, err)
    samples = np.concatenate(pieces).astype(np.float32) if pieces else np.zeros(0, np.float32)
    if samples.size == 0:
        raise DecodeError("this file holds no audio samples")
    if not np.all(np.isfinite(samples)):
        raise DecodeError("this file holds invalid samples (not numbers)")
    return Decoded(np.clip(samples[:wanted], -1.0, 1.0), out_rate, name, codec, cut)
