"""Faithfulness without degenerate cases: "flipped" means the relevant item strictly ahead; a
deletion that empties the query (both items score 0) or leaves a tie is counted apart and
named; the notes say how many failures each point of the deletion curve rests on.

References: the flags and rates recounted by hand from each failure's gap after deletion and
its words; a summary of hand-made rows whose flips, ties and emptied queries are known."""

from __future__ import annotations

import pytest

from lexlens.analysis.collections.indexing import build_index
from lexlens.analysis.collections.store import open_index
from lexlens.analysis.core.curves import deletion_curve
from lexlens.analysis.evaluation.evaluate import evaluate
from lexlens.analysis.faithfulness.benchmark import (
    failures_faithfulness,
    summarize,
    summary_notes,
)
from lexlens.analysis.faithfulness.failures import EMPTIED, TIED, FailureFaithfulness

TEXTS = {
    "d0": "a dog sleeping on the sofa in the living room",
    "d1": "a cat playing with wool in the garden",
    "d2": "hot coffee in a red cup on the table",
    "d3": "a glass of cold orange juice",
    "d4": "a rocket launching into the night sky",
    "d5": "a telescope pointed at the moon and the stars",
    "d6": "sleeping dog",
}
#: Two-word queries whose rival holds both words: deleting the explanation may empty them.
QUERIES = {
    "q-dog": "sleeping dog",
    "q-cat": "cat sleeping on the sofa",
    "q-sky": "night sky",
    "q-cup": "red cup",
}
QRELS = {"q-dog": {"d1": 1}, "q-cat": {"d1": 1}, "q-sky": {"d5": 1}, "q-cup": {"d3": 1}}


@pytest.fixture(scope="module")
def measured(tmp_path_factory, splade):
    folder = tmp_path_factory.mktemp("degenerate")
    source = folder / "items.csv"
    source.write_text("id,text\n" + "".join(f"{i},{t}\n" for i, t in TEXTS.items()))
    build_index(splade, source, folder / "ix")
    index = open_index(folder / "ix")
    evaluation = evaluate(index, QUERIES, QRELS, top=5, query_encoder=splade)
    return failures_faithfulness(index, evaluation, query_encoder=splade, draws=3, curve_k=3)


def test_silent_wrong_flips_ties_and_emptied_queries_by_hand(measured):
    rows = measured.failures
    assert rows
    for r in rows:
        emptied = set(r.words) >= set(r.query.split()) or not r.edited_query.strip()
        assert r.flipped == (r.gap_after < 0)
        expected = EMPTIED if emptied else (TIED if r.gap_after == 0 else "")
        assert r.degenerate == expected, r.query_id
        if emptied:
            assert r.gap_after == 0 and not r.flipped  # both score 0: a tie, not a flip
    assert any(r.degenerate == EMPTIED for r in rows)  # the case this test is about
    s = measured.summary
    kept = [r for r in rows if not r.degenerate]
    assert s.flip_failures == len(kept)
    assert s.flip_rate == (sum(r.flipped for r in kept) / len(kept) if kept else None)
    assert s.failures == sum(r.degenerate != EMPTIED for r in rows)  # the numbers' base
    assert s.excluded == {
        why: sum(r.degenerate == why for r in rows)
        for why in (EMPTIED, TIED)
        if any(r.degenerate == why for r in rows)
    }
    assert any(
        n.startswith(f"{s.excluded[EMPTIED]} failure") and EMPTIED in n for n in measured.notes
    )
    assert any(
        n.startswith("Failures behind each point of the deletion curve: k=0: ")
        for n in measured.notes
    )


def _row(name: str, gap_after: float, degenerate: str, curve: list[float]) -> FailureFaithfulness:
    """A hand-made measured failure: gap 1, the gap after deletion and its curve."""
    return FailureFaithfulness(
        query_id=name,
        query="two words",
        nonrelevant="n",
        relevant="r",
        gap=1.0,
        words=["two"],
        sources=[],
        edited_query="words",
        gap_after=gap_after,
        comprehensiveness=1.0 - gap_after,
        flipped=gap_after < 0,
        random_comprehensiveness=0.0,
        random_flip_rate=0.0,
        curve=deletion_curve(["two", "words"][: len(curve) - 1], curve, []),
        degenerate=degenerate,
    )


def test_silent_wrong_degenerate_cases_are_not_evidence():
    """Two flips, one miss, one tie, two emptied queries: the flip rate is 2 of 3 (not 2 of
    6, nor 4 of 6 as a rule counting ties as flips would say); the comprehensiveness median
    leaves the emptied queries out; each curve point's count is stated."""
    rows = [
        _row("a", -0.5, "", [1.0, 0.5, -0.5]),
        _row("b", -0.2, "", [1.0, -0.2]),
        _row("c", 0.4, "", [1.0, 0.4]),
        _row("d", 0.0, TIED, [1.0, 0.0]),
        _row("e", 0.0, EMPTIED, [1.0, 0.0, 0.0]),
        _row("f", 0.0, EMPTIED, [1.0, 0.0, 0.0]),
    ]
    s = summarize(rows, {}, 0, 0.0)
    assert s.flip_rate == pytest.approx(2 / 3) and s.flip_failures == 3
    assert s.excluded == {TIED: 1, EMPTIED: 2} and s.failures == 4
    assert s.comprehensiveness == pytest.approx(1.1)  # median of 1.5, 1.2, 0.6, 1.0 (not 1.0)
    assert s.curve_counts == [4, 4, 1]  # k=0, 1: a–d; k=2: a only (e, f left out)
    notes = summary_notes(s)
    assert any(n.startswith("2 failures counted apart: " + EMPTIED) for n in notes)
    assert any(n.startswith("1 failure counted apart: " + TIED) and "rest on 3" in n for n in notes)
    assert "k=0: 4, k=1: 4, k=2: 1" in notes[-1]
