"""The `info` event: what Home Assistant learns about us from `describe`.

Home Assistant reads it once when the integration loads, uses only the first installed TTS
program, and offers each voice in every language it lists. The program is always reported
as installed (even while the model loads) so that Home Assistant sets up the TTS entity; the
voices appear as soon as the voice library is known.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePath

from wyoming.info import Attribution, Info, TtsProgram, TtsVoice

from .. import __version__

KYUTAI = Attribution(name="Kyutai", url="https://github.com/kyutai-labs/pocket-tts")
PROGRAM_URL = "https://github.com/wyoming-pocket-tts/wyoming-pocket-tts"


@dataclass(frozen=True)
class VoiceEntry:
    """One voice as the server advertises it (mirrors the voices library's VoiceInfo)."""

    name: str
    description: str
    languages: tuple[str, ...]
    attribution_name: str | None = None
    attribution_url: str | None = None


def voice_entry(voice: object) -> VoiceEntry:
    """Adapt a `wyoming_pocket_tts.voices.VoiceInfo` (duck-typed: no torch import here)."""
    return VoiceEntry(
        name=str(voice.name),  # type: ignore[attr-defined]
        description=str(getattr(voice, "description", "") or voice.name),  # type: ignore[attr-defined]
        languages=tuple(getattr(voice, "languages", ()) or ()),
        attribution_name=getattr(voice, "attribution_name", None),
        attribution_url=getattr(voice, "attribution_url", None),
    )


def build_info(model_name: str, voices: Iterable[VoiceEntry], *, loading: bool = False) -> Info:
    """Info with one TTS program; `loading` only changes the description people see."""
    status = " (loading)" if loading else ""
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
