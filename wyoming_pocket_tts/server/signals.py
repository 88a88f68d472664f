"""SIGTERM and SIGINT stop the server even when its event loop does not respond; SIGHUP
re-reads the voices instead of killing it.

asyncio's signal handlers run on the event loop: while the loop is stuck in one long piece
of work (a client's megabyte once kept it for minutes), a SIGTERM waited with it, and
Docker or the Supervisor had to SIGKILL the server. So `StopSignals` installs two handlers
per stop signal: asyncio's, which starts the clean shutdown on the loop, and a Python-level
one, which the interpreter runs in the main thread between two bytecodes (a long regular
expression also checks for signals as it goes), whatever the loop is doing. That one arms
an alarm: if the loop has not taken the signal within LOOP_RESPONSE_S, or the shutdown is
not over within STOP_DEADLINE_S, the process ends as an unhandled SIGTERM would end it
(killed by the signal, no cleanup: the disk cache writes atomically). A second stop signal
ends it at once (Ctrl-C twice).

SIGHUP (a closed terminal, or `kill -HUP` to ask for a re-read, as daemons do) used to
kill the server without a word; now it is logged and the voices files are re-read.

Only for the server's own process (`serve(..., own_signals=True)` from the command line):
the alarm and the handlers belong to the whole process, not to a test that runs the server
in its event loop.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType

_LOGGER = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
# How long the event loop has to take a stop signal before the process ends without it.
LOOP_RESPONSE_S = 3.0
# How long a shutdown may take in all (connections told, workers joined) after the signal.
STOP_DEADLINE_S = 20.0


@dataclass
class StopSignals:
    """The server's signal handling (see the module docstring). Main thread only."""

    loop: asyncio.AbstractEventLoop
    # Starts the clean shutdown (on the loop).
    on_stop: Callable[[], None]
    # SIGHUP (on the loop).
    on_hangup: Callable[[], None]
    response_s: float = LOOP_RESPONSE_S
    deadline_s: float = STOP_DEADLINE_S
    # The stop signal received, and when; whether the loop has taken it.
    _signal: int | None = field(default=None, init=False)
    _at: float = field(default=0.0, init=False)
    _taken: bool = field(default=False, init=False)

    def install(self, own_process: bool) -> None:
        """asyncio's handlers; with `own_process`, the watchdog's too (see the module docstring)."""
        for signum in STOP_SIGNALS:
            self.loop.add_signal_handler(signum, self._stop_on_loop)
        self.loop.add_signal_handler(signal.SIGHUP, self._hangup_on_loop)
        if own_process:
            for signum in STOP_SIGNALS:
                # Replaces asyncio's no-op Python-level handler; its wakeup fd still
                # brings the signal to the loop, which runs `_stop_on_loop`.
                signal.signal(signum, self._watch)
            signal.signal(signal.SIGALRM, self._alarm)

    def _stop_on_loop(self) -> None:
        self._taken = True
        self.on_stop()

    def _hangup_on_loop(self) -> None:
        _LOGGER.info("SIGHUP received: re-reading the voices (the server goes on)")
        self.on_hangup()

    def _watch(self, signum: int, _frame: FrameType | None) -> None:
        """Python-level, in the main thread: whatever the loop does."""
        if self._signal is not None:
            self._die(signum, "a second stop signal")
        self._signal = signum
        self._at = time.monotonic()
        signal.setitimer(signal.ITIMER_REAL, self.response_s)

    def _alarm(self, _signum: int, _frame: FrameType | None) -> None:
        if self._signal is None:
            return
        if not self._taken:
            self._die(self._signal, f"the event loop did not respond within {self.response_s:g} s")
        left = self._at + self.deadline_s - time.monotonic()
        if left <= 0:
            self._die(self._signal, f"the shutdown took more than {self.deadline_s:g} s")
        signal.setitimer(signal.ITIMER_REAL, left)

    @staticmethod
    def _die(signum: int, why: str) -> None:
        """End the process as the signal's default action does. Written straight to stderr:
        the thread we interrupted may hold the logging lock."""
        name = signal.Signals(signum).name
        os.write(2, f"{name}: {why}; exiting without a clean shutdown\n".encode())
        signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signum])
        os.kill(os.getpid(), signum)
        os._exit(128 + signum)  # not reached: the default action of both signals ends the process
