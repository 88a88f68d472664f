"""Writing the household's voices: the voices file and the voices folder.

What the page changes, and where:
- a new recording: a FLAC file in the voices folder, named after the voice (a voice of a
  model other than the first goes into a sub-folder named after that model, with an entry
  in the voices file saying `model:`, since the folder's voices are the first model's);
- a description or a voice's own settings, the default voice: the voices file, as a small
  edit of its latest content (ruamel.yaml's round trip keeps its comments, order and
  quoting); a voice without an entry gets one, appended;
- a deletion: the voice's entry, and its file if that lies in the voices folder (a file
  elsewhere, named by the voices file, is left where it is).

Every write is atomic (a hidden temporary file in the same folder, fsynced, renamed), and
every change runs under one lock on the latest files, so two changes never lose each
other. A change to a voice names the version of it that the page showed (`Snapshot.version`):
if the voice changed since (another tab, a hand edit over Samba), the change is refused
(`Conflict`) rather than overwriting what the user did not see.

No path from a client is ever used as a path: a file name is made from a voice name that
passed `check_name`, and every path is checked to lie in the voices folder before it is
written or deleted. Blocking (file I/O): run it off the event loop.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import re
import threading
import unicodedata
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..core.files import sync_directory, write_synced
from ..settings import BY_NAME, PER_VOICE, SettingError
from ..voices.config import ModelScope, VoiceConfigError, kind_of_path

_LOGGER = logging.getLogger(__name__)

MAX_NAME_LENGTH = 40
MAX_DESCRIPTION_LENGTH = 200
# The voice settings the page edits (each declared in settings.py with its bounds).
EDITABLE_SETTINGS = ("length_scale", "sentence_silence", "temperature")
RECORDING_SUFFIX = ".flac"
_TMP_PREFIX = ".tmp-voices-page-"
# Names Windows cannot open as files (the voices folder is often reached over Samba).
_RESERVED = frozenset({"con", "prn", "aux", "nul", *(f"com{i}" for i in range(10)), *(f"lpt{i}" for i in range(10))})
_NAME_PUNCTUATION = frozenset(" -_'")
_HEADER = (
    "# Household voices for wyoming-pocket-tts. The voices page writes here; you may edit\n"
    "# it too (comments and order are kept). See docs/voices-page.md.\n"
)


class StoreError(ValueError):
    """A change that cannot be made; `code` names its message in the page's translations."""

    status = 400

    def __init__(self, code: str, message: str, **values: Any) -> None:
        super().__init__(message)
        self.code = code
        self.values = values


class NameTaken(StoreError):
    status = 409


class Conflict(StoreError):
    """The voice changed since the page showed it."""

    status = 409


def check_name(raw: str) -> str:
    """The voice name to use, or StoreError saying what is wrong with it. Letters (any
    script), digits, spaces and - _ ', starting with a letter or digit: it becomes a file
    name, so no path separators, dots, control characters or names Windows reserves."""
    name = unicodedata.normalize("NFC", str(raw)).strip()
    if not name:
        raise StoreError("name_missing", "give the voice a name")
    if len(name) > MAX_NAME_LENGTH:
        raise StoreError("name_long", f"a name has at most {MAX_NAME_LENGTH} characters", max=MAX_NAME_LENGTH)
    bad = sorted({char for char in name if not (char.isalnum() or char in _NAME_PUNCTUATION)})
    if bad or not name[0].isalnum():
        shown = " ".join(repr(char) for char in bad) if bad else repr(name[0])
        raise StoreError("name_chars", f"a name may hold letters, digits, spaces and - _ ' only, starting "
                         f"with a letter or digit (not {shown})", chars=shown)
    if name.lower() in _RESERVED:
        raise StoreError("name_reserved", f"{name!r} cannot be a file name on Windows; choose another", name=name)
    return name


@dataclass(frozen=True)
class VoiceRef:
    """A voice as the server lists it: its model (index) and its name in that model."""

    model: int
    name: str
    kind: str  # "predefined", "recording", "state"


