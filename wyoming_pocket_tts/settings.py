"""Every setting of the server, declared once.

A `Setting` says what a value is (type, default, bounds, help), where it applies (`scope`:
the server, the voice library, the generation options, or only the command line), whether
a voices-file entry may set it for one voice (`per_voice`), and its add-on option, if any.
From `SETTINGS` are derived:

- the command line (`wyoming_pocket_tts.__main__.build_parser`),
- the config objects (`values_for` fills `ServerConfig`, `VoiceLibraryConfig`,
  `GenerationOptions` and `ReplyOptions`), which validate with `Setting.check`, so
  validation lives here only,
- the voices file's per-voice keys (`PER_VOICE`),
- the add-on's options and their command line (`addon/addon_options.py`); a test checks
  config.yaml and translations/en.yaml against this declaration.

Adding a setting is one entry here plus the code that uses its value. Imports no torch.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

# "reply": how the server shapes a reply around the engine (text in, audio out).
# "web": the voices page (wyoming_pocket_tts.web), off unless --http is given.
Scope = Literal["server", "library", "generation", "reply", "web", "cli"]
# How the add-on turns an option into the server's command line.
AddonPlace = Literal["argv", "share_path", "voice", "env"]

DEFAULT_ZEROCONF_NAME = "pocket-tts"
# The address the Home Assistant Supervisor's ingress proxy connects from (its developer
# documentation: an add-on with ingress accepts connections from this address only).
SUPERVISOR_INGRESS_PROXY = "172.30.32.2"
# Where the voices page listens when the add-on runs it (config.yaml's ingress_port).
ADDON_INGRESS_PORT = 8099
# Endings that make a voice given by name a file instead (--voice, the add-on's voice).
VOICE_FILE_SUFFIXES = frozenset({".wav", ".flac", ".ogg", ".mp3", ".safetensors"})


class SettingError(ValueError):
    """A value a setting does not accept; the message is one line naming the setting."""


@dataclass(frozen=True)
class FormerOption:
    """An add-on option that a setting's option replaced, still read from saved configurations.

    The Supervisor checks the saved options against the new schema at every start (and
    before an automatic update) and refuses to start an add-on whose saved value no longer
    has the option's type; an option that left the schema is dropped without a word. So the
    former option stays in config.yaml's schema, optional (`schema`, ending in "?", with no
    default in `options:`), and `values` say what each saved value now means; a value not
    in it (the former default, which most users never chose) leaves the new option alone.
    """

    name: str
    schema: str
    values: Mapping[Any, Any]


@dataclass(frozen=True)
class AddonOption:
    """A setting's option in the Home Assistant add-on (config.yaml `options`/`schema`)."""

    name: str
    # The add-on's default where it differs from the command line's; None: the same, or
    # `unset` when the command line's default is None.
    default: Any = None
    # The value meaning "not given": the flag is left off the command line.
    unset: Any = None
    # A narrower upper bound for the add-on's form than the command line accepts.
    maximum: float | None = None
    # The schema type when it cannot be derived from the setting; "catalog": the list of
    # the engine catalog's models (config.yaml spells it out; a test checks it).
    schema: str | None = None
    secret: bool = False
    place: AddonPlace = "argv"
    # For place "env": the variable the value is passed in (argv is visible in `ps`).
    env: str = ""
    # For a `multiple` setting: the add-on option holding its further values, a list
    # (config.yaml's `["type"]`); the first value stays in the single option `name`, so
    # add-on configurations written before the list existed keep working.
    more: str = ""
    # The option this one replaced, if any (see FormerOption).
    former: FormerOption | None = None


