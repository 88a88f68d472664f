"""Wyoming-protocol text-to-speech server built on Kyutai's Pocket TTS."""

__version__ = "0.1.0"