@dataclass(frozen=True)
class Place:
    """Where a voice comes from, as far as the page can change it."""

    # "file": an entry in the voices file; "folder": a file in the voices folder;
    # "predefined": the model's own; "command_line": --voice (read-only here).
    source: str
    entry: int | None = None  # its index in the voices file's list
    path: Path | None = None
    # Its file lies in the voices folder: deleting the voice deletes the file.
    owned_file: bool = False

    @property
    def deletable(self) -> bool:
        return self.source in ("file", "folder") and not (self.source == "file" and self.path is None)


@dataclass(frozen=True)
class Settings:
    """A voice's editable values, as the page sends them: a value None is removed (the
    server's own applies); a setting left out of `values`, or a description None, is kept."""

    description: str | None
    values: Mapping[str, float | None]


class _Document:
    """The voices file, read for a round trip (comments, order, quoting kept)."""

    def __init__(self, path: Path) -> None:
        from ruamel.yaml import YAML  # the page is optional: only it needs ruamel
        from ruamel.yaml.comments import CommentedMap, CommentedSeq
        from ruamel.yaml.error import YAMLError

        self.path = path
        self._yaml = YAML()
        self._yaml.preserve_quotes = True
        self._map, self._seq = CommentedMap, CommentedSeq
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            text = ""
        except (OSError, UnicodeDecodeError) as err:
            raise StoreError("file_unreadable", f"the voices file {path} cannot be read: {err}",
                             path=str(path)) from None  # fmt: skip
        self.text = text
        # Keep the file's own list indentation ("voices:\n  - name" or "voices:\n- name").
        found = re.search(r"^( *)- ", text, re.MULTILINE)
        offset = len(found.group(1)) if found else 2
        self._yaml.indent(mapping=2, sequence=offset + 2, offset=offset)
        try:
            data = self._yaml.load(text) if text.strip() else None
        except YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark is not None else ""
            raise StoreError("file_invalid", f"the voices file {path} is not valid YAML{where}; fix it first "
                             "(nothing was changed)", path=str(path)) from None  # fmt: skip
        # A file of comments only loads as nothing: its comments are kept above what is added.
        self._prefix = text if data is None else ""
        if data is None:
            data = CommentedMap()
        if not isinstance(data, dict):
            raise StoreError("file_invalid", f"the voices file {path} does not hold 'default' and 'voices'; "
                             "fix it first (nothing was changed)", path=str(path))  # fmt: skip
        # ruamel's CommentedMap and CommentedSeq (their comments and styles ride along).
        self.data: Any = data
        voices = data.get("voices")
        if voices is None:
            voices = CommentedSeq()
        if not isinstance(voices, list):
            raise StoreError("file_invalid", f"the voices file {path}: 'voices' is not a list; fix it first",
                             path=str(path))  # fmt: skip
        self.voices: Any = voices

    @property
    def default(self) -> str | None:
        value = self.data.get("default")
        return value.strip() if isinstance(value, str) else None

    def entry_name(self, index: int) -> str | None:
        entry = self.voices[index]
        name = entry if isinstance(entry, str) else entry.get("name") if isinstance(entry, dict) else None
        return name.strip() if isinstance(name, str) else None

    def entry_model(self, index: int) -> str | None:
        entry = self.voices[index]
        model = entry.get("model") if isinstance(entry, dict) else None
        return model.strip() if isinstance(model, str) and model.strip() else None

    def entry_path(self, index: int) -> Path | None:
        entry = self.voices[index]
        if not isinstance(entry, dict):
            return None
        value = entry.get("audio") or entry.get("state")
        if not isinstance(value, str) or not value.strip():
            return None
        path = Path(value.strip()).expanduser()
        return path if path.is_absolute() else self.path.parent / path

    def entry_json(self, index: int) -> str:
        return json.dumps(self.voices[index], sort_keys=True, default=str)

    def editable_entry(self, index: int) -> dict:
        """The entry as a mapping (a bare `- alba` becomes `- name: alba`)."""
        entry = self.voices[index]
        if not isinstance(entry, dict):
            entry = self._map(name=str(entry))
            self.voices[index] = entry
        return entry

    def append(self, entry: dict[str, Any]) -> None:
        self.voices.fa.set_block_style()  # `voices: []` written by hand would stay one line
        self.voices.append(self._map(entry))

    def set_default(self, name: str | None) -> None:
        if name is None:
            self.data.pop("default", None)
        elif "default" in self.data:
            self.data["default"] = name
        else:
            self.data.insert(0, "default", name)

    def save(self) -> None:
        if "voices" not in self.data or self.data["voices"] is not self.voices:
            self.data["voices"] = self.voices
        buffer = io.StringIO()
        self._yaml.dump(self.data, buffer)
        text = buffer.getvalue()
        if self._prefix.strip():
            text = self._prefix.rstrip("\n") + "\n" + text
        elif not self.text.strip():
            text = _HEADER + text
        write_atomically(self.path, text.encode("utf-8"))
        self.text, self._prefix = text, ""


