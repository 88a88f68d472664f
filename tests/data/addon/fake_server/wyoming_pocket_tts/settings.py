"""The real server's settings declaration, which the add-on's option mapping is built from.

The fake package shadows the real one, so this loads the real module's source by path.
"""

from pathlib import Path

_REAL = Path(__file__).resolve().parents[5] / "wyoming_pocket_tts" / "settings.py"
exec(compile(_REAL.read_text(encoding="utf-8"), str(_REAL), "exec"))  # noqa: S102 - our own source
