"""Command line: `wyoming-pocket-tts` and `python -m wyoming_pocket_tts`.

Every mistake the user can make on the command line ends the program at once with one line
on stderr and a non-zero status: 2 for a bad option or a missing file, 1 when the server
cannot start or the model cannot be loaded. Nothing here imports torch, so `--help`,
`--version` and those checks answer immediately.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlparse

from . import __version__
from .core import GenerationOptions, names_config_file
from .server.app import ServerConfig, StartError, serve
from .server.logsafe import RepeatLimiter
from .server.loading import LoadFailed
from .server.service import ReplyOptions
from .server.zeroconf import zeroconf_available
from .settings import SETTINGS, VOICE_FILE_SUFFIXES, Setting, SettingError, values_for
from .voices.config import VoiceConfigError, VoiceLibraryConfig, page_voices_file
from .web.config import web_config

PROG = "wyoming-pocket-tts"

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


def _argument_type(setting: Setting) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            return setting.check(text)
        except SettingError as err:
            # argparse names the option itself: "argument --threads: must be at least 1".
            message = str(err).removeprefix(setting.name).removeprefix(":").strip()
            raise argparse.ArgumentTypeError(message) from None

    parse.__name__ = setting.kind.__name__  # argparse names the type in its messages
    return parse


class _Several(argparse.Action):
    """A flag that may be given several times: its one value (like any flag) when given
    once, the list of its values in order when given more, the declared default when not
    given. (argparse's "append" would add the values to the default, not replace it.)"""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:  # fmt: skip
        seen = f"_{self.dest}_given"  # the default is not a value given: the first flag replaces it
        current = getattr(namespace, self.dest, None)
        if not getattr(namespace, seen, False):
            setattr(namespace, seen, True)
            setattr(namespace, self.dest, values)
            return
        given = current if isinstance(current, list) else [current]
        setattr(namespace, self.dest, [*given, values])


def _one_value_type(setting: Setting) -> Callable[[str], Any]:
    """The argparse type of one occurrence of a `multiple` setting's flag."""
    parse = _argument_type(setting)

    def parse_one(text: str) -> Any:
        return parse(text)[0]

    parse_one.__name__ = parse.__name__
    return parse_one


def _add_setting(parser: argparse.ArgumentParser, setting: Setting) -> None:
    if setting.kind is bool:
        action = "store_false" if setting.default else "store_true"
        parser.add_argument(setting.option, dest=setting.name, action=action, help=setting.help)
        return
    shown = "" if setting.default is None else f" (default {setting.default:g})" if isinstance(
        setting.default, float) else f" (default {setting.default})"  # fmt: skip
    if setting.multiple:
        parser.add_argument(setting.option, dest=setting.name, action=_Several, default=setting.default,
                            type=_one_value_type(setting), metavar=setting.metavar,
                            help=setting.help + shown)  # fmt: skip
        return
    parser.add_argument(
        setting.option,
        dest=setting.name,
        type=_argument_type(setting),
        default=setting.default,
        metavar=setting.metavar,
        nargs="?" if setting.const is not None else None,
        const=setting.const,
        help=setting.help + shown,
    )
    if setting.off_flag is not None:
        parser.add_argument(setting.off_flag, dest=setting.name, action="store_const", const=setting.off_value,
                            help=f"the same as {setting.option} {setting.off_value}")  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Wyoming text-to-speech server for Home Assistant, on Kyutai's Pocket TTS.",
    )
    for setting in SETTINGS:
        _add_setting(parser, setting)
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    return parser


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

    models = tuple(name.strip() for name in ([args.model] if isinstance(args.model, str) else args.model))
    for model in models:
        if not model:
            raise UsageError("--model is empty")
        if not model.startswith("hf://") and names_config_file(model):
            if not Path(model).is_file():
                raise UsageError(f"--model {model}: no such file")
    repeated = sorted({model for model in models if models.count(model) > 1})
    if repeated:
        raise UsageError(f"--model {repeated[0]} is given twice")

    if args.voice is not None and _looks_like_path(args.voice) and not Path(args.voice).is_file():
        raise UsageError(f"--voice {args.voice}: no such file")
    if args.voices_file is not None and not args.voices_file.is_file():
        raise UsageError(f"--voices {args.voices_file}: no such file")
    if args.voices_dir is not None and not args.voices_dir.is_dir():
        raise UsageError(f"--voices-dir {args.voices_dir}: no such directory")

    data_dir: Path = args.data_dir or default_data_dir()
    _warn_if_unwritable(data_dir)

    if args.zeroconf_name is not None:
        if urlparse(args.uri).scheme != "tcp":
            raise UsageError("--zeroconf needs a tcp:// --uri")
        if not zeroconf_available():
            raise UsageError("--zeroconf needs the zeroconf package: pip install zeroconf")

    voices_file = args.voices_file
    if voices_file is None:
        # The voices page's own voices file, kept in the voices folder (docs/voices-page.md).
        kept = page_voices_file(args.voices_dir or data_dir / "voices")
        voices_file = kept if kept.is_file() else None

    values = {
        **vars(args),
        "model": models[0],
        "data_dir": data_dir,
        "voices_file": voices_file,
        # Read here, not as the option's default, so --help never shows the token.
        "hf_token": args.hf_token or os.environ.get("HF_TOKEN") or None,
    }
    try:
        return ServerConfig(
            **values_for("server", values),
            more_models=models[1:],
            library=VoiceLibraryConfig(**values_for("library", values)),
            generation=GenerationOptions(**values_for("generation", values, drop_none=True)),
            reply=ReplyOptions(**values_for("reply", values)),
            web=web_config(args.http, args.http_token, args.http_ingress),
        )
    except (SettingError, VoiceConfigError) as err:
        raise UsageError(str(err)) from None


