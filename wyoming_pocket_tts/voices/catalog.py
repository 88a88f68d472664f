"""The list of voices the library offers: voices file + voices directory + predefined voices.

Every problem that shows without encoding (a missing or short recording, an unknown
predefined name, a duplicate name) drops that voice with an ERROR naming the file and the
voice; the rest of the list is still built. Only "no voice at all" is fatal.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from wyoming_pocket_tts.core import VoiceInfo
from wyoming_pocket_tts.core.errors import VoiceError
from wyoming_pocket_tts.core.files import check_regular, unreadable
from wyoming_pocket_tts.core.logsafe import escape
from wyoming_pocket_tts.engine.recording import recording_info

from .config import (
    MAX_DECLARED_VOICES,
    ModelScope,
    VoiceConfigError,
    VoiceLibraryConfig,
    VoiceSpec,
    kind_of_path,
    folder_voices,
    parse_voices_file,
    voices_dir_names,
)

_LOGGER = logging.getLogger(__name__)

_PREDEFINED_ATTRIBUTION = ("Kyutai", "https://huggingface.co/kyutai/tts-voices")
# What the voices' files looked like when the list was built (see `sources_signature`):
# the stats of the files read, and the names in the voices folder.
SourcesSignature = tuple[tuple[tuple[str, int, int, int], ...], tuple[str, ...]]


@dataclass(frozen=True)
class Catalog:
    """The usable voices, default first, then in declaration order."""

    default: str
    voices: list[VoiceSpec]


def build_catalog(config: VoiceLibraryConfig, predefined: tuple[str, ...], model_name: str) -> Catalog:
    """Collect, check and order the voices; raise VoiceConfigError if there is none."""
    declared: list[VoiceSpec] = []
    scope = config.scope
    first = scope is None or scope.first
    # The default voice, the voices folder and entries naming no model are the first model's.
    configured_default = config.default_voice.strip() if config.default_voice and first else None
    if config.voices_file is not None:
        parsed = parse_voices_file(config.voices_file)
        declared.extend(spec for spec in parsed.voices if _in_scope(spec, scope))
        # The command line's --voice wins over the file's default.
        if configured_default is None and first:
            configured_default = parsed.default
    declared = declared[:MAX_DECLARED_VOICES]
    total = len(declared)
    if first:
        # Only the offered ones are made into voices and checked (checking opens the file).
        in_folder, count = folder_voices(config.effective_voices_dir, MAX_DECLARED_VOICES - len(declared))
        declared.extend(in_folder)
        total += count
    if total > MAX_DECLARED_VOICES:
        _LOGGER.warning(
            "%d voices declared (voices file and folder %s); the first %d are offered, %d are left out "
            "(the voices file's in its order, then the folder's by name)",
            total, escape(config.effective_voices_dir), MAX_DECLARED_VOICES, total - MAX_DECLARED_VOICES,
        )  # fmt: skip

    voices: dict[str, VoiceSpec] = {}  # keyed by lower-case name: names are unique ignoring case
    for spec in declared:
        if _usable(spec, predefined, model_name):
            _add(voices, spec)

    default = _resolve_default(configured_default, voices, predefined, model_name)

    if config.include_predefined:
        for name in predefined:
            # A user's voice with the same name shadows the predefined one on purpose.
            if name.lower() not in voices:
                voices[name.lower()] = VoiceSpec(
                    name=name, kind="predefined", origin=f"model {model_name}", declared=False
                )

    if default is None:
        default = _automatic_default(voices, predefined, config.include_predefined)
    if default is None:
        raise VoiceConfigError(
            f"no voice available: model {model_name} has "
            f"{'no predefined voices' if not predefined else 'its predefined voices turned off'}, "
            f"and no usable voice was declared (voices file: {config.voices_file or 'none'}, "
            f"voices directory: {config.effective_voices_dir}); "
            "add a recording to the voices directory or pass --voice"
        )
    ordered = [voices[default.lower()]] + [spec for key, spec in voices.items() if key != default.lower()]
    return Catalog(default=voices[default.lower()].name, voices=ordered)


def _in_scope(spec: VoiceSpec, scope: ModelScope | None) -> bool:
    """Whether a voices-file entry belongs to this library's model."""
    if scope is None:
        return True
    if scope.first and scope.unknown(spec.model):
        _LOGGER.error("%s: voice %r names model %r, which this server does not serve (models: %s); "
                      "voice skipped", spec.origin, spec.name, spec.model,
                      ", ".join(sorted(scope.names | scope.others)))  # fmt: skip
    return scope.owns(spec.model)


