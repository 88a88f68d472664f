"""What the engine's precision measurement found (`engine.measure_precisions`), as plain
data: the server decides from it and remembers it (`server/precision.py`); no torch here."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

Precision = Literal["float32", "int8"]
MEASURED: tuple[Precision, ...] = ("float32", "int8")


@dataclass(frozen=True)
class FrameTiming:
    """One precision at one batch size: the time of one frame of every row (a FlowLM step
    of `rows` rows and the decoding of `rows` frames), on one thread, in milliseconds."""

    precision: Precision
    rows: int
    median_ms: float
    # The fastest and the slowest of the repeats: how steady the machine was.
    low_ms: float
    high_ms: float


@dataclass(frozen=True)
class PrecisionFigures:
    """Both precisions timed on this CPU at each batch size, interleaved in one process."""

    timings: tuple[FrameTiming, ...]
    # The audio one frame carries: a row keeps real time if its frame takes no longer.
    frame_ms: float
    # The int8 kernel's engine (fbgemm, qnnpack), how long the measurement took and how
    # many timed rounds each median is of.
    int8_engine: str
    seconds: float
    repeats: int

    def median_ms(self, precision: Precision, rows: int) -> float:
        for timing in self.timings:
            if timing.precision == precision and timing.rows == rows:
                return timing.median_ms
        raise KeyError(f"no {precision} timing at {rows} rows")

    @property
    def batch_sizes(self) -> tuple[int, ...]:
        return tuple(sorted({timing.rows for timing in self.timings}))

    def to_json(self) -> dict[str, Any]:
        return {
            "timings": [asdict(timing) for timing in self.timings],
            "frame_ms": self.frame_ms,
            "int8_engine": self.int8_engine,
            "seconds": self.seconds,
            "repeats": self.repeats,
        }

    @classmethod
    def from_json(cls, data: Any) -> PrecisionFigures:
        """Raises ValueError (KeyError, TypeError included) for anything malformed."""
        try:
            timings = tuple(
                FrameTiming(precision=item["precision"], rows=int(item["rows"]), median_ms=float(item["median_ms"]),
                            low_ms=float(item["low_ms"]), high_ms=float(item["high_ms"]))
                for item in data["timings"]
            )  # fmt: skip
            figures = cls(timings, float(data["frame_ms"]), str(data["int8_engine"]), float(data["seconds"]),
                          int(data["repeats"]))
        except (KeyError, TypeError, AttributeError) as err:
            raise ValueError(f"malformed precision figures: {err!r}") from None
        if not timings or any(t.precision not in MEASURED or t.rows < 1 for t in timings):
            raise ValueError("malformed precision figures: an unknown precision or no timing")
        missing = [(p, rows) for p in MEASURED for rows in figures.batch_sizes
                   if not any(t.precision == p and t.rows == rows for t in timings)]  # fmt: skip
        if missing:
            raise ValueError(f"malformed precision figures: no timing for {missing}")
        return figures
