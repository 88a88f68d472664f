"""`--quantize auto`: the precision a model runs in, chosen by measuring this CPU, and
remembered in the data dir so that later starts read the decision instead of timing again.

The engine measures (`engine.measure_precisions`, a few seconds at the first start, in
the loader thread: `describe` is answered meanwhile); this module decides (`choose`),
logs both figures and the choice, and keeps the figures in `<data dir>/precision.json`
keyed by the CPU model, the runtime (torch version, its int8 engine, the measurement's
version) and the model's identity: another CPU, a new torch or another model measures
again. A forced `--quantize int8` / `--no-quantize` is never measured. A corrupt cache
file is measured over and replaced; a data dir that cannot be written means measuring at
every start, which the log says once. See docs/precision.md for the rule and its figures.
Imports no torch.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.precision import MEASURED, Precision, PrecisionFigures

_LOGGER = logging.getLogger(__name__)

CACHE_FILE = "precision.json"
CACHE_VERSION = 1
# Entries kept (one per CPU, runtime and model); the oldest go first.
MAX_ENTRIES = 16
# "Several at once": an announcement to four rooms, two people asking in turn...
BUSY_ROWS = 4
FORCED_BY = {"int8": "--quantize int8", "float32": "--no-quantize"}


@dataclass(frozen=True)
class Choice:
    precision: Precision
    why: str


def choose(figures: PrecisionFigures, busy_rows: int = BUSY_ROWS) -> Choice:
    """The faster precision for one reply alone (what a home hears most), unless it falls
    behind real time with `busy_rows` replies at once while the other keeps up with one
    reply and is faster with `busy_rows`: int8 reads its quarter of the weights once for
    every row of a batched step, so on a bandwidth-bound CPU it may lose alone and win
    busy. A tie goes to float32, the exact one."""
    alone = _faster(figures, 1)
    if busy_rows not in figures.batch_sizes:
        return Choice(alone, "faster for one reply")
    busy = _faster(figures, busy_rows)
    if alone == busy:
        return Choice(alone, f"faster for one reply and for {busy_rows} at once")
    budget = figures.frame_ms
    if figures.median_ms(alone, busy_rows) <= budget:
        return Choice(alone, f"faster for one reply, and real time for {busy_rows} at once too")
    if figures.median_ms(busy, 1) > budget:
        return Choice(alone, f"faster for one reply; {busy}, faster for {busy_rows} at once, is not real time for one")
    return Choice(busy, f"faster for {busy_rows} at once, which {alone} cannot carry in real time; real time for one")


def _faster(figures: PrecisionFigures, rows: int) -> Precision:
    return "int8" if figures.median_ms("int8", rows) < figures.median_ms("float32", rows) else "float32"


def summary(figures: PrecisionFigures) -> str:
    """Both precisions at each batch size, for the log."""
    parts = []
    for rows in figures.batch_sizes:
        who = "one reply" if rows == 1 else f"{rows} at once"
        timings = ", ".join(f"{p} {figures.median_ms(p, rows):.1f} ms" for p in MEASURED)
        parts.append(f"{who}: {timings}")
    return f"{'; '.join(parts)} a frame ({figures.frame_ms:.0f} ms of audio, one thread)"


def cpu_model(cpuinfo: str | None = None, machine: str | None = None, cores: int | None = None) -> str:
    """The CPU's name as Linux reports it (x86: "model name"; ARM boards: "Model", else the
    core's implementer and part numbers), its architecture and core count."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            cpuinfo = ""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, colon, value = line.partition(":")
        if colon and value.strip():
            fields.setdefault(key.strip().lower(), value.strip())
    if "model name" in fields:
        name = fields["model name"]
    elif "model" in fields and not fields["model"].isdigit():
        name = fields["model"]  # "Raspberry Pi 5 Model B Rev 1.0"
    elif "cpu part" in fields:
        name = f"CPU implementer {fields.get('cpu implementer', '?')} part {fields['cpu part']}"
    else:
        name = platform.processor() or "unknown CPU"
    machine = machine if machine is not None else platform.machine()
    cores = cores if cores is not None else os.cpu_count() or 1
    return f"{name} ({machine}, {cores} cores)"


