"""Resolving the paths a config names: local files or `hf://repo/path@revision`."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from .errors import ModelLoadError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class HubAccess:
    """How to reach the Hugging Face hub: token (None = HF_TOKEN / login) and cache folder."""

    token: str | None = None
    cache_dir: Path | None = None


@dataclass(frozen=True)
class HubPath:
    repo_id: str
    filename: str
    revision: str | None

    @classmethod
    def parse(cls, path: str) -> HubPath:
        body = path.removeprefix("hf://")
        revision = None
        if "@" in body:
            body, revision = body.rsplit("@", 1)
        parts = body.split("/")
        if len(parts) < 3:
            raise ModelLoadError(f"{path!r} is not of the form hf://owner/repo/file[@revision]")
        return cls("/".join(parts[:2]), "/".join(parts[2:]), revision)


def is_hub_path(path: str | Path) -> bool:
    return str(path).startswith("hf://")


def resolve(path: str | Path, access: HubAccess, base_dir: Path | None = None) -> Path:
    """A local file for `path`, downloading it into the hub cache when it is `hf://`.

    Relative local paths are taken relative to `base_dir` (the config's folder).
    """
    if not is_hub_path(path):
        local = Path(path).expanduser()
        if not local.is_absolute() and base_dir is not None:
            local = base_dir / local
        if not local.exists():
            raise ModelLoadError(f"file not found: {local}")
        return local
    hub_path = HubPath.parse(str(path))
    # Imported here: huggingface_hub is slow to import and only needed for downloads.
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import GatedRepoError, LocalEntryNotFoundError

    try:
        return Path(
            hf_hub_download(
                repo_id=hub_path.repo_id,
                filename=hub_path.filename,
                revision=hub_path.revision,
                token=access.token,
                cache_dir=access.cache_dir,
            )
        )
    except GatedRepoError:
        raise ModelLoadError(
            f"access to {hub_path.repo_id} is gated: accept its terms on huggingface.co "
            "and pass a token (--hf-token or HF_TOKEN)"
        ) from None
    except LocalEntryNotFoundError:
        raise ModelLoadError(
            f"could not download {path} (no network, or offline mode and not in the cache); "
            "to run offline, pass a local model config (--model path/to/config.yaml) whose "
            "paths point at local files"
        ) from None
    except Exception as err:  # noqa: BLE001 -- the hub raises many kinds; all mean "unavailable"
        raise ModelLoadError(f"could not download {path}: {type(err).__name__}: {err}") from None
