"""`--quantize auto` on the server's side: the rule that picks a precision from measured
figures, the log line, the cache in the data dir (hits, misses, keys, corrupt or
unwritable files) and the forced values. The figures are given: no timing, no torch."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from wyoming_pocket_tts.core.precision import FrameTiming, PrecisionFigures
from wyoming_pocket_tts.server.precision import (
    CACHE_FILE,
    MAX_ENTRIES,
    PrecisionCache,
    PrecisionChooser,
    choose,
    cpu_model,
    summary,
)

RUNTIME = "torch 9.9, int8 by fbgemm, measurement 1"
CPU = "Test CPU (x86_64, 2 cores)"


def figures(float32: tuple[float, float], int8: tuple[float, float], frame_ms: float = 80.0) -> PrecisionFigures:
    """Medians at 1 and 4 rows, in ms per frame."""
    timings = tuple(
        FrameTiming(precision, rows, median, median * 0.9, median * 1.2)
        for precision, medians in (("float32", float32), ("int8", int8))
        for rows, median in zip((1, 4), medians)
    )
    return PrecisionFigures(timings, frame_ms, "fbgemm", seconds=3.5, repeats=5)


class Measure:
    """A stand-in for engine.measure_precisions that counts its calls."""

    def __init__(self, result: PrecisionFigures) -> None:
        self.result = result
        self.calls = 0

    def __call__(self) -> PrecisionFigures:
        self.calls += 1
        return self.result


def never_measure() -> PrecisionFigures:
    raise AssertionError("a forced precision must not be measured")


# -- the rule ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("float32", "int8", "expected"),
    [
        ((30.0, 90.0), (10.0, 40.0), "int8"),  # faster alone and busy (x86 here)
        ((50.0, 120.0), (70.0, 150.0), "float32"),  # QNNPACK slower on a Cortex-A76 (pocket-tts 240)
        ((20.0, 60.0), (20.0, 60.0), "float32"),  # a tie: the exact one
        # float32 faster alone, int8 faster busy, and float32 carries four in real time: float32
        ((30.0, 75.0), (35.0, 50.0), "float32"),
        # float32 faster alone but not real time with four, int8 real time alone: int8
        ((60.0, 200.0), (65.0, 120.0), "int8"),
        # the same, but int8 is not real time even alone: float32, the faster alone
        ((70.0, 200.0), (85.0, 120.0), "float32"),
        # int8 faster alone, float32 faster busy and int8 too slow busy: float32
        ((40.0, 100.0), (35.0, 130.0), "float32"),
    ],
)
def test_the_rule_keeps_the_faster_and_looks_at_four_at_once(float32, int8, expected) -> None:
    choice = choose(figures(float32, int8))
    assert choice.precision == expected
    assert choice.why


def test_figures_of_one_batch_size_decide_alone() -> None:
    single = PrecisionFigures((FrameTiming("float32", 1, 20.0, 19.0, 21.0), FrameTiming("int8", 1, 10.0, 9.0, 11.0)),
                              80.0, "qnnpack", 1.0, 3)  # fmt: skip
    assert choose(single).precision == "int8"


def test_the_summary_shows_both_precisions_at_each_batch_size() -> None:
    text = summary(figures((31.24, 95.0), (10.4, 40.06)))
    assert "one reply: float32 31.2 ms, int8 10.4 ms" in text
    assert "4 at once: float32 95.0 ms, int8 40.1 ms" in text
    assert "80 ms of audio" in text


def test_figures_survive_json_and_malformed_ones_are_refused() -> None:
    original = figures((30.0, 90.0), (10.0, 40.0))
    assert PrecisionFigures.from_json(json.loads(json.dumps(original.to_json()))) == original
    data = original.to_json()
    for broken in (None, [], {**data, "timings": []}, {**data, "timings": data["timings"][:3]},
                   {**data, "frame_ms": "fast"}, {k: v for k, v in data.items() if k != "repeats"},
                   {**data, "timings": [{**data["timings"][0], "precision": "int4"}, *data["timings"][1:]]}):  # fmt: skip
        with pytest.raises(ValueError):
            PrecisionFigures.from_json(broken)


# -- the CPU's name ------------------------------------------------------------------------

X86 = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel\t\t: 1\nmodel name\t: AMD EPYC 7B13\n\nprocessor\t: 1\n"
PI5 = ("processor\t: 0\nBogoMIPS\t: 108.00\nCPU implementer\t: 0x41\nCPU part\t: 0xd0b\n\n"
       "Revision\t: d04170\nModel\t\t: Raspberry Pi 5 Model B Rev 1.0\n")  # fmt: skip
ARM_BOARD = "processor\t: 0\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU part\t: 0xd08\n"


def test_the_cpu_is_named_as_linux_reports_it() -> None:
    assert cpu_model(X86, "x86_64", 2) == "AMD EPYC 7B13 (x86_64, 2 cores)"  # not the numeric "model"
    assert cpu_model(PI5, "aarch64", 4) == "Raspberry Pi 5 Model B Rev 1.0 (aarch64, 4 cores)"
    assert cpu_model(ARM_BOARD, "aarch64", 4) == "CPU implementer 0x41 part 0xd08 (aarch64, 4 cores)"
    assert cpu_model("", "riscv64", 1).endswith("(riscv64, 1 cores)")
    assert cpu_model()  # this machine's, whatever it is


# -- deciding and remembering --------------------------------------------------------------


def chooser(data_dir: Path, setting: str = "auto", cpu: str = CPU) -> PrecisionChooser:
    return PrecisionChooser(setting, data_dir, cpu=cpu)


def test_auto_measures_once_logs_both_figures_and_the_choice(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    measure = Measure(figures((30.0, 90.0), (10.0, 40.0)))
    with caplog.at_level(logging.INFO, logger="wyoming_pocket_tts.server.precision"):
        assert chooser(tmp_path).precision_for("english", "english-abc", RUNTIME, measure) == "int8"
    assert measure.calls == 1
    line = next(record.getMessage() for record in caplog.records if "runs in" in record.getMessage())
    assert "english runs in int8" in line and "measured in 3.5 s" in line
    assert "float32 30.0 ms, int8 10.0 ms" in line and "float32 90.0 ms, int8 40.0 ms" in line
    assert CPU in line and RUNTIME in line and str(tmp_path / CACHE_FILE) in line
    assert (tmp_path / CACHE_FILE).is_file()

    # A later start (a new chooser, as a new process has) reads the decision.
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="wyoming_pocket_tts.server.precision"):
        again = chooser(tmp_path).precision_for("english", "english-abc", RUNTIME, never_measure)
    assert again == "int8"
    line = next(record.getMessage() for record in caplog.records if "runs in" in record.getMessage())
    assert "as measured at an earlier start" in line and "float32 30.0 ms, int8 10.0 ms" in line


@pytest.mark.parametrize("changed", ["cpu", "runtime", "model"])
def test_another_cpu_torch_or_model_measures_again(tmp_path: Path, changed: str) -> None:
    chooser(tmp_path).precision_for("english", "english-abc", RUNTIME, Measure(figures((30.0, 90.0), (10.0, 40.0))))
    other = Measure(figures((30.0, 90.0), (50.0, 140.0)))
    cpu = "Other CPU (aarch64, 4 cores)" if changed == "cpu" else CPU
    runtime = "torch 10.0, int8 by fbgemm, measurement 1" if changed == "runtime" else RUNTIME
    model = "german-def" if changed == "model" else "english-abc"
    assert chooser(tmp_path, cpu=cpu).precision_for("m", model, runtime, other) == "float32"
    assert other.calls == 1
    # both decisions are remembered side by side
    assert chooser(tmp_path).precision_for("english", "english-abc", RUNTIME, never_measure) == "int8"
    assert chooser(tmp_path, cpu=cpu).precision_for("m", model, runtime, never_measure) == "float32"


def test_the_cache_keeps_a_bounded_number_of_entries(tmp_path: Path) -> None:
    cache = PrecisionCache(tmp_path / CACHE_FILE)
    for index in range(MAX_ENTRIES + 3):
        cache.store({"cpu": CPU, "runtime": RUNTIME, "model": f"m{index}"}, figures((30.0, 90.0), (10.0, 40.0)))
    entries = json.loads((tmp_path / CACHE_FILE).read_text())["entries"]
    assert len(entries) == MAX_ENTRIES and entries[-1]["model"] == f"m{MAX_ENTRIES + 2}"
    assert cache.lookup({"cpu": CPU, "runtime": RUNTIME, "model": "m0"}) is None  # the oldest went


@pytest.mark.parametrize(
    "content",
    ["{not json", "[1, 2]", '{"version": 99, "entries": []}', '{"version": 1, "entries": "x"}',
     json.dumps({"version": 1, "entries": [{"cpu": CPU, "runtime": RUNTIME, "model": "english-abc",
                                            "figures": {"timings": "garbage"}}]})],
)  # fmt: skip
def test_a_corrupt_cache_file_is_measured_over_and_replaced(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                           content: str) -> None:  # fmt: skip
    (tmp_path / CACHE_FILE).write_text(content)
    measure = Measure(figures((30.0, 90.0), (10.0, 40.0)))
    with caplog.at_level(logging.WARNING):
        assert chooser(tmp_path).precision_for("english", "english-abc", RUNTIME, measure) == "int8"
    assert measure.calls == 1
    assert str(tmp_path / CACHE_FILE) in caplog.text
    assert chooser(tmp_path).precision_for("english", "english-abc", RUNTIME, never_measure) == "int8"


def test_an_unwritable_data_dir_measures_at_each_start_and_says_so_once(tmp_path: Path,
                                                                       caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    blocker = tmp_path / "file"
    blocker.write_text("")  # the data dir would be under a file: nothing can be written
    decide = chooser(blocker / "data")
    measure = Measure(figures((30.0, 90.0), (10.0, 40.0)))
    with caplog.at_level(logging.INFO, logger="wyoming_pocket_tts.server.precision"):
        assert decide.precision_for("english", "english-abc", RUNTIME, measure) == "int8"
        assert decide.precision_for("german", "german-def", RUNTIME, measure) == "int8"
    assert measure.calls == 2
    warnings = [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "every start measures again" in warnings[0]
    assert all("not remembered" in r.getMessage() for r in caplog.records if "runs in" in r.getMessage())


@pytest.mark.parametrize(("setting", "expected"), [("int8", "int8"), ("float32", "float32")])
def test_a_forced_precision_is_never_measured_nor_remembered(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                             setting: str, expected: str) -> None:  # fmt: skip
    (tmp_path / CACHE_FILE).write_text("{not json")  # not even read
    with caplog.at_level(logging.INFO, logger="wyoming_pocket_tts.server.precision"):
        assert chooser(tmp_path, setting).precision_for("english", "english-abc", RUNTIME, never_measure) == expected
    assert (tmp_path / CACHE_FILE).read_text() == "{not json"
    assert f"english runs in {expected}" in caplog.text and "unreadable" not in caplog.text