@contextmanager
def _staged(path: Path, data: bytes, mode: int) -> Iterator[Path]:
    """`data` in a hidden temporary file next to `path`, complete and fsynced; removed
    after the block (a rename or a link has given it its real name by then)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.parent / f"{_TMP_PREFIX}{uuid.uuid4().hex}{path.suffix}"
    try:
        write_synced(temporary, data, "xb")
        os.chmod(temporary, mode)
        yield temporary
    finally:
        temporary.unlink(missing_ok=True)
    sync_directory(path.parent)


def write_atomically(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that a reader sees the old file or the new one, whole."""
    try:
        mode = path.stat().st_mode & 0o777
    except OSError:
        mode = 0o644
    with _staged(path, data, mode) as temporary:
        os.replace(temporary, path)


def _stat(path: Path | None) -> tuple[int, int, int] | None:
    if path is None:
        return None
    try:
        stat = path.stat()
    except OSError:
        return None
    return (stat.st_mtime_ns, stat.st_size, stat.st_ino)


def _inside(path: Path, folder: Path) -> bool:
    try:
        return path.resolve().is_relative_to(folder.resolve())
    except OSError:
        return False


@dataclass(frozen=True)
class StoreModel:
    """One model of the server, as the store needs it."""

    label: str  # written as `model:` for its voices
    scope: ModelScope | None  # which voices-file entries are its


class Snapshot:
    """The voices file and folder as they are now: where each voice comes from and the
    version of it, to be compared by the change that follows."""

    def __init__(self, store: VoiceStore) -> None:
        self.store = store
        self.document = _Document(store.voices_file)
        self._files: dict[str, Path] | None = None

    def _owned(self, model: int, index: int) -> bool:
        scope = self.store.models[model].scope
        return scope is None or scope.owns(self.document.entry_model(index))

    def place(self, voice: VoiceRef) -> Place:
        lowered = voice.name.lower()
        document = self.document
        for index in range(len(document.voices)):
            name = document.entry_name(index)
            if name is not None and name.lower() == lowered and self._owned(voice.model, index):
                path = document.entry_path(index)
                owned = path is not None and _inside(path, self.store.voices_dir)
                return Place("file", index, path, owned)
        if voice.model == 0 and voice.kind != "predefined":
            path = self._folder_files().get(lowered)
            if path is not None:
                return Place("folder", None, path, True)
            return Place("command_line")
        return Place("predefined")

    def _folder_files(self) -> dict[str, Path]:
        if self._files is None:
            self._files = voice_files(self.store.voices_dir)
        return self._files

    def version(self, voice: VoiceRef) -> str:
        place = self.place(voice)
        material = json.dumps([
            voice.model, voice.name, place.source,
            self.document.entry_json(place.entry) if place.entry is not None else None,
            _stat(place.path), self.document.default == voice.name,
        ], default=str)  # fmt: skip
        return hashlib.sha256(material.encode("utf-8")).hexdigest()[:16]

    def description(self, voice: VoiceRef) -> str:
        place = self.place(voice)
        if place.entry is None:
            return ""
        entry = self.document.voices[place.entry]
        value = entry.get("description") if isinstance(entry, dict) else None
        return "" if value is None else str(value)


