"""A collection's strongest terms mark a piece of a word ("##rian", "ba" of "bactrian") as
a piece, never as a word: against the items' own words (a regular expression) and the
tokenizer's pieces of each."""

from __future__ import annotations

import re

from lexlens.analysis.collections.indexing import build_index
from lexlens.analysis.collections.store import open_index

TEXTS = [
    "a dromedary walking through the desert sand",
    "a bactrian camel with two humps resting",
    "a spotted hyena laughing at night",
    "a small terrier digging in the garden",
    "a horse grazing in a green field",
    "a dromedary and a horse side by side",
    "a striped hyena near a dead zebra",
    "a wire-haired terrier chasing a ball",
]


def test_silent_wrong_the_strongest_terms_mark_their_pieces(tmp_path, splade):
    (tmp_path / "animals.txt").write_text("\n".join(TEXTS) + "\n")
    build_index(splade, tmp_path / "animals.txt", tmp_path / "ix")
    readings = open_index(tmp_path / "ix").strongest_readings(30)
    words = set(re.findall(r"[^\W_]+", " ".join(TEXTS).casefold()))
    spelled = {w: splade.tokenizer.tokenize(w) for w in words}
    marked = 0
    for term, reading in readings:
        token = term.token
        owners = {
            w
            for w, p in spelled.items()
            if len(p) > 1 and token in (p[1:] if token.startswith("##") else p[:1])
        }
        piece = token not in words and (token.startswith("##") or bool(owners))
        assert reading.piece is piece, (token, reading)
        if piece:
            marked += 1
            assert reading.label.startswith(f"{token} (piece")
            assert reading.of == (owners.pop() if len(owners) == 1 else None)
        else:
            assert reading.label == token
    assert marked >= 1, [r.label for _, r in readings]
