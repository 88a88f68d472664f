"""Signals (issue 27, items 1 and 7): SIGTERM ends the process even while its event loop is
stuck, SIGHUP no longer kills the server.

The stuck loop is made on purpose in a small process running `StopSignals` (the server's
loop no longer gets stuck on anything a client sends: tests/test_server_attacks_process.py),
in the two ways a loop can be stuck: in Python code that sleeps, and in one long C call
that holds the interpreter (the regular expression that used to check JSON nesting, on
the input that made it backtrack for minutes). The real server gets SIGHUP.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from server_fixtures import REPO, describe, ready_server_process

from wyoming_pocket_tts.server.signals import LOOP_RESPONSE_S

STUCK = {
    "sleeping": "time.sleep(600)",
    # Minutes of backtracking, in C, with the interpreter held (issue 27's first finding).
    "regex": r"""re.compile(rb'"(?:[^"\\]|\\.)*"').sub(b'""', b'"' + b'\\"' * 200_000)""",
}

SCRIPT = """
import asyncio, re, sys, time
from wyoming_pocket_tts.server.signals import StopSignals

async def main():
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    StopSignals(loop, stop.set, lambda: print("hangup", flush=True)).install(own_process=True)
    def stuck():
        print("stuck", flush=True)
        {stuck}
    loop.call_soon(stuck)
    await stop.wait()
    print("stopped cleanly", flush=True)

asyncio.run(main())
"""


def start(script: Path) -> subprocess.Popen[bytes]:
    """`script` run with this tree's package (not an installed copy)."""
    return subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(REPO)})  # fmt: skip


@pytest.mark.parametrize("how", STUCK)
def test_sigterm_ends_a_process_whose_loop_is_stuck(tmp_path: Path, how: str) -> None:
    script = tmp_path / "stuck.py"
    script.write_text(textwrap.dedent(SCRIPT.format(stuck=STUCK[how])))
    proc = start(script)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"stuck\n"
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        code = proc.wait(LOOP_RESPONSE_S + 20)
        took = time.monotonic() - signalled
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    _, err = proc.communicate()
    print(f"stuck {how}: ended {took:.1f} s after SIGTERM", err.decode())
    assert code == -signal.SIGTERM  # as an unhandled SIGTERM ends a process
    assert b"SIGTERM: the event loop did not respond within" in err
    assert took < LOOP_RESPONSE_S + 10


def test_a_stop_signal_the_loop_takes_stops_it_cleanly(tmp_path: Path) -> None:
    script = tmp_path / "idle.py"
    script.write_text(textwrap.dedent(SCRIPT.format(stuck="pass")))
    proc = start(script)
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"stuck\n"
    proc.send_signal(signal.SIGHUP)
    assert proc.stdout.readline() == b"hangup\n"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert out == b"stopped cleanly\n"
    # Nothing else fires later: the alarm finds the stop taken and the process gone.


def test_sighup_is_logged_and_the_server_goes_on(tmp_path: Path) -> None:
    with ready_server_process(tmp_path) as server:
        server.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 20
        while "SIGHUP received" not in server.log():
            assert server.proc.poll() is None, server.log()[-2000:]
            assert time.monotonic() < deadline, server.log()[-2000:]
            time.sleep(0.1)
        info, _ = asyncio.run(describe(server.port))
        assert info.tts[0].voices
        assert server.proc.poll() is None
