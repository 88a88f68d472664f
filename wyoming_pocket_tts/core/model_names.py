"""What a model name given by the user (`--model`, `load_model`) says about where the model is.

A name is a catalog name, `demo`, or an upstream-format YAML config: a local path or an
`hf://` path. The command line, the engine's loader and the server's model labels all
decide this the same way, so the rule lives here, torch-free.
"""

from __future__ import annotations

MODEL_CONFIG_SUFFIXES = (".yaml", ".yml")


def names_config_file(name: str) -> bool:
    """Whether `name` points at a config file (a YAML suffix or a directory part), not a catalog name."""
    return name.endswith(MODEL_CONFIG_SUFFIXES) or "/" in name