def _usable(spec: VoiceSpec, predefined: tuple[str, ...], model_name: str) -> bool:
    if spec.kind == "predefined":
        if spec.name not in predefined:
            available = ", ".join(predefined) if predefined else "none"
            _LOGGER.error(
                "%s: %r is not a predefined voice of model %s (available: %s); "
                "give it 'audio:' or 'state:'; voice skipped",
                spec.origin,
                spec.name,
                model_name,
                available,
            )
            return False
        return True
    assert spec.path is not None
    try:
        if spec.kind == "recording":
            recording_info(spec.path)  # the header only; a FIFO or a device is not opened
        else:
            _check_state_file(spec.path)
    except VoiceError as err:
        _LOGGER.error("voice %r (from %s): %s; voice skipped", spec.name, spec.origin, err)
        return False
    return True


def _check_state_file(path: Path) -> None:
    try:
        check_regular(path)
    except OSError as err:
        raise VoiceError(unreadable("voice state", path, err)) from None


def _add(voices: dict[str, VoiceSpec], spec: VoiceSpec) -> None:
    key = spec.name.lower()
    previous = voices.get(key)
    if previous is None:
        voices[key] = spec
        return
    # The voices file commonly points into the voices directory: the same file met twice
    # is one voice, kept with the name and description the file gave it.
    if _same_source(previous, spec):
        return
    _LOGGER.error(
        "duplicate voice name %r: %s is already %s; the second one is skipped",
        spec.name,
        _describe(spec),
        _describe(previous),
    )


def _same_source(a: VoiceSpec, b: VoiceSpec) -> bool:
    if a.path is None or b.path is None:
        return a.path is None and b.path is None and a.name == b.name
    return _resolved(a.path) == _resolved(b.path)


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except OSError:
        return path.absolute()


def _describe(spec: VoiceSpec) -> str:
    source = escape(spec.path) if spec.path is not None else "a predefined voice"
    return f"{source} (from {spec.origin})"


def _resolve_default(
    wanted: str | None, voices: dict[str, VoiceSpec], predefined: tuple[str, ...], model_name: str
) -> str | None:
    """The configured default as a voice name, adding it to `voices` when needed."""
    if wanted is None:
        return None
    if wanted.lower() in voices:
        return voices[wanted.lower()].name
    for name in predefined:
        if name.lower() == wanted.lower():
            # Asked for by name: offered even when the predefined voices are turned off.
            voices[name.lower()] = VoiceSpec(name=name, kind="predefined", origin="--voice")
            return name
    path = Path(wanted).expanduser()
    kind = kind_of_path(path)
    if kind is None:
        _LOGGER.error(
            "default voice %r is neither a known voice (%s) nor a recording or voice state file; "
            "using the automatic default instead",
            wanted,
            escape(", ".join(spec.name for spec in voices.values())) or "none declared",
        )
        return None
    for spec in voices.values():
        # --voice may name a file that is already a declared voice: use that voice.
        if spec.path is not None and _resolved(spec.path) == _resolved(path):
            return spec.name
    spec = VoiceSpec(name=path.stem, kind=kind, origin="--voice", path=path)
    if not _usable(spec, predefined, model_name):
        _LOGGER.error("default voice %s cannot be used; using the automatic default instead", escape(path))
        return None
    previous = voices.get(spec.name.lower())
    if previous is not None:
        # The default asked for explicitly on the command line wins the name.
        _LOGGER.error("duplicate voice name %r: %s is replaced by the default voice %s", spec.name,
                      _describe(previous), escape(path))  # fmt: skip
    voices[spec.name.lower()] = spec
    return spec.name


