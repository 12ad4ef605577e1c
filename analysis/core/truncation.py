"""The one notice of a text cut to its encoder's token limit: which text, and how many of its
tokens were kept out of how many (special tokens left out of both counts). Every analysis that
encodes a user's text says it so: the terms of a text, a search's query, an evaluation's
queries, a counterfactual's query."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lexlens.analysis.core.vocabulary import is_special_token
from lexlens.models.base import Encoder, LexicalEncoding

#: Words of a text a notice quotes when it names the text by its opening.
OPENING_WORDS = 6
#: Texts cut named one by one in an evaluation's notes; the others are counted.
MOST_NAMED = 10


@dataclass(frozen=True)
class Truncation:
    """A text cut to ``limit`` tokens: ``kept`` of its ``total`` tokens (``None``: its
    encoder has no tokenizer to count them with) were encoded."""

    name: str
    kept: int
    total: int | None
    limit: int

    def note(self) -> str:
        """``query q7 truncated to the encoder's limit of 512 tokens: 510 of its 12,344
        tokens kept``."""
        told = (
            f"{self.kept:,} of its {self.total:,}" if self.total is not None else f"{self.kept:,}"
        )
        return (
            f"{self.name} truncated to the encoder's limit of {self.limit} tokens: "
            f"{told} tokens kept"
        )


def opening(text: str, words: int = OPENING_WORDS) -> str:
    """A text named by its first words (``'a b c d e f …'``)."""
    parts = text.split(maxsplit=words)
    return repr(" ".join(parts[:words]) + (" …" if len(parts) > words else ""))


def truncation(
    encoder: Encoder, text: str, encoding: LexicalEncoding, name: str
) -> Truncation | None:
    """How ``encoding`` of ``text`` (named ``name`` in the notice) was cut, or ``None`` when
    the whole text was encoded."""
    if not encoding.truncated:
        return None
    from lexlens.models.text_io import count_tokens  # heavy: loads torch

    kept = sum(1 for unit in encoding.units if not is_special_token(unit))
    tokenizer = getattr(encoder, "tokenizer", None)
    total = count_tokens(tokenizer, text) if tokenizer is not None else None
    return Truncation(
        name, kept, max(total, kept) if total is not None else None, encoder.max_length
    )


def truncation_note(
    encoder: Encoder, text: str, encoding: LexicalEncoding, name: str
) -> str | None:
    """The notice of :func:`truncation`, or ``None``."""
    cut = truncation(encoder, text, encoding, name)
    return cut.note() if cut is not None else None


def truncation_notes(
    cuts: Sequence[Truncation], most: int = MOST_NAMED, what: str = "texts"
) -> list[str]:
    """One notice per text cut, the first ``most``; one more counts the others (``what``
    they are)."""
    notes = [cut.note() for cut in cuts[:most]]
    if len(cuts) > most:
        notes.append(f"{len(cuts) - most} more {what} truncated to the encoder's limit likewise")
    return notes
