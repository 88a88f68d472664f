"""The engine's precision measurement (`--quantize auto`) and the loader that acts on it:
which timing is whose, the model left as it was, the server loading a model in the
precision decided. A clock is injected where figures are checked: no timing thresholds."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch

from wyoming_pocket_tts.engine import TTSModel, build_demo_model, measure_precisions, runtime_identity
from wyoming_pocket_tts.engine.precision import BATCH_SIZES, MIN_REPEATS, REPEATS, STEPS_PER_ROUND
from wyoming_pocket_tts.engine.quantize import Int8Linear, int8_slots, machine_engine
from wyoming_pocket_tts.server.precision import CACHE_FILE


@pytest.fixture()
def fresh_model() -> TTSModel:
    return build_demo_model()


def int8_in_use(model: TTSModel) -> list[bool]:
    return [isinstance(slot.get(), Int8Linear) for slot in int8_slots(model.network)]


class PrecisionClock:
    """Advances by `int8_s` or `float32_s` at each call, after whichever precision the
    model is running in at that moment: each round then lasts exactly that long."""

    def __init__(self, model: TTSModel, float32_s: float, int8_s: float) -> None:
        self.model, self.float32_s, self.int8_s = model, float32_s, int8_s
        self.now = 0.0

    def __call__(self) -> float:
        int8 = isinstance(self.model.network.flow_lm.flow_net.modulation, Int8Linear)
        self.now += self.int8_s if int8 else self.float32_s
        return self.now


def test_each_timing_belongs_to_its_precision(fresh_model: TTSModel) -> None:
    figures = measure_precisions(fresh_model, clock=PrecisionClock(fresh_model, 0.004, 0.002))
    assert figures.batch_sizes == BATCH_SIZES
    for rows in BATCH_SIZES:  # a round of steps, then one row's decoding counted per row
        assert figures.median_ms("float32", rows) == pytest.approx(4.0 / STEPS_PER_ROUND * (1 + rows))
        assert figures.median_ms("int8", rows) == pytest.approx(2.0 / STEPS_PER_ROUND * (1 + rows))
    assert figures.repeats == REPEATS
    assert figures.frame_ms == pytest.approx(80.0)
    assert figures.int8_engine == machine_engine().name  # ours, or torch's for this machine


def test_the_model_is_float32_again_and_its_threads_restored(fresh_model: TTSModel) -> None:
    threads = torch.get_num_threads()
    before = [slot.get() for slot in int8_slots(fresh_model.network)]
    measure_precisions(fresh_model, repeats=1)
    assert [slot.get() for slot in int8_slots(fresh_model.network)] == before  # the very same modules
    assert not any(int8_in_use(fresh_model))
    assert torch.get_num_threads() == threads


def test_a_slow_machine_stops_after_the_minimum_repeats(fresh_model: TTSModel) -> None:
    figures = measure_precisions(fresh_model, clock=PrecisionClock(fresh_model, 60.0, 60.0), budget_s=1.0)
    assert figures.repeats == MIN_REPEATS


def test_real_timings_of_both_precisions(fresh_model: TTSModel) -> None:
    figures = measure_precisions(fresh_model, repeats=2)
    assert {(t.precision, t.rows) for t in figures.timings} == {(p, r) for p in ("float32", "int8") for r in BATCH_SIZES}
    assert all(0 < t.low_ms <= t.median_ms <= t.high_ms for t in figures.timings)
    assert figures.seconds > 0 and figures.repeats == 2


def test_a_quantized_model_cannot_be_measured(fresh_model: TTSModel) -> None:
    from wyoming_pocket_tts.engine import quantize_model

    quantize_model(fresh_model)
    assert all(int8_in_use(fresh_model))
    with pytest.raises(ValueError, match="already quantized"):
        measure_precisions(fresh_model)


def test_the_runtime_names_torch_and_its_int8_engine() -> None:
    runtime = runtime_identity()
    assert torch.__version__ in runtime and "int8 by " in runtime and "measurement" in runtime


# -- the server's loader ---------------------------------------------------------------------


def _load(tmp_path: Path, *args: str) -> TTSModel:
    from wyoming_pocket_tts.__main__ import build_parser, config_from_args
    from wyoming_pocket_tts.server.app import load_backend
    from wyoming_pocket_tts.server.model_facts import model_facts

    config = config_from_args(build_parser().parse_args(["--model", "demo", "--data-dir", str(tmp_path), *args]))
    backend = load_backend(config, model_facts(config.model, config.language).languages)
    backend.voices.close()
    assert isinstance(backend.model, TTSModel)
    return backend.model


@pytest.mark.parametrize(("args", "int8"), [(("--quantize",), True), (("--no-quantize",), False),
                                            (("--quantize", "int8"), True), (("--quantize", "float32"), False)])
def test_a_forced_precision_loads_as_asked_without_measuring(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             args: tuple[str, ...], int8: bool) -> None:  # fmt: skip
    monkeypatch.setattr("wyoming_pocket_tts.engine.precision.measure_precisions", _never)
    model = _load(tmp_path, *args)
    assert all(int8_in_use(model)) if int8 else not any(int8_in_use(model))
    assert not (tmp_path / CACHE_FILE).exists()


def _never(*args: object, **kwargs: object) -> None:
    raise AssertionError("measured a forced precision")


def test_auto_loads_the_measured_choice_and_remembers_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    with caplog.at_level(logging.INFO):
        model = _load(tmp_path)  # auto: the default
    entry = json.loads((tmp_path / CACHE_FILE).read_text())["entries"][0]
    assert entry["model"] == model.model_id and entry["runtime"] == runtime_identity()
    line = next(r.getMessage() for r in caplog.records if "runs in" in r.getMessage())
    assert all(int8_in_use(model)) or not any(int8_in_use(model))
    chosen = "int8" if all(int8_in_use(model)) else "float32"
    assert f"demo runs in {chosen} (auto, measured in" in line

    # The next start reads it; a remembered int8 loads quantized, float32 stays float32.
    entry["figures"]["timings"] = [
        {**timing, "median_ms": timing["median_ms"] if timing["precision"] == "int8" else 1000.0}
        for timing in entry["figures"]["timings"]
    ]
    (tmp_path / CACHE_FILE).write_text(json.dumps({"version": 1, "entries": [entry]}))
    monkeypatch.setattr("wyoming_pocket_tts.engine.precision.measure_precisions", _never)
    assert all(int8_in_use(_load(tmp_path)))
