"""A SentencePiece tokenizer trained locally, for random-weight models of the released
architectures that read one (the shipped demo model uses a `tokenizers` file instead)."""

from __future__ import annotations

import io
import random
from pathlib import Path

import sentencepiece


def make_sentencepiece_model(path: Path, vocab_size: int = 256) -> Path:
    """Train a tiny SentencePiece model on generated text; its size is `vocab_size`."""
    # Pseudo-words from random syllables give the trainer enough distinct pieces; a released
    # model's size (4000) needs more and longer words than the default 256.
    rng = random.Random(0)
    syllables = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
    large = vocab_size > 256
    words = ["".join(rng.choices(syllables, k=rng.randint(1, 4 if large else 3)))
             for _ in range(3 * vocab_size if large else 600)]  # fmt: skip
    lines = [" ".join(rng.choices(words, k=8)).capitalize() + rng.choice([".", "!", "?", ", 3.5."])
             for _ in range(3 * vocab_size if large else 2000)]  # fmt: skip
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=model, vocab_size=vocab_size,
        character_coverage=1.0, model_type="unigram", minloglevel=2,
        user_defined_symbols=list(".,!?;:"),
    )  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(model.getvalue())
    return path
