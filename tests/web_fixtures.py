"""Helpers for the voices page's tests: recordings in every accepted format (encoded here
with PyAV), Debian's chromium (installed when missing, like espeak-ng), and the real
server with the page on."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import numpy as np

from speech_fixtures import ensure_debian_package, ensure_espeak

CHROMIUM = "/usr/bin/chromium"
# Chromium's own background connections are refused on a closed network; these keep it
# from trying (and from waiting on them).
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
# What browsers and phones record, and the usual files: (PyAV format, codec, suffix, layout).
FORMATS = {
    "wav": ("wav", "pcm_s16le", ".wav", "mono"),
    "flac": ("flac", "flac", ".flac", "mono"),
    "ogg-vorbis": ("ogg", "vorbis", ".ogg", "stereo"),  # FFmpeg's own Vorbis encoder: stereo only
    "ogg-opus": ("ogg", "libopus", ".opus", "mono"),
    "mp3": ("mp3", "libmp3lame", ".mp3", "mono"),
    "m4a-aac": ("ipod", "aac", ".m4a", "mono"),
    "aac-adts": ("adts", "aac", ".aac", "mono"),
    "webm-opus": ("webm", "libopus", ".webm", "mono"),
}
SPEECH_TEXT = (
    "Good evening. This is grandma speaking, reading a few sentences for the voice page. "
    "The kitchen lights are on, and dinner is ready at seven o'clock."
)


def encode(samples: np.ndarray, rate: int, kind: str) -> bytes:
    """Mono float samples as a file of `kind` (a key of FORMATS), in memory."""
    import av

    container_format, codec, _, layout = FORMATS[kind]
    out_rate = 48_000 if codec == "libopus" else rate
    buffer = io.BytesIO()
    with av.open(buffer, mode="w", format=container_format) as container:
        stream = container.add_stream(codec, rate=out_rate, layout=layout)
        stream.codec_context.options = {"strict": "experimental"}  # the Vorbis encoder is "experimental"
        resampler = av.AudioResampler(format=stream.codec_context.format.name, layout=layout, rate=out_rate)
        frame = av.AudioFrame.from_ndarray(np.asarray(samples, np.float32).reshape(1, -1), format="flt",
                                           layout="mono")  # fmt: skip
        frame.sample_rate = rate
        for converted in [*resampler.resample(frame), *resampler.resample(None)]:
            for packet in stream.encode(converted):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return buffer.getvalue()


def speech(folder: Path, seconds: float | None = None) -> tuple[np.ndarray, int, Path]:
    """espeak-ng reading SPEECH_TEXT (about 9 s) as float32 mono; cut or looped to
    `seconds` if given. Also returns the WAV file it wrote."""
    import soundfile

    espeak = ensure_espeak()
    assert espeak, "espeak-ng is needed for the voices page's tests"
    path = folder / "speech.wav"
    subprocess.run([espeak, "-w", str(path), SPEECH_TEXT], check=True, capture_output=True, timeout=60)
    audio, rate = soundfile.read(path, dtype="float32", always_2d=True)
    samples = audio[:, 0]
    if seconds is not None:
        wanted = int(seconds * rate)
        samples = np.resize(samples, wanted) if wanted > samples.size else samples[:wanted]
    return samples.astype(np.float32), rate, path


def ensure_chromium() -> str | None:
    """Debian's chromium, installed with apt-get if missing; None (logged) if it cannot be."""
    return ensure_debian_package("chromium", lambda: CHROMIUM if Path(CHROMIUM).exists() else None)