class VoiceStore:
    """The page's writes (see the module docstring). Thread-safe."""

    def __init__(self, voices_file: Path, voices_dir: Path, models: Sequence[StoreModel]) -> None:
        self.voices_file = voices_file
        self.voices_dir = voices_dir
        self.models = list(models)
        self._lock = threading.Lock()

    def snapshot(self) -> Snapshot:
        return Snapshot(self)

    def _checked(self, voice: VoiceRef, version: str | None) -> Snapshot:
        snapshot = self.snapshot()
        if version is not None and snapshot.version(voice) != version:
            raise Conflict("changed", f"voice {voice.name!r} was changed meanwhile (in another tab, or in its "
                           "file); the page now shows it as it is: make your change again", name=voice.name)
        return snapshot

    # -- adding ---------------------------------------------------------------------------

    def recording_path(self, model: int, name: str) -> Path:
        """Where a new recording of voice `name` for model `model` is written."""
        folder = self.voices_dir
        if model > 0:
            folder = folder / _folder_name(self.models[model].label, model)
        path = folder / f"{name}{RECORDING_SUFFIX}"
        if not _inside(path.parent, self.voices_dir) or path.parent.resolve() != folder.resolve():
            raise StoreError("name_chars", f"{name!r} cannot be used as a file name", chars=repr(name))
        return path

    def add_recording(self, model: int, name: str, description: str, samples: np.ndarray, sample_rate: int,
                      taken: Sequence[str]) -> Path:  # fmt: skip
        """Save a checked recording as voice `name` of model `model`; `taken`: the names
        the server lists now (a new voice must not take one, ignoring case)."""
        import soundfile

        name = check_name(name)
        description = _check_description(description)
        if name.lower() in {other.lower() for other in taken}:
            raise NameTaken("name_taken", f"there is already a voice named {name!r}; choose another name", name=name)
        path = self.recording_path(model, name)
        with self._lock:
            snapshot = self.snapshot()  # before anything is written: a broken voices file stops here
            if name.lower() in voice_files(path.parent):
                raise NameTaken("name_taken", f"a file for voice {name!r} is already in the voices folder "
                                "(its voice may be unusable: see the server's log); choose another name",
                                name=name)  # fmt: skip
            buffer = io.BytesIO()
            soundfile.write(buffer, np.asarray(samples, dtype=np.float32), sample_rate, format="FLAC",
                            subtype="PCM_16")  # fmt: skip
            _create_atomically(path, buffer.getvalue())
            try:
                if model > 0 or description:
                    entry: dict[str, Any] = {"name": name, "audio": self._relative(path)}
                    if description:
                        entry["description"] = description
                    if model > 0:
                        entry["model"] = self.models[model].label
                    snapshot.document.append(entry)
                    snapshot.document.save()
            except BaseException:
                path.unlink(missing_ok=True)  # nothing half-made stays
                raise
        _LOGGER.info("voices page: voice %r saved as %s", name, path)
        return path

    def _relative(self, path: Path) -> str:
        base = self.voices_file.parent
        if _inside(path, base):
            return path.resolve().relative_to(base.resolve()).as_posix()
        return str(path)

    # -- changing -------------------------------------------------------------------------

    def edit(self, voice: VoiceRef, version: str | None, settings: Settings) -> None:
        """Set a voice's description and own settings (None: removed)."""
        description = None if settings.description is None else _check_description(settings.description)
        values = {}
        for key, value in settings.values.items():
            if key not in EDITABLE_SETTINGS:
                raise StoreError("setting_unknown", f"{key} is not a voice setting", key=key)
            try:
                values[key] = PER_VOICE[key].check(value)
            except SettingError as err:
                raise StoreError("setting_bad", str(err), key=key) from None
            maximum = setting_bounds(key)["max"]
            if values[key] is not None and maximum is not None and values[key] > maximum:
                # The add-on's bound where the command line has none (temperature): the page
                # offers what the add-on does.
                raise StoreError("setting_bad", f"{key} must be at most {maximum:g}, got {value}", key=key)
        with self._lock:
            snapshot = self._checked(voice, version)
            document = snapshot.document
            place = snapshot.place(voice)
            if place.source == "command_line":
                raise StoreError("read_only", f"voice {voice.name!r} is given on the command line (--voice); "
                                 "it cannot be changed here", name=voice.name)  # fmt: skip
            if place.entry is None:
                entry: dict[str, Any] = {"name": voice.name}
                if place.path is not None:
                    key = "state" if kind_of_path(place.path) == "state" else "audio"
                    entry[key] = self._relative(place.path)
                if voice.model > 0:
                    entry["model"] = self.models[voice.model].label
                document.append(entry)
                target = document.voices[-1]
            else:
                target = document.editable_entry(place.entry)
            if description:
                target["description"] = description
            elif description is not None:
                target.pop("description", None)
            for key, value in values.items():
                if value is None:
                    target.pop(key, None)
                else:
                    target[key] = value
            document.save()
        _LOGGER.info("voices page: voice %r changed", voice.name)

    def set_default(self, voice: VoiceRef) -> None:
        if voice.model != 0:
            raise StoreError("default_model", "only a voice of the first model can be the default (a request "
                             "without a voice goes to the first model)")  # fmt: skip
        with self._lock:
            document = self.snapshot().document
            document.set_default(voice.name)
            document.save()
        _LOGGER.info("voices page: default voice set to %r", voice.name)

    def delete(self, voice: VoiceRef, version: str | None) -> Path | None:
        """Delete a voice; returns the file deleted with it, if any."""
        with self._lock:
            snapshot = self._checked(voice, version)
            place = snapshot.place(voice)
            if not place.deletable:
                what = "a predefined voice of the model" if place.source == "predefined" else \
                    "given on the command line (--voice)"  # fmt: skip
                raise StoreError("not_deletable", f"voice {voice.name!r} is {what}; it cannot be deleted",
                                 name=voice.name)  # fmt: skip
            document = snapshot.document
            changed = False
            if place.entry is not None:
                del document.voices[place.entry]
                changed = True
            if document.default is not None and document.default.lower() == voice.name.lower():
                document.set_default(None)
                changed = True
            if changed:
                document.save()
            removed = None
            if place.owned_file and place.path is not None and _inside(place.path, self.voices_dir):
                try:
                    place.path.unlink()
                    removed = place.path
                except FileNotFoundError:
                    pass
                sync_directory(place.path.parent)
        _LOGGER.info("voices page: voice %r deleted%s", voice.name, f" with {removed}" if removed else "")
        return removed


