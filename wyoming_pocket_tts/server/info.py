"""The `info` event: what Home Assistant learns about us from `describe`.

Home Assistant reads it once when the integration loads, uses only the first installed TTS
program, and offers each voice in every language it lists. The program is always reported
as installed (even while the model loads) so that Home Assistant sets up the TTS entity; the
voices appear as soon as the voice library is known.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import PurePath

from wyoming.info import Attribution, Info, TtsProgram, TtsVoice

from .. import __version__
from ..core import VoiceInfo

KYUTAI = Attribution(name="Kyutai", url="https://github.com/kyutai-labs/pocket-tts")
PROGRAM_URL = "https://github.com/wyoming-pocket-tts/wyoming-pocket-tts"


def build_info(
    model_name: str, voices: Iterable[VoiceInfo], *, loading: bool = False, warming_up: bool = False
) -> Info:
    """Info with one TTS program; `loading` and `warming_up` (requests are served, the
    first synthesis is being paid for) only change the description people see."""
    status = " (loading)" if loading else " (warming up)" if warming_up else ""
    tts_voices = [
        TtsVoice(
            name=voice.name,
            description=voice.description,
            version=None,
            attribution=Attribution(
                name=voice.attribution_name or KYUTAI.name,
                url=voice.attribution_url or KYUTAI.url,
            ),
            installed=True,
            languages=list(voice.languages),
        )
        for voice in voices
    ]
    program = TtsProgram(
        name="pocket-tts",
        # The file name of a custom config, never its path: every client on the network reads this.
        description=f"Kyutai Pocket TTS, model {PurePath(model_name).name}{status}",
        version=__version__,
        attribution=KYUTAI,
        installed=True,
        voices=tts_voices,
        supports_synthesize_streaming=True,
    )
    return Info(tts=[program])
