"""A text's words as the encoder reads them, where each is in the text, and the text with
some of them deleted — what every text-level faithfulness check re-encodes.

Words follow the one word-piece rule (:func:`lexlens.analysis.core.words.group_word_pieces`):
a word is a run of WordPiece units (``gi ##raf ##fe``); frame tokens ([CLS], [SEP]) belong
to no word. Each word's place in the text comes from the tokenizer's offsets, so a deleted
word is cut out of the text as typed (its case and accents kept around it), and the edited
text is what a person would type: the rest of the text, spaces collapsed. Only words with a
letter or digit are *deletable* (punctuation is never an explanation's word).

*Provenance*: the unit whose row won the max pool of a term (for a word split into pieces,
of any of its columns; :func:`lexlens.analysis.lexical.terms.provenance`) is the unit that
produced it; its word is the input word that produced the term.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from lexlens.analysis.core.vocabulary import token_positions
from lexlens.analysis.core.words import group_word_pieces
from lexlens.models.base import Encoder, InputError, LexicalEncoding
from lexlens.models.text_io import MAX_CHARS


@dataclass(frozen=True)
class TextWords:
    """A text's words (as the encoder spells them), each one's character span in the text,
    and the word of each unit of its encoding (``None``: a frame token)."""

    text: str
    words: list[str]
    spans: list[tuple[int, int]]
    unit_word: list[int | None]

    @property
    def deletable(self) -> list[int]:
        """The words that may be deleted: those with a letter or digit."""
        return [w for w, word in enumerate(self.words) if any(ch.isalnum() for ch in word)]

    def without(self, drop: Iterable[int]) -> str:
        """The text with the words ``drop`` cut out (spaces collapsed; "" when none is left)."""
        text = self.text
        for start, end in sorted((self.spans[w] for w in set(drop)), reverse=True):
            text = text[:start] + " " + text[end:]
        return " ".join(text.split())


def text_words(encoder: Encoder, text: str, units: Sequence[str]) -> TextWords:
    """The words of ``text`` and their spans, aligned with ``units`` (the units of the
    text's encoding by ``encoder``): the encoder's own tokenizer gives each unit's offsets."""
    tokenizer = getattr(encoder, "tokenizer", None)
    if tokenizer is None or not getattr(tokenizer, "is_fast", False):
        raise InputError(
            f"{encoder.name!r} has no fast tokenizer: the words of a text cannot be located "
            "in it to delete them"
        )
    clipped = text[:MAX_CHARS]
    found = tokenizer(
        clipped, truncation=True, max_length=encoder.max_length, return_offsets_mapping=True
    )
    offsets = [tuple(o) for o in found["offset_mapping"]]
    if len(offsets) != len(units):
        raise InputError(
            f"{encoder.name!r}: the tokenizer's {len(offsets)} tokens do not match the "
            f"encoding's {len(units)} units"
        )
    words, groups = group_word_pieces(list(units))
    unit_word: list[int | None] = [None] * len(units)
    spans = []
    for w, group in enumerate(groups):
        for j in group:
            unit_word[j] = w
        spans.append((min(offsets[j][0] for j in group), max(offsets[j][1] for j in group)))
    return TextWords(text, words, spans, unit_word)


def term_columns(term: dict, vocab: list[str]) -> list[int]:
    """The vocabulary columns of a term row (a word joined from ``pieces``, or one token;
    ``index`` when the row has it)."""
    positions = token_positions(vocab)
    tokens = term.get("pieces") or [term.get("token") or term.get("word")]
    columns = [c for t in tokens for c in positions.get(str(t), [])[:1]]
    if not columns and term.get("index") is not None:
        columns = [int(term["index"])]
    return columns


def source_units(encoding: LexicalEncoding, columns: Sequence[Sequence[int]]) -> list[int | None]:
    """For each term (its vocabulary columns), the unit whose row won the max pool (the
    unit that produced it); ``None`` for a term no unit gives a positive weight."""
    if encoding.unit_weights is None:
        raise ValueError("provenance needs the encoding's per-unit rows (keep_units=True)")
    rows = encoding.unit_weights
    if columns and all(len(cols) == 1 for cols in columns):  # one column each: at once
        block = rows[:, [int(cols[0]) for cols in columns]]
        units = np.argmax(block, axis=0)
        best = block[units, np.arange(block.shape[1])]
        return [int(u) if b > 0 else None for u, b in zip(units, best, strict=True)]
    out: list[int | None] = []
    for cols in columns:
        if not len(cols):
            out.append(None)
            continue
        best = rows[:, list(cols)].max(axis=1)
        unit = int(np.argmax(best))
        out.append(unit if best[unit] > 0 else None)
    return out


def source_words(
    encoding: LexicalEncoding, words: TextWords, columns: Sequence[Sequence[int]]
) -> list[int | None]:
    """For each term, the deletable input word that produced it (``None``: a frame token
    or punctuation produced it, or no unit did)."""
    deletable = set(words.deletable)
    out: list[int | None] = []
    for unit in source_units(encoding, columns):
        w = None if unit is None else words.unit_word[unit]
        out.append(w if w in deletable else None)
    return out