def _automatic_default(
    voices: dict[str, VoiceSpec], predefined: tuple[str, ...], include_predefined: bool
) -> str | None:
    """The model's first predefined voice if offered, else the first declared voice."""
    if include_predefined:
        for name in predefined:
            spec = voices.get(name.lower())
            if spec is not None:
                return spec.name
    for spec in voices.values():
        return spec.name
    return None


def voice_info(spec: VoiceSpec, languages: Sequence[str]) -> VoiceInfo:
    """How a voice is presented to clients."""
    if spec.kind == "predefined":
        description = spec.description or spec.name.replace("_", " ").title()
        attribution_name, attribution_url = _PREDEFINED_ATTRIBUTION
    else:
        description = spec.description or spec.name
        attribution_name = attribution_url = None
    return VoiceInfo(
        name=spec.name,
        description=description,
        languages=tuple(languages),
        kind=spec.kind,
        attribution_name=attribution_name,
        attribution_url=attribution_url,
        settings=spec.settings,
    )


def preview_voices(config: VoiceLibraryConfig, model_name: str, predefined: tuple[str, ...],
                   languages: Sequence[str]) -> list[VoiceInfo]:
    """The voices a library will offer, known before the model is loaded (or downloaded):
    lets `describe` list them while the weights are still on their way. Torch-free."""
    return [voice_info(spec, languages) for spec in build_catalog(config, predefined, model_name).voices]


class VoicePreview:
    """The voices a library for this model would offer, re-read only when a file changed.

    Thread-safe; torch-free: the server lists voices with it before the model exists.
    One re-read at a time: a call made while another re-reads takes the last list
    (describes from many clients do not queue behind one re-read); only the very first
    list is waited for.
    """

    def __init__(self, config: VoiceLibraryConfig, model_name: str, predefined: tuple[str, ...],
                 languages: Sequence[str]) -> None:
        self._config = config
        self._model_name = model_name
        self._predefined = predefined
        self._languages = tuple(languages)
        self._lock = threading.Lock()
        self._signature: SourcesSignature | None = None
        self._voices: list[VoiceInfo] = []
        self._listed = threading.Event()  # set once the first list is made

    def voices(self, wait: bool = False) -> list[VoiceInfo]:
        """The voices, default first; the last good list if the files became unusable.
        `wait`: wait for a re-read in progress and look again (see VoiceLibrary.refresh)."""
        if not self._lock.acquire(blocking=wait or not self._listed.is_set()):
            return list(self._voices)
        try:
            signature = sources_signature(self._config)
            if signature != self._signature:
                self._signature = signature
                try:
                    self._voices = preview_voices(self._config, self._model_name, self._predefined,
                                                  self._languages)  # fmt: skip
                except VoiceConfigError as err:
                    # Loading the library reports it too (and fails if it is the first list).
                    _LOGGER.error("voices cannot be listed: %s", err)
            self._listed.set()
            return list(self._voices)
        finally:
            self._lock.release()


def sources_signature(config: VoiceLibraryConfig) -> SourcesSignature:
    """What the voice list is built from, cheaply: name, date and size of the voices file,
    the voices folder, its first MAX_DECLARED_VOICES files (the only ones that can be
    offered) and the --voice file, and the names of all the folder's files. Equal
    signatures mean the list built from them is still true, so a `describe` re-reads the
    voices only after a change. One `os.scandir` pass and at most MAX_DECLARED_VOICES + 3
    stats, nothing opened (about 12 ms for 10,000 files)."""
    paths: list[Path] = []
    if config.voices_file is not None:
        paths.append(config.voices_file)
    directory = config.effective_voices_dir
    paths.append(directory)
    names = voices_dir_names(directory)
    paths.extend(directory / name for name in names[:MAX_DECLARED_VOICES])
    if config.default_voice:
        paths.append(Path(config.default_voice).expanduser())
    return tuple(_stat_entry(path) for path in paths), tuple(names)


def _stat_entry(path: Path) -> tuple[str, int, int, int]:
    try:
        stat = os.stat(path)
    except OSError:
        return (str(path), -1, -1, -1)
    # The inode too: a file replaced by a rename (how the voices page writes) is a new
    # inode even when its date (kept to the clock's tick) and size are the same.
    return (str(path), stat.st_mtime_ns, stat.st_size, stat.st_ino)
