"""Resolving the paths a config names: local files or `hf://repo/path@revision`."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import HubUnavailableError, ModelLoadError

logger = logging.getLogger(__name__)

# huggingface_hub retries a failing request itself (5 times over ~25 s), logging two lines
# per retry, each printed twice (its own handler, then ours). We replace them by one line
# naming the file and what happens next, and tell whoever watches the loading.
_HUB_HTTP_LOGGER = "huggingface_hub.utils._http"
_HUB_FAILURE = re.compile(r"^(?:'(?P<error>.*)'|(?P<http>HTTP Error \d+)) thrown while requesting \w+ (?P<url>\S+)$", re.S)
_HUB_RETRY = re.compile(r"^(?:Retrying in|Rate limited\. Waiting) (?P<wait>[\d.]+)s.*\[Retry (?P<n>\d+)/(?P<of>\d+)\]")

# Told about each failed download attempt (a one-line reason), and None once a file that
# needed retries arrived. A context variable, not a global: set by the thread that loads
# (see `watch_downloads`), seen only by that thread's downloads.
DownloadWatcher = Callable[[str | None], None]
_download_watcher: ContextVar[DownloadWatcher | None] = ContextVar("download_watcher", default=None)


@contextmanager
def watch_downloads(watcher: DownloadWatcher) -> Iterator[None]:
    """Call `watcher` about the retries of downloads made in this thread, in the block."""
    token = _download_watcher.set(watcher)
    try:
        yield
    finally:
        _download_watcher.reset(token)


def _tell_watcher(news: str | None) -> None:
    """Tell this thread's watcher (if any) a retry line, or None: the download succeeded."""
    watcher = _download_watcher.get()
    if watcher is not None:
        watcher(news)


class _RetryLog(logging.Filter):
    """Turns huggingface_hub's two retry lines into one of ours (see _HUB_HTTP_LOGGER)."""

    def __init__(self, what: str) -> None:
        super().__init__()
        self.what = what
        self.error = "failed"
        self.retried = False

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        failure = _HUB_FAILURE.match(message)
        if failure:
            self.error = failure.group("error") or failure.group("http") or "failed"
            return False
        retry = _HUB_RETRY.match(message)
        if not retry:
            return True
        self.retried = True
        line = (f"download of {self.what} failed ({self.error}); "
                f"retry {retry.group('n')} of {retry.group('of')} in {retry.group('wait')} s")  # fmt: skip
        logger.warning("%s", line)
        _tell_watcher(line)
        return False


@contextmanager
def _logging_retries(what: str) -> Iterator[_RetryLog]:
    hub_logger = logging.getLogger(_HUB_HTTP_LOGGER)
    retry_log = _RetryLog(what)
    hub_logger.addFilter(retry_log)
    try:
        yield retry_log
    finally:
        hub_logger.removeFilter(retry_log)


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

    what = f"{hub_path.filename} from {hub_path.repo_id}"
    try:
        with _logging_retries(what) as retry_log:
            local = Path(
                hf_hub_download(
                    repo_id=hub_path.repo_id,
                    filename=hub_path.filename,
                    revision=hub_path.revision,
                    token=access.token,
                    cache_dir=access.cache_dir,
                )
            )
        if retry_log.retried:
            logger.info("download of %s succeeded after retries", what)
            _tell_watcher(None)
        return local
    except GatedRepoError:
        raise ModelLoadError(
            f"access to {hub_path.repo_id} is gated: accept its terms on huggingface.co "
            "and pass a token (--hf-token or HF_TOKEN)"
        ) from None
    except LocalEntryNotFoundError:
        # What huggingface_hub raises when it could not reach the hub (after its retries)
        # and the file is not in the cache; in offline mode, waiting will not bring it.
        error = ModelLoadError if _offline() else HubUnavailableError
        raise error(
            f"could not download {path} (no network, or offline mode and not in the cache); "
            "to run offline, pass a local model config (--model path/to/config.yaml) whose "
            "paths point at local files"
        ) from None
    except Exception as err:  # noqa: BLE001 -- the hub raises many kinds; all mean "unavailable"
        error = HubUnavailableError if _unreachable(err) else ModelLoadError
        raise error(f"could not download {path}: {type(err).__name__}: {err}") from None


def _offline() -> bool:
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


# Statuses of a hub that is down or overloaded, not of a request that is wrong.
_UNAVAILABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


def _unreachable(err: BaseException) -> bool:
    """True for a failure that the hub's being unreachable explains (a connection that failed
    or broke off mid-file, a timeout, a server error), which a later attempt may not meet."""
    response = getattr(err, "response", None)
    status = getattr(response, "status_code", None)
    if isinstance(status, int):
        return status in _UNAVAILABLE_STATUSES
    # httpx (huggingface_hub 1.x and later) and requests (earlier) name their transport
    # errors so, and Python its own (a connection reset, a name that does not resolve).
    names = {cls.__name__ for cls in type(err).__mro__}
    return bool(names & {"TransportError", "ConnectionError", "Timeout", "TimeoutException", "TimeoutError",
                         "gaierror"})  # fmt: skip