def setting_bounds(name: str) -> dict[str, Any]:
    """An editable setting's bounds and default, as the page offers them."""
    setting = BY_NAME[name]
    maximum = setting.maximum
    if maximum is None and setting.addon is not None:
        maximum = setting.addon.maximum
    return {"min": setting.minimum, "max": maximum, "default": setting.default}


def voice_files(folder: Path) -> dict[str, Path]:
    """A folder's voice files (as the library's folder scan takes them) by lower-case stem,
    which is the name of their voice."""
    found: dict[str, Path] = {}
    try:
        entries = sorted(folder.iterdir(), key=lambda path: path.name.lower())
    except OSError:
        return found
    for path in entries:
        if not path.name.startswith(".") and kind_of_path(path) is not None and path.is_file():
            found.setdefault(path.stem.lower(), path)
    return found


def _check_description(text: str) -> str:
    description = " ".join(str(text).split())
    if len(description) > MAX_DESCRIPTION_LENGTH:
        raise StoreError("description_long", f"a description has at most {MAX_DESCRIPTION_LENGTH} characters",
                         max=MAX_DESCRIPTION_LENGTH)  # fmt: skip
    return description


def _folder_name(label: str, index: int) -> str:
    """The sub-folder of a model's recordings: its label if that is a safe name."""
    try:
        return check_name(label.replace(".", "_"))
    except StoreError:
        return f"model-{index + 1}"


def _create_atomically(path: Path, data: bytes) -> None:
    """Write a new file: complete when it appears, and never over an existing one."""
    taken = NameTaken("name_taken", f"a file {path.name} appeared meanwhile; choose another name", name=path.stem)
    with _staged(path, data, 0o644) as temporary:
        try:
            os.link(temporary, path)  # fails if the name exists: no overwrite, no race
        except FileExistsError:
            raise taken from None
        except OSError:
            # A file system without hard links (some network shares): checked, then renamed.
            if path.exists():
                raise taken from None
            os.replace(temporary, path)


def ensure_voices_file(path: Path) -> None:
    """Create an empty voices file (a comment saying what it is) if there is none."""
    if path.exists():
        return
    try:
        _create_atomically(path, (_HEADER + "voices:\n").encode("utf-8"))
    except NameTaken:
        pass  # created meanwhile
    except OSError as err:
        raise VoiceConfigError(f"the voices page cannot create its voices file {path}: {err.strerror or err}") from None
