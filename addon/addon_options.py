"""The add-on's options (/data/options.json) and the server command line they give.

The options, their defaults and how each becomes a flag come from the server's settings
declaration (`wyoming_pocket_tts.settings`, installed in the image next to this script);
a test checks config.yaml and translations/en.yaml against it.

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

from wyoming_pocket_tts.settings import ADDON, ADDON_INGRESS_PORT, SETTINGS, VOICE_FILE_SUFFIXES, Setting

_LOGGER = logging.getLogger(__name__)

# The port inside the container. Home Assistant reaches the add-on on the internal
# network at this port whatever host port the user maps (if any).
DEFAULT_PORT = 10200

# Option name -> its setting. The defaults equal `options:` in config.yaml (a test checks
# it); they are also what a plain `docker run` without /data/options.json gets.
OPTIONS: dict[str, Setting] = {setting.addon.name: setting for setting in ADDON if setting.addon}
# List option -> its setting: the further values of a setting given several times (models).
MORE_OPTIONS: dict[str, Setting] = {setting.addon.more: setting for setting in ADDON
                                    if setting.addon and setting.addon.more}  # fmt: skip
DEFAULTS: dict[str, Any] = {
    **{name: setting.addon_default for name, setting in OPTIONS.items()},
    **{name: [] for name in MORE_OPTIONS},
}
# Former option -> the setting whose option replaced it (see settings.FormerOption): saved
# configurations of older versions still hold it, and it still means what it meant.
FORMER_OPTIONS: dict[str, Setting] = {setting.addon.former.name: setting for setting in ADDON
                                      if setting.addon and setting.addon.former}  # fmt: skip


class OptionsError(ValueError):
    """options.json is unreadable or holds a value of the wrong type."""


@dataclass(frozen=True)
class Layout:
    """Where things live in the container; tests point these at temporary folders."""

    python: str
    data_dir: PurePosixPath = PurePosixPath("/data")
    share_dir: PurePosixPath = PurePosixPath("/share/pocket_tts")
    port: int = DEFAULT_PORT
    # Where the voices page listens for Home Assistant's ingress (config.yaml's
    # ingress_port); None: no page (a plain `docker run`, outside the Supervisor).
    ingress_port: int | None = None


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
    """Defaults for missing keys, unknown keys dropped, values coerced to their type, a
    former option's value carried over to the option that replaced it."""
    options = dict(DEFAULTS)
    for key, value in raw.items():
        if key in FORMER_OPTIONS:
            continue
        if key not in DEFAULTS:
            # Options of a newer or older add-on version must not stop the start.
            _LOGGER.warning("Ignoring unknown option %r", key)
            continue
        options[key] = _coerce(key, value)
    for key, setting in FORMER_OPTIONS.items():
        if raw.get(key) is not None:
            _carry_over(options, key, raw[key], setting)
    return options


def _carry_over(options: dict[str, Any], key: str, value: Any, setting: Setting) -> None:
    """A saved value of a former option (`quantize: true`) means what it meant, unless
    the option that replaced it was set away from its default."""
    assert setting.addon is not None and setting.addon.former is not None
    former, name = setting.addon.former, setting.addon.name
    if former.schema.rstrip("?") == "bool" and not isinstance(value, bool):
        raise OptionsError(f"option {key!r} must be true or false, not {value!r}")
    meaning = former.values.get(value)
    if meaning is None:
        _LOGGER.info("Option %r: %r was its default; %r decides (%s)", key, value, name, options[name])
    elif options[name] != DEFAULTS[name]:
        _LOGGER.info("Option %r: %r is replaced by %r, which is set: %s", key, value, name, options[name])
    else:
        _LOGGER.info("Option %r: %r now means %r: %s (set %r and remove %r to silence this)", key, value,
                     name, meaning, name, key)  # fmt: skip
        options[name] = meaning


def _coerce(key: str, value: Any) -> Any:
    wanted = type(DEFAULTS[key])
    if value is None:
        return DEFAULTS[key]
    if wanted is list:
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise OptionsError(f"option {key!r} must be a list of names, not {value!r}")
        return [item.strip() for item in value if item.strip()]
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
    text = str(value).strip()
    choices = OPTIONS[key].choices if key in OPTIONS else ()
    if choices and text not in choices:
        raise OptionsError(f"option {key!r} must be one of {', '.join(choices)}, not {value!r}")
    return text


