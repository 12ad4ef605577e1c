"""WordPiece spelling of a whole word in a vocabulary (BERT's greedy longest-match-first)."""

from __future__ import annotations

from collections.abc import Container

#: Size of the bert-base-uncased WordPiece vocabulary (30,522 ids), the output vocabulary of
#: the packaged SPLADE, of VDR checkpoints and of D2S heads.
BERT_UNCASED_VOCAB = 30522


def wordpiece_split(word: str, vocab: Container[str]) -> list[str] | None:
    """The pieces of ``word`` (``es ##press ##o``), or ``None`` if the vocabulary can't spell it."""
    pieces, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start:
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                break
            end -= 1
        if end == start:
            return None
        pieces.append(piece)
        start = end
    return pieces
