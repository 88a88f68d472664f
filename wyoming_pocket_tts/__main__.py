"""Command line: `wyoming-pocket-tts` and `python -m wyoming_pocket_tts`.

Every mistake the user can make on the command line ends the program at once with one line
on stderr and a non-zero status: 2 for a bad option or a missing file, 1 when the server
cannot start or the model cannot be loaded. Nothing here imports torch, so `--help`,
`--version` and those checks answer immediately.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import NoReturn
from urllib.parse import urlparse

from . import __version__
from .server.app import ServerConfig, StartError, serve
from .server.service import LoadFailed
from .server.zeroconf import zeroconf_available

PROG = "wyoming-pocket-tts"
DEFAULT_URI = "tcp://0.0.0.0:10200"
DEFAULT_ZEROCONF_NAME = "pocket-tts"
# Suffixes that make --voice a file rather than a voice name.
VOICE_FILE_SUFFIXES = {".wav", ".flac", ".ogg", ".mp3", ".safetensors"}

_LOGGER = logging.getLogger(__name__)


class UsageError(Exception):
    """A bad option value; the message is one line."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # argparse prints the whole usage first; one line is easier to spot in add-on logs.
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def default_data_dir() -> Path:
    """Per-user data directory (XDG), where encoded voices and downloads are cached."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / PROG


def _number(kind: Callable[[str], float], minimum: float | None, strict: bool = False):
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a valid {kind.__name__}: {text!r}") from None
        if minimum is not None and (value <= minimum if strict else value < minimum):
            relation = "greater than" if strict else "at least"
            raise argparse.ArgumentTypeError(f"must be {relation} {minimum}, got {text}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Wyoming text-to-speech server for Home Assistant, on Kyutai's Pocket TTS.",
    )
    add = parser.add_argument
    add("--uri", default=DEFAULT_URI,
        help=f"where to listen: tcp://HOST:PORT, unix://PATH or stdio:// (default {DEFAULT_URI})")
    add("--model", default="english",
        help='model: a catalog name ("english", "french", ...), "demo" (tiny, random weights: '
             "noise, for checking the pipeline offline), a local config .yaml, or "
             "hf://repo/path.yaml@rev (default english)")
    add("--voice", help="default voice: a voice name, or a path to a recording or an exported state")
    add("--voices", metavar="FILE", type=Path, help="household voices file (YAML)")
    add("--voices-dir", metavar="DIR", type=Path,
        help="folder of voice recordings / exported states, one voice per file")
    add("--no-predefined-voices", action="store_true",
        help="offer only your own voices, not the model's predefined ones")
    add("--data-dir", metavar="DIR", type=Path, default=None,
        help=f"caches (encoded voices, downloads); default {default_data_dir()}")
    add("--hf-token", metavar="TOKEN",
        help="Hugging Face token for the gated voice-cloning weights (default: $HF_TOKEN)")
    add("--temperature", type=_number(float, 0.0), help="sampling temperature (model default)")
    add("--decode-steps", type=_number(int, 1), help="flow decode steps per frame (default 1)")
    add("--eos-threshold", type=_number(float, None),
        help="end-of-speech threshold (model default)")
    add("--quantize", action="store_true", help="int8 dynamic quantization: faster, CPU only")
    add("--threads", type=_number(int, 1), help="torch threads (default: the engine decides)")
    add("--voice-cache-size", type=_number(int, 1), default=8,
        help="encoded voices kept in memory (default 8)")
    add("--voice-cache-mb", type=_number(float, 0.0, strict=True),
        help="memory bound of the voice cache in MiB (default: count only)")
    add("--disk-cache-mb", type=_number(float, 0.0), default=512.0,
        help="disk bound of the encoded-voice cache in MiB, 0 disables it (default 512)")
    add("--max-concurrent", type=_number(int, 1), default=2,
        help="syntheses running at once; more requests wait in line (default 2)")
    add("--zeroconf", nargs="?", const=DEFAULT_ZEROCONF_NAME, metavar="NAME",
        help=f"announce the server over mDNS for Home Assistant (name default {DEFAULT_ZEROCONF_NAME})")
    add("--debug", action="store_true", help="log debug messages")
    add("--version", action="version", version=f"{PROG} {__version__}")
    return parser  # fmt: skip


def _looks_like_path(value: str) -> bool:
    return "/" in value or os.sep in value or Path(value).suffix.lower() in VOICE_FILE_SUFFIXES


def _check_uri(uri: str) -> None:
    parsed = urlparse(uri)
    if parsed.scheme == "tcp":
        try:
            port = parsed.port
        except ValueError:
            port = None
        if not parsed.hostname or port is None:
            raise UsageError(f"--uri {uri}: a tcp:// URI needs a host and a port")
    elif parsed.scheme == "unix":
        if not parsed.path:
            raise UsageError(f"--uri {uri}: a unix:// URI needs a socket path")
    elif parsed.scheme != "stdio":
        raise UsageError(f"--uri {uri}: use tcp://HOST:PORT, unix://PATH or stdio://")


def config_from_args(args: argparse.Namespace) -> ServerConfig:
    """Validate what argparse cannot check alone; raises UsageError."""
    _check_uri(args.uri)

    model = args.model.strip()
    if not model:
        raise UsageError("--model is empty")
    if not model.startswith("hf://") and (model.endswith((".yaml", ".yml")) or "/" in model):
        if not Path(model).is_file():
            raise UsageError(f"--model {model}: no such file")

    if args.voice is not None and _looks_like_path(args.voice) and not Path(args.voice).is_file():
        raise UsageError(f"--voice {args.voice}: no such file")
    if args.voices is not None and not args.voices.is_file():
        raise UsageError(f"--voices {args.voices}: no such file")
    if args.voices_dir is not None and not args.voices_dir.is_dir():
        raise UsageError(f"--voices-dir {args.voices_dir}: no such directory")

    data_dir: Path = args.data_dir or default_data_dir()
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(f"--data-dir {data_dir}: cannot create it ({err.strerror})") from None
    if not os.access(data_dir, os.W_OK):
        raise UsageError(f"--data-dir {data_dir}: not writable")

    if args.zeroconf is not None:
        if urlparse(args.uri).scheme != "tcp":
            raise UsageError("--zeroconf needs a tcp:// --uri")
        if not zeroconf_available():
            raise UsageError("--zeroconf needs the zeroconf package: pip install zeroconf")

    return ServerConfig(
        uri=args.uri,
        model=model,
        data_dir=data_dir,
        # Read here, not as the option's default, so --help never shows the token.
        hf_token=args.hf_token or os.environ.get("HF_TOKEN") or None,
        quantize=args.quantize,
        threads=args.threads,
        temperature=args.temperature,
        decode_steps=args.decode_steps,
        eos_threshold=args.eos_threshold,
        voice=args.voice,
        voices_file=args.voices,
        voices_dir=args.voices_dir,
        include_predefined=not args.no_predefined_voices,
        voice_cache_size=args.voice_cache_size,
        voice_cache_mb=args.voice_cache_mb,
        disk_cache_mb=args.disk_cache_mb,
        max_concurrent=args.max_concurrent,
        zeroconf_name=args.zeroconf,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        config = config_from_args(args)
    except UsageError as err:
        parser.error(str(err))

    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,  # stdout may be the Wyoming stream (stdio://)
    )
    _LOGGER.info("%s %s", PROG, __version__)
    _LOGGER.debug("Settings: %s", replace(config, hf_token="***" if config.hf_token else None))
    try:
        clean = asyncio.run(serve(config))
    except (StartError, LoadFailed) as err:
        parser.exit(1, f"{PROG}: error: {err}\n")
    except KeyboardInterrupt:
        clean = True
    if not clean:
        # Stopped while the model was loading: the loader thread may be inside torch, and
        # interpreter teardown under it aborts. Nothing is left to save; leave now.
        logging.shutdown()
        os._exit(0)
    return 0


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())


if __name__ == "__main__":
    run()