def _in_share(value: str, layout: Layout) -> str:
    """Relative paths in options are relative to the add-on's share folder."""
    path = PurePosixPath(value)
    return str(path if path.is_absolute() else layout.share_dir / path)


def voices_dir_path(options: Mapping[str, Any], layout: Layout) -> PurePosixPath | None:
    """The voices folder the server will scan, or None for the server's own default."""
    value = options["voices_dir"]
    return PurePosixPath(_in_share(value, layout)) if value else None


def _flag_value(value: Any) -> str:
    # "0.3" not "0.30000000000000004"; "1" for 1.0 (argparse reads both).
    return format(value, "g") if isinstance(value, float) else str(value)


def _option_args(setting: Setting, value: Any, layout: Layout) -> list[str]:
    """The server's arguments for one add-on option (none for an unset one)."""
    assert setting.addon is not None
    if setting.kind is bool:
        return [setting.option] if value != setting.default else []
    if value == setting.addon.unset:
        return []
    place = setting.addon.place
    if place == "share_path":
        value = _in_share(value, layout)
    elif place == "voice" and ("/" in value or PurePosixPath(value).suffix.lower() in VOICE_FILE_SUFFIXES):
        value = _in_share(value, layout)  # a name stays a name; a file is in the share folder
    return [setting.option, _flag_value(value)]


# Every flag of the server's command line -> the name of the setting it sets (both flags
# of a setting that has an "off" flag: --quantize and --no-quantize).
_FLAGS: dict[str, str] = {
    **{setting.option: setting.name for setting in SETTINGS},
    **{setting.off_flag: setting.name for setting in SETTINGS if setting.off_flag},
}


def _flag_setting(arg: str) -> str | None:
    """The setting an argument of the command line sets, as the server's argparse reads it:
    `--flag`, `--flag=value`, or a prefix that names one flag only (`--mod french`)."""
    if not arg.startswith("--") or arg == "--":
        return None
    flag = arg.split("=", 1)[0]
    if flag in _FLAGS:
        return _FLAGS[flag]
    matches = {name for known, name in _FLAGS.items() if known.startswith(flag)}
    return matches.pop() if len(matches) == 1 else None


def settings_given(args: list[str]) -> set[str]:
    """Names of the settings that command-line arguments set (values are skipped over
    only by not looking like flags: a value never starts with "--")."""
    return {name for name in map(_flag_setting, args) if name is not None}


def build_command(options: Mapping[str, Any], layout: Layout, extra_args: list[str] | None = None) -> ServerCommand:
    """The server's argv and environment for normalized options (see normalize_options).

    `extra_args` (`docker run IMAGE --model french`) come last, and a setting they give
    replaces the options' value for it rather than being added to it: `--model` may be
    given several times (several models), so the options' `--model english` followed by
    the user's `--model english` was refused as given twice, and `--model french` served
    English too.
    """
    extra = list(extra_args or [])
    overridden = settings_given(extra)
    argv = [layout.python, "-m", "wyoming_pocket_tts"]
    if "uri" not in overridden:
        argv += ["--uri", f"tcp://0.0.0.0:{layout.port}"]
    if "data_dir" not in overridden:
        argv += ["--data-dir", str(layout.data_dir)]
    if layout.ingress_port is not None and "http" not in overridden:
        # The voices page, answering the Supervisor's ingress proxy only (docs/voices-page.md).
        argv += ["--http", f"0.0.0.0:{layout.ingress_port}", "--http-ingress"]
    # Downloaded weights go to /data/huggingface, which config.yaml excludes from backups.
    env = {"HF_HOME": str(layout.data_dir / "huggingface")}
    for name, setting in OPTIONS.items():
        if setting.name in overridden:
            continue
        if setting.addon is not None and setting.addon.place == "env":
            # The environment, not --hf-token: argv is visible in `ps` and in our log.
            if options[name] != setting.addon.unset:
                env[setting.addon.env] = options[name]
            continue
        argv += _option_args(setting, options[name], layout)
        if setting.addon is not None and setting.addon.more:
            for value in options[setting.addon.more]:
                argv += [setting.option, _flag_value(value)]  # given again: one more value
    argv += extra
    return ServerCommand(argv=argv, env=env)
