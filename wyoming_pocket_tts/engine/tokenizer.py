"""Text to token ids: a `tokenizers` JSON file or a SentencePiece model."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from ..core.errors import ModelLoadError


class Tokenizer(Protocol):
    vocab_size: int

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: list[int]) -> str: ...


class JsonTokenizer:
    def __init__(self, path: Path) -> None:
        import tokenizers

        self._tokenizer = tokenizers.Tokenizer.from_file(str(path))
        self.vocab_size = self._tokenizer.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        return self._tokenizer.encode(text).ids

    def decode(self, ids: list[int]) -> str:
        return self._tokenizer.decode(ids)


class SentencePieceTokenizer:
    def __init__(self, path: Path) -> None:
        import sentencepiece

        self._processor = sentencepiece.SentencePieceProcessor(model_file=str(path))
        self.vocab_size = self._processor.vocab_size()

    def encode(self, text: str) -> list[int]:
        return self._processor.encode(text, out_type=int)

    def decode(self, ids: list[int]) -> str:
        return self._processor.decode(ids)


# The config's tokenizer kinds: a new kind is one entry here (the config check reads it too).
TOKENIZERS: dict[str, Callable[[Path], Tokenizer]] = {
    "tokenizers": JsonTokenizer,
    "json": JsonTokenizer,
    "sentencepiece": SentencePieceTokenizer,
}


def load_tokenizer(path: Path, kind: str, n_bins: int) -> Tokenizer:
    """Load by the config's kind; a `.json` file is always a `tokenizers` file."""
    try:
        tokenizer = TOKENIZERS["json" if path.suffix == ".json" else kind](path)
    except Exception as err:  # noqa: BLE001 -- both libraries raise bare RuntimeError/Exception
        raise ModelLoadError(f"could not read tokenizer {path}: {err}") from None
    if tokenizer.vocab_size != n_bins:
        raise ModelLoadError(
            f"tokenizer {path} has {tokenizer.vocab_size} tokens, the model expects {n_bins}"
        )
    return tokenizer
