"""The add-on's options (/data/options.json) and the server command line they give.

`build_command` is pure: the same options and layout always give the same argv and
environment, so tests can check sample options files against exact command lines.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

_LOGGER = logging.getLogger(__name__)

# The port inside the container. Home Assistant reaches the add-on on the internal
# network at this port whatever host port the user maps (if any).
DEFAULT_PORT = 10200

# Must equal `options:` in config.yaml (a test checks it). They are also what a plain
# `docker run` without /data/options.json gets.
DEFAULTS: dict[str, Any] = {
    "model": "english",
    "voice": "",
    "voices_file": "",
    "voices_dir": "voices",
    "hf_token": "",
    "quantize": False,
    "threads": 0,
    "temperature": 0.3,
    "voice_cache_size": 8,
    "debug": False,
}

_TYPES: dict[str, type] = {key: type(value) for key, value in DEFAULTS.items()}
# A voice given as a file (not a name) is recognised by one of these endings.
_VOICE_FILE_SUFFIXES = (".wav", ".flac", ".ogg", ".mp3", ".safetensors")


class OptionsError(ValueError):
    """options.json is unreadable or holds a value of the wrong type."""


@dataclass(frozen=True)
class Layout:
    """Where things live in the container; tests point these at temporary folders."""

    python: str
    data_dir: PurePosixPath = PurePosixPath("/data")
    share_dir: PurePosixPath = PurePosixPath("/share/pocket_tts")
    port: int = DEFAULT_PORT


@dataclass(frozen=True)
class ServerCommand:
    """What to run: argv, and the variables to add to the environment."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)

    def printable(self) -> str:
        """The command line for the log, a token given on it (docker run) masked."""
        shown = list(self.argv)
        for index, arg in enumerate(shown):
            if arg == "--hf-token" and index + 1 < len(shown):
                shown[index + 1] = "***"
            elif arg.startswith("--hf-token="):
                shown[index] = "--hf-token=***"
        return " ".join(shown)


def load_options(path: Path) -> dict[str, Any]:
    """Read options.json, fill missing keys with defaults and check the types.

    A missing file is not an error: outside Home Assistant the defaults apply.
    """
    if not path.exists():
        _LOGGER.info("No %s: using the default options", path)
        return dict(DEFAULTS)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise OptionsError(f"cannot read {path}: {err}") from err
    if not isinstance(raw, dict):
        raise OptionsError(f"{path} must hold a JSON object")
    return normalize_options(raw)


def normalize_options(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Defaults for missing keys, unknown keys dropped, values coerced to their type."""
    options = dict(DEFAULTS)
    for key, value in raw.items():
        if key not in DEFAULTS:
            # Options of a newer or older add-on version must not stop the start.
            _LOGGER.warning("Ignoring unknown option %r", key)
            continue
        options[key] = _coerce(key, value)
    return options


def _coerce(key: str, value: Any) -> Any:
    wanted = _TYPES[key]
    if value is None:
        return DEFAULTS[key]
    if wanted is bool:
        if isinstance(value, bool):
            return value
        raise OptionsError(f"option {key!r} must be true or false, not {value!r}")
    if wanted is int:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
            raise OptionsError(f"option {key!r} must be a whole number, not {value!r}")
        return int(value)
    if wanted is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise OptionsError(f"option {key!r} must be a number, not {value!r}")
        return float(value)
    return str(value).strip()


def _in_share(value: str, layout: Layout) -> str:
    """Relative paths in options are relative to the add-on's share folder."""
    path = PurePosixPath(value)
    return str(path if path.is_absolute() else layout.share_dir / path)


def _format_float(value: float) -> str:
    # "0.3" not "0.30000000000000004"; "1" for 1.0 (argparse reads both).
    return format(value, "g")


def voices_dir_path(options: Mapping[str, Any], layout: Layout) -> PurePosixPath | None:
    """The voices folder the server will scan, or None for the server's own default."""
    value = options["voices_dir"]
    return PurePosixPath(_in_share(value, layout)) if value else None


def build_command(options: Mapping[str, Any], layout: Layout, extra_args: list[str] | None = None) -> ServerCommand:
    """The server's argv and environment for normalized options (see normalize_options)."""
    argv = [
        layout.python, "-m", "wyoming_pocket_tts",
        "--uri", f"tcp://0.0.0.0:{layout.port}",
        "--data-dir", str(layout.data_dir),
        "--model", options["model"],
    ]
    voice = options["voice"]
    if voice:
        # A name stays a name; a file is looked up in the share folder.
        is_file = "/" in voice or voice.lower().endswith(_VOICE_FILE_SUFFIXES)
        argv += ["--voice", _in_share(voice, layout) if is_file else voice]
    if options["voices_file"]:
        argv += ["--voices", _in_share(options["voices_file"], layout)]
    voices_dir = voices_dir_path(options, layout)
    if voices_dir is not None:
        argv += ["--voices-dir", str(voices_dir)]
    argv += [
        "--temperature", _format_float(options["temperature"]),
        "--voice-cache-size", str(options["voice_cache_size"]),
    ]
    if options["threads"] > 0:
        argv += ["--threads", str(options["threads"])]
    if options["quantize"]:
        argv.append("--quantize")
    if options["debug"]:
        argv.append("--debug")
    argv += list(extra_args or [])

    # Downloaded weights go to /data/huggingface, which config.yaml excludes from backups.
    env = {"HF_HOME": str(layout.data_dir / "huggingface")}
    if options["hf_token"]:
        # The environment, not --hf-token: argv is visible in `ps` and in our log.
        env["HF_TOKEN"] = options["hf_token"]
    return ServerCommand(argv=argv, env=env)
