"""A model load running in the background, and what the requests waiting for it are told.

Loading may download weights, and huggingface_hub retries a failing download itself for
half a minute or more. A request waiting for that model is not kept waiting through the
retries: `LoadTrouble` holds the current reason (reported by `engine.hub.watch_downloads`
from the loading thread), and `LoadTrouble.wait` ends at the first of "the load is done"
and "the load is in trouble", raising `LoadFailed` with the reason in the second case. The
load itself goes on for the next requests. One mechanism for the default voice's model at
start (`service.TtsService`) and for every later load (`models.ModelPool`).

Imports no torch (the engine's hub module is imported in the loading thread).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class LoadFailed(Exception):
    """Loading the model or the voices failed; the message is one line for the user."""


def error_text(err: BaseException) -> str:
    """A one-line message for an `error` event; engine errors are already worded for users."""
    text = " ".join(str(err).split())
    return text or type(err).__name__


def load_failure(err: BaseException, model: str | None = None) -> LoadFailed:
    """`err` as the one-line LoadFailed a request gets; `model` names it in a server with several."""
    if isinstance(err, LoadFailed) and model is None:
        return err
    return LoadFailed(f"model {model} failed to load: {error_text(err)}" if model else error_text(err))


def load_watched(loader: Callable[[], T], report: Callable[[str | None], None]) -> T:
    """Run `loader` (blocking, in the loading thread) with its downloads' retries told to `report`."""
    # Imported here: the engine package is only imported where the model is loaded.
    from ..engine.hub import watch_downloads

    with watch_downloads(report):
        return loader()


class LoadTrouble:
    """Why a model's load is failing right now (a download being retried), or None.

    `report` runs on the event loop; `reporter` gives the thread-safe callable that the
    loading thread hands to `watch_downloads`.
    """

    def __init__(self) -> None:
        self.reason: str | None = None
        # Set, then replaced, at each new reason: its waiters wake, later ones wait for the next.
        self._seen = asyncio.Event()

    def report(self, reason: str | None) -> None:
        """On the loop: the load's current trouble (None: it recovered, or it ended)."""
        self.reason = reason
        if reason is not None:
            self._seen.set()
            self._seen = asyncio.Event()

    def reporter(self, loop: asyncio.AbstractEventLoop) -> Callable[[str | None], None]:
        """`report`, callable from the loading thread."""

        def report(reason: str | None) -> None:
            with contextlib.suppress(RuntimeError):  # the loop was closed (shutdown)
                loop.call_soon_threadsafe(self.report, reason)

        return report

    def failure(self, model: str | None = None) -> LoadFailed:
        """What a waiting request is told while the load is in trouble."""
        subject = f"model {model} is still loading" if model else "still loading"
        return LoadFailed(f"{subject}, and {self.reason or 'a download failed'}")

    async def wait(self, load: asyncio.Future[T], model: str | None = None) -> T:
        """The load's result, or LoadFailed at once while the load is in trouble (now or as
        soon as it is). A waiter that is cancelled or gives up never cancels the load."""
        if self.reason is not None:
            raise self.failure(model)
        ready = asyncio.shield(load)
        trouble = asyncio.ensure_future(self._seen.wait())
        waits: set[asyncio.Future[Any]] = {ready, trouble}
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            trouble.cancel()
            if not ready.done():
                ready.cancel()  # only the shield: the load goes on
        if ready.done() and not ready.cancelled():
            return ready.result()  # raises the load's error
        if load.done():  # it ended with the trouble, before the shield heard
            return load.result()
        raise self.failure(model)