@dataclass(frozen=True)
class Setting:
    """One setting; `name` is its argparse dest and, unless `field` says otherwise, the
    name of its field in the config object of its scope."""

    name: str
    kind: type
    default: Any
    help: str
    scope: Scope
    minimum: float | None = None
    maximum: float | None = None
    # True: the value must be greater than `minimum`, not just equal to it.
    above_minimum: bool = False
    pattern: str | None = None
    # What a value matching `pattern` looks like, for the error message.
    pattern_help: str = ""
    per_voice: bool = False
    addon: AddonOption | None = None
    flag: str | None = None
    metavar: str | None = None
    field: str | None = None
    # The value of a flag given without one (--zeroconf alone).
    const: Any = None
    # The only values a str setting accepts (the add-on's form offers them as a list).
    choices: tuple[str, ...] = ()
    # A second flag that sets the value `off_value` (--no-quantize for --quantize float32).
    off_flag: str | None = None
    off_value: Any = None
    # A list: the flag may be given several times, the value is a tuple of `kind` values
    # (in the order given) and `default` is its one element when the flag is not given.
    multiple: bool = False

    @property
    def option(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    @property
    def field_name(self) -> str:
        return self.field or self.name

    def check(self, value: Any) -> Any:
        """The value, converted to `kind` and within bounds; raises SettingError. For a
        `multiple` setting, a tuple of such values (one value alone is a list of one)."""
        if value is None:
            return None
        if self.multiple:
            values = (value,) if isinstance(value, (str, Path)) else tuple(value)
            if not values:
                raise SettingError(f"{self.name} needs at least one value")
            return tuple(self.check_one(item) for item in values)
        return self.check_one(value)

    def check_one(self, value: Any) -> Any:
        """One value (of a `multiple` setting: one element), converted and within bounds."""
        if value is None:
            return None
        if self.kind is bool:
            if not isinstance(value, bool):
                raise SettingError(f"{self.name} must be true or false, not {value!r}")
            return value
        if self.kind in (int, float):
            return self._check_number(value)
        if self.kind is Path:
            return Path(value)
        text = str(value).strip()
        if self.choices and text not in self.choices:
            raise SettingError(f"{self.name}: {value!r} is not one of {', '.join(self.choices)}")
        if self.pattern is not None and not re.fullmatch(self.pattern, text):
            raise SettingError(f"{self.name}: {value!r} is not valid (expected {self.pattern_help or self.pattern})")
        return text

    def _check_number(self, value: Any) -> float | int:
        kind_name = "whole number" if self.kind is int else "number"
        if isinstance(value, bool):
            raise SettingError(f"{self.name} must be a {kind_name}, not {value!r}")
        try:
            number = self.kind(value)
        except (TypeError, ValueError):
            raise SettingError(f"{self.name} must be a {kind_name}, not {value!r}") from None
        if self.kind is int and isinstance(value, float) and value != number:
            raise SettingError(f"{self.name} must be a whole number, not {value!r}")
        # NaN passes every bound below (each comparison is false), and infinity any open one.
        if not math.isfinite(number):
            raise SettingError(f"{self.name} must be a finite {kind_name}, not {value!r}")
        if self.minimum is not None:
            if self.above_minimum and number <= self.minimum:
                raise SettingError(f"{self.name} must be greater than {self.minimum:g}, got {value}")
            if number < self.minimum:
                raise SettingError(f"{self.name} must be at least {self.minimum:g}, got {value}")
        if self.maximum is not None and number > self.maximum:
            raise SettingError(f"{self.name} must be at most {self.maximum:g}, got {value}")
        return number

    @property
    def addon_default(self) -> Any:
        assert self.addon is not None
        if self.addon.default is not None:
            return self.addon.default
        return self.default if self.default is not None else self.addon.unset

    @property
    def addon_schema(self) -> str:
        """The config.yaml schema type of the add-on option."""
        assert self.addon is not None
        if self.addon.schema is not None:
            return self.addon.schema
        if self.kind is bool:
            return "bool"
        if self.kind in (int, float):
            low_bound = self.minimum
            if isinstance(self.addon.unset, (int, float)) and low_bound is not None:
                low_bound = min(low_bound, self.addon.unset)  # threads 0: "automatic"
            low = "" if low_bound is None else _schema_number(self.kind, low_bound)
            high_bound = self.addon.maximum if self.addon.maximum is not None else self.maximum
            high = "" if high_bound is None else _schema_number(self.kind, high_bound)
            return f"{self.kind.__name__}({low},{high})"
        if self.choices:
            return f"list({'|'.join(self.choices)})"
        if self.pattern is not None:
            # The empty default ("not given") must match too: the Supervisor checks it.
            return f"match(({self.pattern})?)?"
        return "password?" if self.addon.secret else "str?"


def _schema_number(kind: type, value: float) -> str:
    return str(int(value)) if kind is int else f"{float(value)}"


_LANGUAGE_CODE = r"[a-z]{2,3}(-[A-Za-z0-9]{2,8})*"
# --quantize: "auto" measures which of the other two is faster here (server/precision.py).
PRECISIONS = ("auto", "int8", "float32")

SETTINGS: tuple[Setting, ...] = (
    Setting("uri", str, "tcp://0.0.0.0:10200", "where to listen: tcp://HOST:PORT, unix://PATH or stdio://",
            "server"),
    Setting("model", str, "english",
            'model: a catalog name ("english", "french", ...), "demo" (tiny, random weights: noise, for '
            "checking the pipeline offline), a local config .yaml, or hf://repo/path.yaml@rev; give it "
            "several times to serve several models (languages): the first is the default voice's", "server",
            multiple=True, addon=AddonOption("model", schema="catalog", more="more_models")),
    Setting("max_loaded_models", int, 2,
            "models kept in memory at once; others load on first use and the least recently used is "
            "unloaded (2: two full-size models fit a 4 GB Raspberry Pi next to Home Assistant)", "server",
            # unset=2, the default: left off the add-on's command line, which one model needs.
            minimum=1, addon=AddonOption("max_loaded_models", maximum=8, unset=2)),
    Setting("language", str, None,
            "language code of the voices of a model whose language cannot be known (a local config); "
            "default: the catalog's, or the one the model's file name starts with", "server",
            pattern=_LANGUAGE_CODE, pattern_help="a language code such as en or pt-BR", metavar="CODE",
            addon=AddonOption("language", unset="")),
    Setting("voice", str, None, "default voice: a voice name, or a path to a recording or an exported state",
            "library", field="default_voice", addon=AddonOption("voice", unset="", place="voice")),
    Setting("voices_file", Path, None, "household voices file (YAML)", "library", flag="--voices",
            metavar="FILE", addon=AddonOption("voices_file", unset="", place="share_path")),
    Setting("voices_dir", Path, None, "folder of voice recordings / exported states, one voice per file",
            "library", metavar="DIR",
            addon=AddonOption("voices_dir", default="voices", unset="", place="share_path")),
    Setting("include_predefined", bool, True, "offer only your own voices, not the model's predefined ones",
            "library", flag="--no-predefined-voices"),
    Setting("data_dir", Path, None, "caches (encoded voices, downloads); default: $XDG_DATA_HOME/"
            "wyoming-pocket-tts", "library", metavar="DIR"),
    Setting("hf_token", str, None,
            "Hugging Face token for the gated voice-cloning weights (default: $HF_TOKEN)", "server",
            metavar="TOKEN", addon=AddonOption("hf_token", unset="", secret=True, place="env", env="HF_TOKEN")),
    Setting("temperature", float, None, "sampling temperature (default: the model's)", "generation",
            minimum=0.0, per_voice=True, addon=AddonOption("temperature", default=0.3, maximum=2.0)),
    # The bounds are the audio package's (a test holds them equal): 0.5-2.0, 0-10 s.
    Setting("length_scale", float, 1.0,
            "speaking rate as Piper's length scale: 1.25 slower, 0.8 faster, pitch kept (0.5-2.0)", "reply",
            minimum=0.5, maximum=2.0, per_voice=True, metavar="X", addon=AddonOption("length_scale", unset=1.0)),
    Setting("sentence_silence", float, 0.0, "seconds of silence between the sentences of a reply (0-10)",
            "reply", minimum=0.0, maximum=10.0, per_voice=True, metavar="SECONDS",
            addon=AddonOption("sentence_silence", unset=0.0)),
    Setting("normalize", bool, True,
            "send the text to the model as written: no rewriting of numbers, units, dates, markdown "
            "and emoji as words", "reply", flag="--no-normalize", addon=AddonOption("normalize_text")),
    Setting("decode_steps", int, None, "flow decode steps per frame (default 1)", "generation", minimum=1),
    Setting("eos_threshold", float, None, "end-of-speech threshold (default: the model's)", "generation"),
    Setting("quantize", str, "auto",
            "precision of the model's main layers: int8 (faster on most CPUs, a slightly different sound; "
            "--quantize alone), float32 (--no-quantize), or auto: time both on this CPU at the first start "
            "and keep the faster, remembered in the data dir (docs/precision.md)", "server",
            field="precision", choices=PRECISIONS, const="int8", off_flag="--no-quantize", off_value="float32",
            metavar="auto|int8|float32",
            addon=AddonOption("precision", unset="auto",
                              former=FormerOption("quantize", "bool?", {True: "int8"}))),
    Setting("threads", int, None, "torch threads (default: the engine decides)", "server", minimum=1,
            addon=AddonOption("threads", unset=0, maximum=64)),
    Setting("voice_cache_size", int, 8, "encoded voices kept in memory, all models together", "library", minimum=1,
            field="cache_size", addon=AddonOption("voice_cache_size", maximum=64)),
    Setting("voice_cache_mb", float, None, "memory bound of the voice cache in MiB (default: count only)",
            "library", minimum=0.0, above_minimum=True, field="cache_mb"),
    Setting("disk_cache_mb", float, 512.0, "disk bound of the encoded-voice cache in MiB, 0 disables it",
            "library", minimum=0.0),
    Setting("max_concurrent", int, 4,
            "replies spoken at once, batched together (the batch bound); more requests wait in line", "server",
            minimum=1),
    Setting("max_queue_wait", float, 5.0,
            "seconds a new request may wait for a synthesis slot before it gets a 'server busy' error "
            "(about what a Voice PE satellite waits for an answer to start)", "server", minimum=0.0, above_minimum=True),
    Setting("stall_timeout", float, 30.0, "disconnect a client that takes no audio for this many seconds",
            "server", minimum=0.0, above_minimum=True),
    Setting("max_queued_requests", int, 2,
            "requests one connection may have queued, the one being answered included", "server", minimum=1),
    Setting("idle_timeout", float, 60.0,
            "close a connection with nothing in flight that sends no complete event for this many seconds",
            "server", minimum=0.0, above_minimum=True),
    Setting("max_connections", int, 64,
            "open connections at most (lowered to fit under the open-file limit)", "server", minimum=1),
    Setting("download_retry_max", float, 120.0,
            "longest wait in seconds between two attempts to download the model while the Hugging Face hub "
            "cannot be reached (the server keeps answering, and speaks once a download succeeds)", "server",
            minimum=0.0, above_minimum=True, metavar="SECONDS"),
    Setting("zeroconf_name", str, None,
            f"announce the server over mDNS for Home Assistant (name default {DEFAULT_ZEROCONF_NAME})",
            "server", flag="--zeroconf", metavar="NAME", const=DEFAULT_ZEROCONF_NAME),
    # The voices page (docs/voices-page.md). The add-on turns it on by itself, behind
    # Home Assistant's ingress (addon/addon_options.py): no add-on option of its own.
    Setting("http", str, None,
            "serve the voices page (record, upload, preview and tune voices) at HOST:PORT, e.g. "
            "127.0.0.1:8080; off by default; an address other than loopback needs --http-token",
            "web", metavar="HOST:PORT", field="listen", pattern=r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):[0-9]{1,5}",
            pattern_help="HOST:PORT, e.g. 127.0.0.1:8080 or [::1]:8080"),
    Setting("http_token", str, None,
            "a secret the voices page asks for (open the page once as http://HOST:PORT/?token=TOKEN); "
            "every request without it is refused (default: $POCKET_TTS_HTTP_TOKEN)", "web", metavar="TOKEN",
            field="token", pattern=r"[A-Za-z0-9._~+/=-]{16,256}",
            pattern_help="16 to 256 letters, digits or ._~+/=-"),
    Setting("http_ingress", str, None,
            "accept the voices page's requests only from Home Assistant's ingress proxy (the add-on "
            f"does this; ADDRESS default {SUPERVISOR_INGRESS_PROXY})", "web", metavar="ADDRESS",
            field="ingress_proxy", const=SUPERVISOR_INGRESS_PROXY, pattern=r"[0-9A-Fa-f:.]+",
            pattern_help="an IP address"),
    Setting("debug", bool, False, "log debug messages", "cli", addon=AddonOption("debug")),
)  # fmt: skip

