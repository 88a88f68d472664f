"""A describe -> info round trip over raw TCP, for the health check and the run script.

Standard library only: the health check must work even if the venv is damaged, and a
bare TCP connect is not enough because it does not prove the server's event loop is
alive (a wedged loop still accepts connections).
"""

from __future__ import annotations

import json
import socket
from typing import Any

# Wyoming frames: one JSON header line, then data_length bytes of JSON, then
# payload_length raw bytes. The version is informative only.
_DESCRIBE = b'{"type": "describe", "version": "1.10.2"}\n'
_MAX_HEADER = 64 * 1024
_MAX_DATA = 4 * 1024 * 1024


class ProbeError(Exception):
    """The server did not answer describe with info."""


def describe(host: str, port: int, timeout: float = 5.0) -> dict[str, Any]:
    """Send describe and return the data of the info event that answers it."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(_DESCRIBE)
            with sock.makefile("rb") as stream:
                return _read_info(stream)
    except OSError as err:
        raise ProbeError(f"no answer from {host}:{port}: {err}") from err


def _read_info(stream: Any) -> dict[str, Any]:
    # A server may send other events first; skip until info (bounded, never loops forever).
    for _ in range(16):
        line = stream.readline(_MAX_HEADER)
        if not line:
            raise ProbeError("connection closed before info")
        try:
            header = json.loads(line)
        except ValueError as err:
            raise ProbeError(f"malformed event header: {line[:80]!r}") from err
        data = dict(header.get("data") or {})
        data_length = int(header.get("data_length") or 0)
        if data_length:
            if data_length > _MAX_DATA:
                raise ProbeError(f"event data too large: {data_length} bytes")
            data.update(json.loads(_read_exactly(stream, data_length)))
        payload_length = int(header.get("payload_length") or 0)
        if payload_length:
            _read_exactly(stream, payload_length)
        if header.get("type") == "info":
            return data
    raise ProbeError("no info event among the first 16 events")


def _read_exactly(stream: Any, count: int) -> bytes:
    chunk = stream.read(count)
    if chunk is None or len(chunk) != count:
        raise ProbeError("connection closed in the middle of an event")
    return chunk


def tts_voice_names(info: dict[str, Any]) -> list[str]:
    """Names of the voices of the installed TTS programs listed in an info event."""
    names: list[str] = []
    for program in info.get("tts") or []:
        if not program.get("installed", True):
            continue
        for voice in program.get("voices") or []:
            if voice.get("installed", True) and voice.get("name"):
                names.append(str(voice["name"]))
    return names
