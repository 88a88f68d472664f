"""Audio shaping after the engine: speaking rate (time stretch) and pauses between sentences.

numpy only: the server imports this, and the server imports no torch.
"""

from .reply import MAX_SENTENCE_SILENCE_SECONDS, ReplyAudio, check_sentence_silence, silence
from .stretch import MAX_LENGTH_SCALE, MIN_LENGTH_SCALE, TimeStretcher, check_length_scale

__all__ = [
    "MAX_LENGTH_SCALE",
    "MAX_SENTENCE_SILENCE_SECONDS",
    "MIN_LENGTH_SCALE",
    "ReplyAudio",
    "TimeStretcher",
    "check_length_scale",
    "check_sentence_silence",
    "silence",
]
