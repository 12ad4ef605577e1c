"""The rows of a terms table name, for a text, the whole word the winning piece belongs to;
the words of the units are worked out once per table, not once per row (a long text with
many terms listed stays quick)."""

from __future__ import annotations

import time

import numpy as np

from lexlens.analysis.lexical.terms import term_rows
from lexlens.models.base import LexicalEncoding


def _words_by_hand(units: list[str]) -> list[str]:
    """Each unit's word: a ``##`` piece joins the word right before it; a bracketed special
    token is its own word and joins nothing."""
    out: list[str] = []
    start = 0
    for i, unit in enumerate(units):
        if unit.startswith("##") and i > 0 and not units[i - 1].startswith("["):
            word = "".join(u.removeprefix("##") for u in units[start : i + 1])
            out[start:i] = [word] * (i - start)
            out.append(word)
        else:
            start = i
            out.append(unit)
    return out


def test_unbounded_a_long_text_lists_many_terms_with_their_words_quickly():
    rng = np.random.default_rng(0)
    size, units_count, top = 4_000, 4_096, 4_000
    vocab = [f"w{i}" for i in range(size // 2)] + [f"##p{i}" for i in range(size - size // 2)]
    # A word then one or two pieces, over and over, between [CLS] and [SEP].
    body = [
        vocab[i % (size // 2)] if i % 3 == 0 else vocab[size // 2 + i % (size // 2)]
        for i in range(units_count - 2)
    ]
    units = ["[CLS]", *body, "[SEP]"]
    rows = rng.random((len(units), size), dtype=np.float32)
    encoding = LexicalEncoding(
        weights=rows.max(axis=0), unit_weights=rows, units=units, input_ids=list(range(len(units)))
    )
    started = time.perf_counter()
    table = term_rows(encoding, vocab, top)
    elapsed = time.perf_counter() - started
    assert len(table) == top
    words = _words_by_hand(units)
    for row in table:
        winner = int(np.argmax(rows[:, row["index"]]))
        assert row["from_unit_index"] == winner
        assert row["from_word"] == words[winner]
    assert words[1:4] == ["w0p1p2"] * 3 and words[0] == "[CLS]"
    # One grouping of the units per row took 25 s here; once per table, well under a second.
    assert elapsed < 3.0, elapsed