class PrecisionCache:
    """The figures measured on this machine, in a JSON file (see the module's docstring).

    Reading never raises: a missing file is empty, an unreadable one is logged and
    treated as empty (the next write replaces it). Writing raises OSError."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def lookup(self, key: dict[str, str]) -> PrecisionFigures | None:
        for entry in self._entries():
            if _key_of(entry) == key:
                try:
                    return PrecisionFigures.from_json(entry.get("figures"))
                except ValueError as err:
                    _LOGGER.warning("%s: ignoring a malformed entry (%s); measuring again", self.path, err)
                    return None
        return None

    def store(self, key: dict[str, str], figures: PrecisionFigures) -> None:
        entries = [entry for entry in self._entries() if _key_of(entry) != key]
        entries.append({**key, "figures": figures.to_json()})
        content = json.dumps({"version": CACHE_VERSION, "entries": entries[-MAX_ENTRIES:]}, indent=1)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Written whole and renamed over the old file: a crash midway leaves the old one.
        handle, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as file:
                file.write(content + "\n")
            os.replace(temporary, self.path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    def _entries(self) -> list[dict[str, Any]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (FileNotFoundError, NotADirectoryError):  # nothing there (yet)
            return []
        except (OSError, ValueError) as err:
            _LOGGER.warning("%s is unreadable (%s); measuring again and replacing it", self.path, err)
            return []
        entries = data.get("entries") if isinstance(data, dict) and data.get("version") == CACHE_VERSION else None
        if not isinstance(entries, list):
            _LOGGER.warning("%s is not a precision file of this version; measuring again and replacing it",
                            self.path)  # fmt: skip
            return []
        return [entry for entry in entries if isinstance(entry, dict)]


def _key_of(entry: dict[str, Any]) -> dict[str, Any]:
    return {name: entry.get(name) for name in ("cpu", "runtime", "model")}


class PrecisionChooser:
    """Decides each model's precision for one server (several models: one decision each).

    `setting` is --quantize's value; `cpu` the CPU's name (`cpu_model()` by default). Safe
    to call from several loader threads: one decision at a time."""

    def __init__(self, setting: str, data_dir: Path, cpu: str | None = None) -> None:
        self.setting = setting
        self.cache = PrecisionCache(data_dir / CACHE_FILE)
        self._cpu = cpu
        self._lock = threading.Lock()
        self._said_unwritable = False

    @property
    def cpu(self) -> str:
        if self._cpu is None:
            self._cpu = cpu_model()
        return self._cpu

    def precision_for(self, model: str, model_id: str, runtime: str,
                      measure: Callable[[], PrecisionFigures]) -> Precision:  # fmt: skip
        """The precision model `model` (its label for the log; `model_id` its identity)
        runs in; `measure` is called only for "auto" when nothing is remembered."""
        if self.setting in FORCED_BY:
            _LOGGER.info("Model %s runs in %s (%s)", model, self.setting, FORCED_BY[self.setting])
            return "int8" if self.setting == "int8" else "float32"
        key = {"cpu": self.cpu, "runtime": runtime, "model": model_id}
        with self._lock:
            figures = self.cache.lookup(key)
            if figures is not None:
                choice = choose(figures)
                _LOGGER.info("Model %s runs in %s (auto, as measured at an earlier start on %s, %s: %s; %s; "
                             "delete %s to measure again)", model, choice.precision, self.cpu, runtime,
                             summary(figures), choice.why, self.cache.path)  # fmt: skip
                return choice.precision
            _LOGGER.info("Model %s: timing float32 and int8 on this CPU (auto; once per CPU, torch and model)", model)
            figures = measure()
            choice = choose(figures)
            remembered = self._remember(key, figures)
            _LOGGER.info("Model %s runs in %s (auto, measured in %.1f s on %s, %s: %s; %s; %s)", model,
                         choice.precision, figures.seconds, self.cpu, runtime, summary(figures), choice.why,
                         remembered)  # fmt: skip
            return choice.precision

    def _remember(self, key: dict[str, str], figures: PrecisionFigures) -> str:
        try:
            self.cache.store(key, figures)
        except OSError as err:
            if not self._said_unwritable:
                self._said_unwritable = True
                _LOGGER.warning("Cannot remember the precision in %s (%s): every start measures again",
                                self.cache.path, err.strerror or err)  # fmt: skip
            return "not remembered"
        return f"remembered in {self.cache.path}"
