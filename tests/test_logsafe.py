"""Log helpers: clipped client values, rate-limited repeated warnings."""

from __future__ import annotations

import logging

import pytest

from wyoming_pocket_tts.server.logsafe import RepeatLimiter, clip, without_paths


def test_clip_keeps_short_values_and_cuts_long_ones_with_their_length() -> None:
    assert clip("speaker") == "speaker"
    long = clip("a" * 1_000_000)
    assert len(long) < 120
    assert long.startswith("a" * 80) and "1000000 characters" in long


def test_clip_escapes_line_breaks_so_no_log_line_is_forged() -> None:
    shown = clip("x\nERROR fake line\r\x1b[31m")
    assert "\n" not in shown and "\r" not in shown and "\x1b" not in shown
    assert "\\n" in shown


def test_clip_accepts_any_value() -> None:
    assert clip(None) == "None"
    assert clip(["a"] * 100, limit=10).endswith("characters)")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def record(msg: str, *args: object, level: int = logging.WARNING) -> logging.LogRecord:
    return logging.LogRecord("test", level, __file__, 1, msg, args, None)


def test_repeat_limiter_passes_a_burst_then_counts_what_it_held_back() -> None:
    clock = Clock()
    limiter = RepeatLimiter(burst=3, window_s=10.0, clock=clock)
    passed = [limiter.filter(record("Client %s: bad event", n)) for n in range(100)]
    assert passed.count(True) == 3
    assert limiter.filter(record("another warning"))  # other templates are not affected
    clock.now = 11.0
    after = record("Client %s: bad event", 7)
    assert limiter.filter(after)
    assert after.getMessage() == "Client 7: bad event (97 similar messages suppressed)"


def test_repeat_limiter_lets_info_through() -> None:
    limiter = RepeatLimiter(burst=1, clock=Clock())
    assert all(limiter.filter(record("request %d", n, level=logging.INFO)) for n in range(50))


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_repeat_limiter_on_a_handler_limits_every_logger() -> None:
    # A handler of its own: a filter on pytest's capture handler would outlive this test.
    collect = Collect()
    collect.addFilter(RepeatLimiter(burst=2, clock=Clock()))
    parent = logging.getLogger("wyoming_pocket_tts.test_logsafe")
    parent.addHandler(collect)
    try:
        for n in range(20):
            parent.getChild(f"part{n % 2}").warning("same %d", n)
    finally:
        parent.removeHandler(collect)
    assert len(collect.records) == 4  # two per logger


def test_what_a_client_is_told_holds_no_server_paths() -> None:
    assert without_paths("recording /share/voices/anna.wav is silent") == "recording anna.wav is silent"
    assert without_paths("voice 'a' (/tmp/x/a.wav, from the voices folder)") == "voice 'a' (a.wav, from the voices folder)"
    assert without_paths("cannot read /data/huggingface/hub/: denied") == "cannot read : denied"
    # Not paths: URLs, relative names, fractions, a slash alone.
    for kept in ("hf://kyutai/pocket-tts/config.yaml@main", "https://huggingface.co/x/y", "a/b", "./c/d", "5 / 10"):
        assert without_paths(kept) == kept
