"""Exceptions the engine raises, each with a message meant for the user (no torch here:
the server catches them without importing the engine)."""


class EngineError(Exception):
    """Base class of every error the engine reports to its callers."""


class ModelLoadError(EngineError):
    """A model could not be resolved, downloaded or loaded."""


class HubUnavailableError(ModelLoadError):
    """A download failed because the Hugging Face hub could not be reached (no network, an
    outage, a server error): the same load may succeed later, unlike a file that does not
    exist or an access the hub refuses."""


class VoiceError(EngineError):
    """A voice could not be made: bad recording, wrong model, missing access.

    The message names the file, for the server's log; `public` is the same without the
    server's paths, for a client's `error` event (None: the message names no file)."""

    def __init__(self, message: str = "", public: str | None = None) -> None:
        super().__init__(message)
        self.public = public


class TextError(EngineError):
    """The text cannot be spoken (empty, nothing pronounceable)."""