BY_NAME: Mapping[str, Setting] = {setting.name: setting for setting in SETTINGS}
# Keys a voices-file entry may set for its voice, besides name/audio/state/description.
PER_VOICE: Mapping[str, Setting] = {setting.name: setting for setting in SETTINGS if setting.per_voice}
ADDON: tuple[Setting, ...] = tuple(setting for setting in SETTINGS if setting.addon is not None)


def in_scope(scope: Scope) -> tuple[Setting, ...]:
    return tuple(setting for setting in SETTINGS if setting.scope == scope)


def default(name: str) -> Any:
    """The declared default of a setting (config dataclasses take their field defaults here)."""
    return BY_NAME[name].default


def values_for(scope: Scope, values: Mapping[str, Any], *, drop_none: bool = False) -> dict[str, Any]:
    """Keyword arguments of a scope's config object from values keyed by setting name."""
    fields = {s.field_name: values[s.name] for s in in_scope(scope) if s.name in values}
    return {k: v for k, v in fields.items() if v is not None} if drop_none else fields


def check_fields(scope: Scope, config: object, skip: Iterable[str] = ()) -> None:
    """Validate a config object's fields of `scope` with their settings; raises SettingError."""
    for setting in in_scope(scope):
        if setting.field_name not in skip and hasattr(config, setting.field_name):
            setting.check(getattr(config, setting.field_name))


def check_per_voice(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The per-voice settings of a voices-file entry, validated; raises SettingError."""
    return {name: setting.check(entry[name]) for name, setting in PER_VOICE.items() if name in entry}
