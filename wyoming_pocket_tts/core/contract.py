"""The engine contract: what the server and the voices library rely on, as Protocols.

The engine's `TTSModel`, `SpeechSession` and `VoiceState` implement them; so do the
server tests' fakes (`tests/server_fixtures.py`), which a test checks against them with
mypy. Frames are float32 numpy arrays of `frame_size` samples at `sample_rate`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .options import GenerationOptions
from .voices import VoiceInfo

if TYPE_CHECKING:
    import numpy as np


@runtime_checkable
class VoiceStateLike(Protocol):
    """An encoded voice: bound to one model (`model_id`), `nbytes` of memory."""

    @property
    def model_id(self) -> str: ...

    @property
    def nbytes(self) -> int: ...


@runtime_checkable
class SessionLike(Protocol):
    """One response spoken sentence by sentence; its decoder state carries across them.

    Raises TextError for text with nothing to say; stops within a frame once the cancel
    event given to `ModelLike.session` is set. `voice`: another voice of the same model for
    this text (None: the session's own); VoiceError for a voice of another model.
    """

    def speak(self, text: str, voice: Any = None) -> Iterator[np.ndarray]: ...


@runtime_checkable
class ModelLike(Protocol):
    """A loaded model. Thread-safe: several sessions may run at once."""

    @property
    def name(self) -> str: ...

    @property
    def model_id(self) -> str: ...

    @property
    def languages(self) -> Sequence[str]: ...

    @property
    def predefined_voices(self) -> Sequence[str]: ...

    @property
    def can_clone(self) -> bool: ...

    @property
    def sample_rate(self) -> int: ...

    @property
    def frame_size(self) -> int: ...

    # How its products run ("float32", "int8/fbgemm"): a voice encoded in int8 differs
    # slightly from the same recording encoded in float32.
    @property
    def precision(self) -> str: ...

    # VoiceError for a voice that cannot be made (bad file, wrong model, no access).
    def voice_from_recording(self, path: Path) -> Any: ...
    # A prompt already read and prepared by the caller: float32 mono samples at sample_rate.
    def voice_from_audio(self, audio: np.ndarray) -> Any: ...
    def voice_from_predefined(self, name: str) -> Any: ...
    def voice_from_file(self, path: Path) -> Any: ...
    def save_voice(self, state: Any, path: Path) -> None: ...

    def session(self, voice: Any, options: GenerationOptions = ...,
                cancel: threading.Event | None = None) -> SessionLike: ...  # fmt: skip

    def synthesize(self, text: str, voice: Any, options: GenerationOptions = ...,
                   cancel: threading.Event | None = None) -> Iterator[np.ndarray]: ...  # fmt: skip


@runtime_checkable
class VoiceSource(Protocol):
    """The voices library as the server uses it (thread-safe; `get` blocks)."""

    @property
    def voices(self) -> Sequence[VoiceInfo]: ...

    @property
    def default_name(self) -> str: ...

    def get(self, name: str | None = None) -> tuple[str, Any]: ...
    def start_preencoding(self) -> None: ...
    def close(self) -> None: ...
