"""Faithfulness of failure explanations: every number is the model run on the edited query
(checked against encoding the edited text directly and scoring with numpy), and
comprehensiveness and AOPC are the formulas computed by hand."""

from __future__ import annotations

import numpy as np
import pytest

from lexlens.analysis.collections.indexing import build_index
from lexlens.analysis.collections.store import open_index
from lexlens.analysis.core.curves import aopc, deletion_curve, insertion_aopc
from lexlens.analysis.core.gating import gate
from lexlens.analysis.evaluation.evaluate import evaluate
from lexlens.analysis.faithfulness.benchmark import failures_faithfulness, with_faithfulness
from tests.helpers import close_to

from .corpus import QRELS, QUERIES, TEXTS


@pytest.fixture(scope="module")
def index(tmp_path_factory, splade):
    folder = tmp_path_factory.mktemp("faith")
    source = folder / "items.csv"
    source.write_text("id,text\n" + "".join(f"{i},{t}\n" for i, t in TEXTS.items()))
    build_index(splade, source, folder / "ix")
    return open_index(folder / "ix")


@pytest.fixture(scope="module")
def evaluation(index, splade):
    return evaluate(index, QUERIES, QRELS, top=5, query_encoder=splade)


@pytest.fixture(scope="module")
def measured(index, evaluation, splade):
    return failures_faithfulness(index, evaluation, query_encoder=splade, draws=4, curve_k=3)


def _gap_terms(splade, index, text: str, rows: tuple[int, int]) -> np.ndarray:
    """The products ``q_j n_j`` and ``−q_j r_j`` whose sum is s(n) − s(r) for ``text``:
    encoded by the encoder itself (as the evaluation encodes its queries: pooled, no
    per-token rows), gated, multiplied with numpy."""
    q = gate(splade.encode_texts([text], keep_units=False)[0], splade.vocab, 768)
    q = q.astype(np.float64)
    n, r = (index.vector(row).astype(np.float64) for row in rows)
    return np.concatenate([q * n, -q * r])


def _gap(splade, index, text: str, rows: tuple[int, int]):
    """s(n) − s(r) for ``text`` (by numpy), as a float32 model output may equal it."""
    terms = _gap_terms(splade, index, text, rows)
    return close_to(float(terms.sum()), terms=terms)


def _without(text: str, words: list[str]) -> str:
    """The text with these (whole, lower-case) words cut out, by hand."""
    return " ".join(w for w in text.split() if w.lower() not in set(words))


def test_silent_wrong_aopc_of_a_curve_is_the_mean_drop_by_hand():
    # f(x^(0..2)) = 4, 1, -2: drops 0, 3, 6 -> AOPC = 9 / 3 = 3, normalised 3 / 4
    curve = deletion_curve(["a", "b"], [4.0, 1.0, -2.0], [[4.0, 3.0, 2.0], [4.0, 4.0, 0.0]])
    assert curve.aopc == pytest.approx(3.0)
    assert curve.normalized_aopc == pytest.approx(0.75)
    # random mean curve 4, 3.5, 1: drops 0, 0.5, 3 -> 3.5 / 3
    assert curve.random == pytest.approx([4.0, 3.5, 1.0])
    assert curve.random_aopc == pytest.approx(3.5 / 3)
    # insertion from 0: gains 0, 1, 3 -> 4 / 3
    assert insertion_aopc([0.0, 1.0, 3.0]) == pytest.approx(4 / 3)
    assert aopc([2.0]) == 0.0


def test_silent_wrong_comprehensiveness_and_aopc_of_two_failures_by_hand(measured, index, splade):
    """Two failures: the edits made by hand from the query's words, each encoded and scored
    with numpy; comprehensiveness = (g − g') / g and AOPC = 1/(K+1) Σ (g − g_k) / g of the
    gaps reported (each one checked against numpy; the formulas in float64, to rounding)."""
    row_of = {str(i): r for r, i in enumerate(index.column("id"))}
    cases = {f.query_id: f for f in measured.failures}
    assert {"q-cat", "q-stars"} <= set(cases)
    for query_id in ("q-cat", "q-stars"):
        f = cases[query_id]
        rows = (row_of[f.nonrelevant], row_of[f.relevant])
        assert f.gap == _gap(splade, index, f.query, rows)
        assert f.gap_after == _gap(splade, index, _without(f.query, f.words), rows)
        gap, after = f.gap, f.gap_after
        assert f.comprehensiveness == pytest.approx((gap - after) / gap, rel=1e-12)
        assert f.flipped == (after < 0)
        edited = [f.query] + [
            _without(f.query, f.curve.parts[:k]) for k in range(1, len(f.curve.parts) + 1)
        ]
        assert f.curve.explained == [_gap(splade, index, text, rows) for text in edited]
        curve = f.curve.explained
        by_hand = sum((gap - g) / gap for g in curve) / len(curve)
        assert f.curve.normalized_aopc == pytest.approx(by_hand, rel=1e-12)
    # the decisive words' deletion closes the gap (the pair flips) for both
    assert cases["q-cat"].words == ["sleeping"] and cases["q-cat"].flipped


def test_silent_wrong_reported_scores_after_deletion_are_the_encoders_own(measured, index, splade):
    """Every reported gap after an edit — the explanation's and each random order's curve —
    equals encoding the edited text with the encoder directly and scoring it with numpy."""
    row_of = {str(i): r for r, i in enumerate(index.column("id"))}
    for f in measured.failures:
        rows = (row_of[f.nonrelevant], row_of[f.relevant])
        assert f.gap_after == _gap(splade, index, f.edited_query, rows)
        assert f.measured_by == "re-encoding" and f.curve.measured_by == "re-encoding"
        assert len(f.curve.random_curves) == 4  # the seeded draws
        means = np.mean(f.curve.random_curves, axis=0)
        np.testing.assert_allclose(f.curve.random, means, rtol=1e-12)


def test_silent_wrong_random_draws_are_seeded(index, evaluation, splade, measured):
    again = failures_faithfulness(index, evaluation, query_encoder=splade, draws=4, curve_k=3)
    assert [f.curve.random_curves for f in again.failures] == [
        f.curve.random_curves for f in measured.failures
    ]
    other = failures_faithfulness(
        index, evaluation, query_encoder=splade, draws=4, curve_k=3, seed=7
    )
    assert [f.curve.random_curves for f in other.failures] != [
        f.curve.random_curves for f in measured.failures
    ]


def test_data_lost_evaluation_files_carry_the_faithfulness(index, evaluation, splade):
    both = with_faithfulness(evaluation, draws=2, curve_k=2)
    files = both.files()
    assert {"evaluation.json", "faithfulness.csv", "evaluation.html"} <= set(files)
    assert b'"measured_by": "re-encoding"' in files["evaluation.json"]
    assert (
        b"<svg" in files["evaluation.html"] and b"faithfulness-summary" in files["evaluation.html"]
    )
    lines = files["faithfulness.csv"].decode().strip().splitlines()
    assert len(lines) == 1 + len(both.section("faithfulness").failures)
    # the evaluation itself is unchanged
    assert both.to_dict()["metrics"] == evaluation.to_dict()["metrics"]
