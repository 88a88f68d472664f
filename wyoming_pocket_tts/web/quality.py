"""Is a recording good enough to clone a voice from? Checked before it is saved.

Written here rather than taken from a library: the checks are a few numpy lines on levels
and lengths (no library offers "is this a usable voice prompt"), and each threshold below
is the one place its number is declared; the page shows them (GET api/state).

The loudness of a saved recording is normalised when it is encoded (voices/), so "too
quiet" here only refuses a level at which the noise would be amplified with the voice.
Torch-free: the page runs it in the server process before the model is involved.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

# The model clones from the first 30 s; under 5 s it has too little of the voice.
MIN_SECONDS = 5.0
MAX_SECONDS = 30.0
# Loudness is measured on 50 ms windows, in dB relative to full scale (dBFS).
WINDOW_SECONDS = 0.05
# A peak below this is silence (no microphone, muted input): nothing to clone.
SILENCE_PEAK_DBFS = -50.0
# A window counts as speech if it is this loud and within SPEECH_RANGE_DB of the loudest.
SPEECH_FLOOR_DBFS = -55.0
SPEECH_RANGE_DB = 30.0
# Less speech than this, however long the recording, is "mostly silence".
MIN_SPEECH_SECONDS = 2.0
# The speech's level (RMS of its windows) below this is too quiet to bring up cleanly.
QUIET_SPEECH_DBFS = -40.0
# A sample at or above this magnitude is at full scale; more than CLIPPED_SHARE of them,
# in runs, means the input was overdriven (clipping distorts the voice for good).
CLIP_LEVEL = 0.99
CLIPPED_SHARE = 0.001


@dataclass(frozen=True)
class Problem:
    """One thing wrong; `code` names its message in the page's translations, `values`
    fill it; `message` is the English text (API clients, logs)."""

    code: str
    message: str
    values: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RecordingCheck:
    """What was measured, and what is wrong (nothing: the recording may be saved)."""

    seconds: float
    peak_dbfs: float
    speech_seconds: float
    speech_dbfs: float
    clipped_share: float
    problems: tuple[Problem, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["ok"] = self.ok
        return data


def limits() -> dict[str, float]:
    """The thresholds, for the page (it shows the allowed length before recording)."""
    return {"min_seconds": MIN_SECONDS, "max_seconds": MAX_SECONDS}


def _dbfs(value: float) -> float:
    return float(20 * np.log10(value)) if value > 0 else -120.0


def check_recording(samples: np.ndarray, sample_rate: int) -> RecordingCheck:
    """Check mono float samples (-1..1) at `sample_rate`; `samples` may have been cut just
    after MAX_SECONDS by the decoder (a longer file is refused all the same)."""
    audio = np.asarray(samples, dtype=np.float32).reshape(-1)
    seconds = audio.size / sample_rate if sample_rate > 0 else 0.0
    peak = float(np.max(np.abs(audio))) if audio.size else 0.0
    window = max(1, int(sample_rate * WINDOW_SECONDS))
    count = audio.size // window
    if count:
        frames = audio[: count * window].astype(np.float64).reshape(count, window)
        levels = 10 * np.log10(np.maximum(np.mean(frames**2, axis=1), 1e-12))
        speech = levels >= max(SPEECH_FLOOR_DBFS, float(levels.max()) - SPEECH_RANGE_DB)
        speech_seconds = float(np.count_nonzero(speech) * window / sample_rate)
        speech_dbfs = float(10 * np.log10(np.mean(frames[speech] ** 2))) if speech.any() else -120.0
    else:
        speech_seconds, speech_dbfs = 0.0, -120.0
    clipped = np.abs(audio) >= CLIP_LEVEL
    # Only runs of two or more count: one full-scale sample is a loud transient, not clipping.
    in_runs = clipped[1:] & clipped[:-1]
    clipped_share = float(np.count_nonzero(in_runs) / audio.size) if audio.size else 0.0

    problems: list[Problem] = []
    if seconds < MIN_SECONDS:
        problems.append(Problem("too_short", f"the recording lasts {seconds:.1f} s; record at least "
                                f"{MIN_SECONDS:g} s of speech", {"seconds": round(seconds, 1), "min": MIN_SECONDS}))
    elif seconds > MAX_SECONDS:
        problems.append(Problem("too_long", f"the recording lasts more than {MAX_SECONDS:g} s; keep it under "
                                f"{MAX_SECONDS:g} s (the model uses only the first {MAX_SECONDS:g} s)",
                                {"max": MAX_SECONDS}))
    if _dbfs(peak) < SILENCE_PEAK_DBFS:
        problems.append(Problem("silent", f"the recording is silent (peak {_dbfs(peak):.0f} dBFS): is the "
                                "microphone on?", {"peak_dbfs": round(_dbfs(peak))}))
    else:
        if speech_seconds < MIN_SPEECH_SECONDS and seconds >= MIN_SECONDS:
            problems.append(Problem("little_speech", f"only {speech_seconds:.1f} s of the recording is speech; "
                                    f"speak for at least {MIN_SPEECH_SECONDS:g} s",
                                    {"seconds": round(speech_seconds, 1), "min": MIN_SPEECH_SECONDS}))
        if speech_dbfs < QUIET_SPEECH_DBFS:
            problems.append(Problem("too_quiet", f"the speech is too quiet ({speech_dbfs:.0f} dBFS, at least "
                                    f"{QUIET_SPEECH_DBFS:g} needed): speak closer to the microphone or raise its level",
                                    {"dbfs": round(speech_dbfs), "min": QUIET_SPEECH_DBFS}))
    if clipped_share > CLIPPED_SHARE:
        problems.append(Problem("clipped", f"the recording is distorted: {clipped_share:.1%} of it is clipped "
                                "at full scale; lower the microphone's level or speak further from it",
                                {"percent": round(100 * clipped_share, 1)}))
    return RecordingCheck(
        seconds=round(seconds, 2),
        peak_dbfs=round(_dbfs(peak), 1),
        speech_seconds=round(speech_seconds, 2),
        speech_dbfs=round(speech_dbfs, 1),
        clipped_share=round(clipped_share, 5),
        problems=tuple(problems),
    )
