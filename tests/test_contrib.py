"""Query ⊙ document contributions sum to the score; gating follows SPEC.md §1."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lexlens.analysis.contrib import bag_of_words, contributions, gate
from lexlens.models import InputError


def test_contributions_sum_to_the_score(splade):
    q, d = splade.encode_texts(["cat on a book", "a kitten sleeping on an old novel"])
    qv, dv = gate(q, splade.vocab, 768), gate(d, splade.vocab, 768)
    score, rows = contributions(qv, dv, splade.vocab)
    reference = float(np.dot(qv.astype(np.float64), dv.astype(np.float64)))
    assert score == pytest.approx(reference, rel=1e-12)
    assert sum(r.contribution for r in rows) == pytest.approx(score, rel=1e-12)
    assert rows[0].contribution >= rows[-1].contribution
    assert {"book", "cat"} <= {r.token for r in rows}


def test_gate_keeps_top_k_and_own_tokens(splade):
    enc = splade.encode_texts(["the zebra"])[0]
    bow = bag_of_words(enc, splade.vocab)
    assert bow[splade.vocab.index("zebra")] == 1 and bow[splade.vocab.index("the")] == 1
    only_bow = gate(enc, splade.vocab, 0)
    assert set(np.flatnonzero(only_bow)) <= set(np.flatnonzero(bow))
    top2 = gate(enc, splade.vocab, 2)
    kept = set(np.flatnonzero(top2))
    best_two = set(np.argsort(-enc.weights)[:2])
    assert best_two <= kept and kept <= best_two | set(np.flatnonzero(bow))
    assert np.array_equal(gate(enc, splade.vocab, -1), enc.weights)


def test_mismatched_vocabularies_are_a_clear_error():
    with pytest.raises(InputError, match="same"):
        contributions(np.ones(3), np.ones(4), ["a", "b", "c"])


def test_contrib_cli(cli):
    proc = cli(
        "contrib", "--encoder", "splade-tiny", "--query", "cat on a book",
        "--doc", "a kitten sleeping on an old novel", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    total = sum(c["contribution"] for c in payload["contributions"])
    assert total == pytest.approx(payload["score"], rel=1e-9)
    for c in payload["contributions"]:
        assert c["contribution"] == pytest.approx(c["query_weight"] * c["doc_weight"], rel=1e-5)
