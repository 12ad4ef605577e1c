"""A text's input words, which units (tokens) of its encoding each one holds, which terms
each one produced, and the text with some of them deleted — what every text-level edit
re-encodes: the faithfulness checks' deletions and the counterfactual search's edits.

An *input word* is what a person types between spaces (``text.split()``), as typed:
deleting one removes it with the punctuation attached to it, and the edited text is the
other words joined by single spaces. Each unit belongs to the word its characters come
from, by the encoder's own tokenizer offsets (a word split into pieces, ``gi ##raf ##fe``,
or into several tokens, ``owl - like``, holds them all); frame tokens ([CLS], [SEP]) belong
to no word. Only words with a letter or digit are *deletable* (punctuation is never an
explanation's word).

*Provenance*: the unit whose row won the max pool of a term (for a word split into pieces,
of any of its columns; :func:`lexlens.analysis.lexical.terms.provenance`) is the unit that
produced it; its word is the input word that produced the term.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from lexlens.analysis.core.vocabulary import token_positions
from lexlens.models.base import Encoder, InputError, LexicalEncoding
from lexlens.models.text_io import MAX_CHARS


@dataclass(frozen=True)
class TextWords:
    """A text's input words (as typed), each one's character span in the text, and the word
    of each unit of its encoding (``None``: a frame token)."""

    text: str
    words: list[str]
    spans: list[tuple[int, int]]
    unit_word: list[int | None]

    @property
    def deletable(self) -> list[int]:
        """The words that may be deleted: those with a letter or digit."""
        return [w for w, word in enumerate(self.words) if any(ch.isalnum() for ch in word)]

    def without(self, drop: Iterable[int]) -> str:
        """The text with the words ``drop`` cut out (the others joined by single spaces;
        "" when none is left)."""
        gone = set(drop)
        return " ".join(w for j, w in enumerate(self.words) if j not in gone)

    def units_of(self, word: int) -> list[int]:
        """The units word ``word`` holds."""
        return [u for u, w in enumerate(self.unit_word) if w == word]


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
    found_words = list(re.finditer(r"\S+", text))
    starts = [m.start() for m in found_words]
    unit_word: list[int | None] = [None] * len(units)
    for u, (start, end) in enumerate(offsets):
        if end <= start:  # a frame token: no characters of the text
            continue
        w = bisect_right(starts, start) - 1
        if w >= 0 and start < found_words[w].end():
            unit_word[u] = w
    spans = [(m.start(), m.end()) for m in found_words]
    return TextWords(text, [m.group() for m in found_words], spans, unit_word)


def word_terms(words: TextWords, encoding: LexicalEncoding, q: np.ndarray) -> list[set[int]]:
    """For each input word, the non-zero terms of the vector ``q`` (the text's gated vector)
    it produced: those whose max pool one of its units won."""
    out: list[set[int]] = [set() for _ in words.words]
    terms = np.flatnonzero(q)
    if encoding.unit_weights is None or terms.size == 0:
        return out
    for term, unit in zip(terms, source_units(encoding, [[int(t)] for t in terms]), strict=True):
        w = None if unit is None else words.unit_word[unit]
        if w is not None:
            out[w].add(int(term))
    return out


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
