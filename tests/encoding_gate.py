"""Run the real server with every voice encoding held at a gate (the swapped-recording test).

    python tests/encoding_gate.py GATE_DIR --model demo ...   # the server's own arguments

Before the engine encodes a voice for the voice library (`TTSModel.voice_from_audio`, and
`voice_from_recording` for code that encodes from a path), `GATE_DIR/encoding` is created and the encoding waits
until `GATE_DIR/go` exists: the test changes the voices folder at that moment, so what
happens "while a recording is being encoded" is made certain, not left to timing.
"""

from __future__ import annotations

import functools
import runpy
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[1]


def gated(gate: Path, method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def wait_then_encode(*args: Any, **kwargs: Any) -> Any:
        # Only the voice library's encodings (its threads, the server's voice executor):
        # the model loader encodes the demo model's own voice, which is not gated.
        if not threading.current_thread().name.startswith("voice"):
            return method(*args, **kwargs)
        (gate / "encoding").touch()
        deadline = time.monotonic() + 120
        while not (gate / "go").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        return method(*args, **kwargs)

    return wait_then_encode


def main() -> None:
    gate = Path(sys.argv[1])
    sys.argv = ["wyoming_pocket_tts", *sys.argv[2:]]
    sys.path.insert(0, str(REPO))
    from wyoming_pocket_tts.engine.model import TTSModel

    # Encoding from a path reads the file inside: held before it, like encoding from samples.
    for name in ("voice_from_audio", "voice_from_recording"):
        setattr(TTSModel, name, gated(gate, getattr(TTSModel, name)))
    runpy.run_module("wyoming_pocket_tts", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
