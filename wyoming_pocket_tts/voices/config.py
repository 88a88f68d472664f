"""Plain data of the voice library and the parsing of the voices file and directory.

Nothing here touches the model: the result is a list of `VoiceSpec`s that say where each
voice comes from. Checking them against the model and the files is `catalog.py`'s job.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Mapping
from typing import Any

import yaml

from ..core.files import read_regular, unreadable
from ..core.logsafe import escape
from ..core.voices import VoiceKind
from ..settings import PER_VOICE, VOICE_FILE_SUFFIXES, SettingError, check_fields, check_per_voice, default

_LOGGER = logging.getLogger(__name__)

STATE_SUFFIXES = frozenset({".safetensors"})
AUDIO_SUFFIXES = VOICE_FILE_SUFFIXES - STATE_SUFFIXES
_VOICE_SUFFIXES = AUDIO_SUFFIXES | STATE_SUFFIXES

_ENTRY_KEYS = frozenset({"name", "audio", "state", "description", "model", *PER_VOICE})
_TOP_KEYS = frozenset({"default", "voices"})
# A voices file describes a household's voices: a few kilobytes. One larger than this is
# not read (it would be parsed at every change, in the thread that answers describes).
MAX_VOICES_FILE_BYTES = 256 * 1024
# Voices offered from the voices file and folder together (the file's first, in its
# order, then the folder's by name); the rest are left out with a warning. Home
# Assistant's voice picker is a drop-down list, and each offered voice is checked when
# the list is built: thousands of files in the folder must not make describe slow.
MAX_DECLARED_VOICES = 100


class VoiceConfigError(Exception):
    """The voices configuration cannot be used at all (message meant for the user)."""


@dataclass(frozen=True)
class ModelScope:
    """Which voices belong to one model of a server that serves several (`--model` given
    more than once): the voices-file entries whose `model:` names it, and for the first
    model also the entries without `model:`, the voices folder and the default voice."""

    # What an entry's `model:` may say for this model: the name given on the command
    # line, and its short label (a config's file stem).
    names: frozenset[str]
    first: bool
    # The other models' names: an entry naming none of the server's models is an error,
    # reported (once) by the first model's library.
    others: frozenset[str] = frozenset()

    def owns(self, model: str | None) -> bool:
        return self.first if model is None else model in self.names

    def unknown(self, model: str | None) -> bool:
        return model is not None and model not in self.names and model not in self.others


@dataclass(frozen=True)
class VoiceLibraryConfig:
    """Settings of the voice library, filled from the command line by the server.

    Defaults and bounds are the declared settings' (`wyoming_pocket_tts.settings`).
    """

    data_dir: Path
    # A voice name, or a path to a recording / exported state (becomes a voice named after
    # its file stem). None: the model's first predefined voice, else the first declared one.
    default_voice: str | None = None
    voices_file: Path | None = None
    # None means `<data_dir>/voices`; a directory that does not exist is simply empty.
    voices_dir: Path | None = None
    include_predefined: bool = default("include_predefined")
    # Bounds of the in-memory cache, for the whole server (every model's voices together:
    # voices/memory.py). They are totals: the pinned default voices count towards them (so
    # they bound real memory) but are never evicted.
    cache_size: int = default("voice_cache_size")
    cache_mb: float | None = default("voice_cache_mb")
    # Bound of the on-disk cache of encoded recordings; 0 turns the disk cache off.
    disk_cache_mb: float = default("disk_cache_mb")
    # None: the server's only model, which every voice belongs to.
    scope: ModelScope | None = None

    def __post_init__(self) -> None:
        for name in ("data_dir", "voices_file", "voices_dir"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, Path(value))
        try:
            check_fields("library", self)
        except SettingError as err:
            raise VoiceConfigError(str(err)) from None

    @property
    def effective_voices_dir(self) -> Path:
        return self.voices_dir if self.voices_dir is not None else self.data_dir / "voices"

    @property
    def disk_cache_dir(self) -> Path:
        return self.data_dir / "voice_cache"


@dataclass(frozen=True)
class VoiceSpec:
    """Where one voice comes from; `origin` names the place it was declared, for messages."""

    name: str
    kind: VoiceKind
    origin: str
    path: Path | None = None
    description: str | None = None
    # Declared voices are pre-encoded at start; the model's predefined voices offered
    # automatically are not (that would download every one of them).
    declared: bool = True
    # Per-voice settings from the voices file (`settings.PER_VOICE`), validated.
    settings: Mapping[str, Any] = field(default_factory=dict)
    # The voices file's `model:` (a server with several models); None: the first model.
    model: str | None = None

    def where(self) -> str:
        """The voice and its file, as every message about it names them (on one log line)."""
        source = escape(self.path) if self.path is not None else "predefined voice of the model"
        return f"voice {self.name!r} ({source}, from {self.origin})"


@dataclass
class VoicesFile:
    """The parsed voices file: entries that made sense, in file order."""

    default: str | None = None
    voices: list[VoiceSpec] = field(default_factory=list)


def kind_of_path(path: Path) -> VoiceKind | None:
    suffix = path.suffix.lower()
    if suffix in AUDIO_SUFFIXES:
        return "recording"
    if suffix in STATE_SUFFIXES:
        return "state"
    return None


def parse_voices_file(path: Path) -> VoicesFile:
    """Read the voices file.

    A file that cannot be read or whose layout is wrong raises VoiceConfigError: nothing in it
    can be trusted. A single bad entry is logged (naming the file and the voice) and skipped,
    so the other voices still work.
    """
    origin = escape(path)  # in every message about its entries: a name may hold a newline
    try:
        text = read_regular(path, MAX_VOICES_FILE_BYTES).decode("utf-8")
    except OSError as err:
        raise VoiceConfigError(unreadable("voices file", path, err)) from None
    except UnicodeDecodeError as err:
        raise VoiceConfigError(f"voices file {origin} cannot be read: {escape(err)}") from None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as err:
        where = ""
        mark = getattr(err, "problem_mark", None)
        if mark is not None:
            where = f" at line {mark.line + 1}, column {mark.column + 1}"
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise VoiceConfigError(f"voices file {origin} is not valid YAML{where}: {escape(problem)}") from None

    if document is None:
        return VoicesFile()
    if not isinstance(document, dict):
        raise VoiceConfigError(
            f"voices file {origin}: expected a mapping with 'default' and 'voices', "
            f"found {type(document).__name__}"
        )
    unknown = sorted(str(key) for key in document if key not in _TOP_KEYS)
    if unknown:
        # A misspelt top-level key would silently drop every voice: refuse it instead.
        raise VoiceConfigError(
            f"voices file {origin}: unknown key(s) {escape(', '.join(unknown))} (expected 'default' and 'voices')"
        )
    default = document.get("default")
    if default is not None and not isinstance(default, str):
        raise VoiceConfigError(f"voices file {origin}: 'default' must be a voice name, not {default!r}")
    entries = document.get("voices")
    if entries is None:
        entries = []
    if not isinstance(entries, list):
        raise VoiceConfigError(f"voices file {origin}: 'voices' must be a list of voices")

    if len(entries) > MAX_DECLARED_VOICES:
        _LOGGER.warning("voices file %s declares %d voices; only the first %d are read (at most %d voices are "
                        "offered)", origin, len(entries), MAX_DECLARED_VOICES, MAX_DECLARED_VOICES)  # fmt: skip
        entries = entries[:MAX_DECLARED_VOICES]
    result = VoicesFile(default=default.strip() if default else None)
    base = path.parent
    for index, entry in enumerate(entries, start=1):
        spec = _parse_entry(entry, index, base, origin)
        if spec is not None:
            result.voices.append(spec)
    return result


def _parse_entry(entry: Any, index: int, base: Path, origin: str) -> VoiceSpec | None:
    # A bare string is a predefined voice: `- alba` reads as naturally as `- name: alba`.
    if isinstance(entry, str):
        entry = {"name": entry}
    if not isinstance(entry, dict):
        _LOGGER.error("voices file %s: entry %d is not a mapping with a 'name'; skipped", origin, index)
        return None
    name = entry.get("name")
    if not isinstance(name, str) or not name.strip():
        _LOGGER.error(
            "voices file %s: entry %d has no valid 'name' (got %r; quote it if it is a number); skipped",
            origin,
            index,
            name,
        )
        return None
    name = name.strip()
    unknown = sorted(str(key) for key in entry if key not in _ENTRY_KEYS)
    if unknown:
        # A typo such as `adio:` would otherwise turn a recording into a predefined voice.
        _LOGGER.error(
            "voices file %s: voice %r has unknown key(s) %s (allowed: %s); skipped",
            origin,
            name,
            escape(", ".join(unknown)),
            ", ".join(sorted(_ENTRY_KEYS)),
        )
        return None
    try:
        settings = check_per_voice(entry)
    except SettingError as err:
        _LOGGER.error("voices file %s: voice %r: %s; skipped", origin, name, escape(err))
        return None
    audio, state = entry.get("audio"), entry.get("state")
    if audio is not None and state is not None:
        _LOGGER.error("voices file %s: voice %r has both 'audio' and 'state'; give one; skipped", origin, name)
        return None
    description = entry.get("description")
    if description is not None and not isinstance(description, str):
        description = str(description)
    model = entry.get("model")
    if model is not None and (not isinstance(model, str) or not model.strip()):
        _LOGGER.error("voices file %s: voice %r: 'model' must be a model name; skipped", origin, name)
        return None
    model = model.strip() if model else None

    if audio is None and state is None:
        return VoiceSpec(name=name, kind="predefined", origin=origin, description=description, settings=settings,
                         model=model)
    key, value = ("audio", audio) if audio is not None else ("state", state)
    if not isinstance(value, str) or not value.strip():
        _LOGGER.error("voices file %s: voice %r: '%s' must be a file path; skipped", origin, name, key)
        return None
    source = Path(value.strip()).expanduser()
    if not source.is_absolute():
        source = base / source
    kind = kind_of_path(source)
    expected: VoiceKind = "recording" if key == "audio" else "state"
    if kind != expected:
        allowed = AUDIO_SUFFIXES if key == "audio" else STATE_SUFFIXES
        _LOGGER.error(
            "voices file %s: voice %r: %s is not a %s file (expected %s); skipped",
            origin,
            name,
            escape(source),
            "recording" if key == "audio" else "voice state",
            " ".join(sorted(allowed)),
        )
        return None
    return VoiceSpec(name=name, kind=kind, origin=origin, path=source, description=description,
                     settings=settings, model=model)


def voices_dir_names(directory: Path) -> list[str]:
    """The names of the files in `directory` that may be voices (a recording's or a voice
    state's suffix, not hidden, not a folder), sorted ignoring case. One `os.scandir` pass
    and nothing opened: it runs at every describe, whatever the folder holds. Empty if
    the folder does not exist or cannot be listed."""
    names = []
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                # Hidden files are editors' and sync tools' leftovers, not voices.
                if entry.name.startswith(".") or os.path.splitext(entry.name)[1].lower() not in _VOICE_SUFFIXES:
                    continue
                try:
                    if entry.is_dir():
                        continue
                except OSError:
                    continue
                names.append(entry.name)
    except OSError:
        return []
    return sorted(names, key=str.lower)


def scan_voices_dir(directory: Path) -> list[VoiceSpec]:
    """Recordings and exported states in `directory`, named after their file stems, sorted."""
    return folder_voices(directory)[0]


def folder_voices(directory: Path, limit: int | None = None) -> tuple[list[VoiceSpec], int]:
    """The first `limit` (None: all) voices of `directory` by name, and how many it has.

    Only listed here: whether each is a regular file and readable is checked when the
    voices are built (catalog.py), for the voices that are offered.
    """
    if not directory.is_dir():
        _LOGGER.info("voices directory %s does not exist; no voices from it", escape(directory))
        return [], 0
    origin = f"voices directory {escape(directory)}"
    names = voices_dir_names(directory)
    specs = []
    for name in names[:limit]:
        path = directory / name
        kind = kind_of_path(path)
        assert kind is not None
        specs.append(VoiceSpec(name=path.stem, kind=kind, origin=origin, path=path))
    return specs, len(names)


# The voices file kept in the voices folder when none is given (--voices): the voices page
# creates it, and the command line reads it from there when it exists.
PAGE_VOICES_FILE = "voices.yaml"


def page_voices_file(voices_dir: Path) -> Path:
    return voices_dir / PAGE_VOICES_FILE