def _warn_if_unwritable(data_dir: Path) -> None:
    """A read-only data dir (issue 21) only costs the caches: say so once, and go on."""
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        problem = f"cannot create it ({err.strerror})"
    else:
        if os.access(data_dir, os.W_OK):
            return
        problem = "not writable"
    _LOGGER.warning("--data-dir %s: %s; encoded voices are kept in memory only, and downloads "
                    "need a writable HF_HOME", data_dir, problem)  # fmt: skip


# OpenMP's threads (torch's thread pool) sleep as soon as they are idle instead of spinning
# for a while first. A frame's products on several threads each end at a barrier; on a
# machine whose cores other work also wants (a Home Assistant box), a spinning thread
# burns the time slice its partner needed, and the first frame of a reply stretched from
# ~0.2 s to 3-9 s (server CPU 0.16-0.24 s against 0.7-1.5 s per first audio, measured side
# by side under a load average of 16-20, docs/precision.md). Set before torch is imported
# (the loader thread imports it); a value in the environment wins.
OPENMP_WAIT_POLICY = "PASSIVE"


def idle_threads_sleep(environ: MutableMapping[str, str] = os.environ) -> None:
    """Make OpenMP's idle threads sleep (OMP_WAIT_POLICY), unless the environment says otherwise."""
    environ.setdefault("OMP_WAIT_POLICY", OPENMP_WAIT_POLICY)


# At most this many information lines of one kind per window (then one saying how many
# were held back): 43,200 of each kind a day at most, a few MB.
INFO_BURST = 30
INFO_WINDOW_S = 60.0


def main(argv: Sequence[str] | None = None) -> NoReturn:
    idle_threads_sleep()
    parser = build_parser()
    args = parser.parse_args(argv)
    # Before the checks, so that their warnings (an unwritable data dir) reach the log.
    stderr = logging.StreamHandler(sys.stderr)  # stdout may be the Wyoming stream (stdio://)
    stderr.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    # A burst of identical warnings (many clients making one mistake) is cut to a few.
    stderr.addFilter(RepeatLimiter())
    # And of one kind of information line: a client opening and closing connections in a
    # loop wrote two lines each (2-4 GB a day); a household's requests stay far below this.
    stderr.addFilter(RepeatLimiter(INFO_BURST, INFO_WINDOW_S, logging.INFO, up_to=logging.INFO))
    # basicConfig leaves a logging set up before (an embedding program, pytest) alone.
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.INFO, handlers=[stderr])
    try:
        config = config_from_args(args)
    except UsageError as err:
        parser.error(str(err))

    _LOGGER.info("%s %s", PROG, __version__)
    _LOGGER.debug("Settings: %s", replace(config, hf_token="***" if config.hf_token else None))
    try:
        asyncio.run(serve(config, own_signals=True))
    except (StartError, LoadFailed) as err:
        parser.exit(1, f"{PROG}: error: {err}\n")
    except KeyboardInterrupt:
        pass
    # Leave without interpreter teardown: a thread may still be inside torch (the loader,
    # when stopped while loading; a session's FlowLM thread finishing its last step after a
    # cancel), and teardown under it aborts ("terminate called without an active
    # exception", exit 134 instead of 0). Nothing is left to save: the disk cache writes
    # atomically, and the connections have been closed.
    logging.shutdown()
    with contextlib.suppress(OSError, ValueError):  # stdio://: the client may be gone
        sys.stdout.flush()
    os._exit(0)


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())


if __name__ == "__main__":
    run()
