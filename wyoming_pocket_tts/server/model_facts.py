"""What the server knows about a model before loading it: its predefined voices and language.

Home Assistant builds its TTS entity from the first `describe` it gets, and an entity whose
voices list no language never loads. So every model kind must name its voices and their
language from the start, without torch and without a download: the catalog's facts for a
released model, the demo's constants, and for a local or `hf://` config the `--language`
setting, else what its name or contents say, else English (logged).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

from ..engine.catalog import catalog, language_of
from ..engine.demo import DEMO_LANGUAGES, DEMO_NAME, DEMO_VOICE

_LOGGER = logging.getLogger(__name__)

# When nothing says otherwise: the language of most released models and of the demo.
FALLBACK_LANGUAGE = "en"
# The released files sit under `languages/<model name>/...`; community configs copy that.
_LANGUAGE_FOLDER = re.compile(r"languages/([A-Za-z]+)")
# A config is a few kB; reading more than this to look for a language is not worth it.
_MAX_CONFIG_BYTES = 1 << 20


@dataclass(frozen=True)
class ModelFacts:
    """A model's voices and languages as far as they are known without loading it."""

    name: str
    predefined_voices: tuple[str, ...]
    languages: tuple[str, ...]


def model_facts(model: str, language: str | None = None) -> ModelFacts:
    """The facts of a catalog model, `demo`, or a config path; `language` overrides."""
    override = (language,) if language else None
    if model == DEMO_NAME:
        return ModelFacts(DEMO_NAME, (DEMO_VOICE,), override or DEMO_LANGUAGES)
    entry = catalog().get(model)
    if entry is not None:
        return ModelFacts(entry.name, entry.voices, override or (entry.language,))
    # A custom config brings no predefined voices (see engine.loading): only the household's.
    return ModelFacts(model, (), override or (config_language(model),))


def is_custom_config(model: str) -> bool:
    """A local or `hf://` config: neither the demo nor a catalog name."""
    return model != DEMO_NAME and model not in catalog()


def config_language(model: str) -> str:
    """The language of a custom config: from its file name, its path, its contents (local
    files only: an `hf://` config is not downloaded for this), else English, logged."""
    found = language_of(model)
    if found:
        return found
    found = _language_in(model)
    if found:
        return found
    if not model.startswith("hf://"):
        path = Path(model).expanduser()
        if not path.is_file():
            return FALLBACK_LANGUAGE  # not a config (a misspelt name?): loading says so
        found = _language_in(_read_head(path))
        if found:
            _LOGGER.info("Model %s: language %s, from the paths in its config", model, found)
            return found
    _LOGGER.warning(
        "Model %s: its language is not known (not in its name or its config); its voices are "
        "offered as %r. Set the language setting (--language) if that is wrong",
        model, FALLBACK_LANGUAGE,
    )  # fmt: skip
    return FALLBACK_LANGUAGE


def _language_in(text: str) -> str | None:
    for match in _LANGUAGE_FOLDER.finditer(text):
        found = language_of(match.group(1))
        if found:
            return found
    return None


def _read_head(path: Path) -> str:
    try:
        with path.open("rb") as file:
            return file.read(_MAX_CONFIG_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return ""  # loading the model reports a missing config, in its own words
