"""A counterfactual's rank before its edit is the evaluation's rank of that item because both
are one call, ``scorer_for(collection).rank_of``, on the collection's one scorer: the calls
are recorded on that object, and a fault put into it shows up in both results."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from lexlens.analysis.collections.indexing import build_index
from lexlens.analysis.collections.store import open_index
from lexlens.analysis.counterfactual.evaluation import failures_counterfactuals
from lexlens.analysis.counterfactual.options import CounterfactualOptions
from lexlens.analysis.evaluation.evaluate import evaluate_benchmark
from lexlens.analysis.retrieval.queries import QuerySpec
from lexlens.analysis.retrieval.scorer import scorer_for

ROOT = Path(__file__).resolve().parents[2]
BEIR = ROOT / "data" / "benchmarks" / "imagenet_beir"
#: The depth evaluated: small, so that some relevant items rank beyond it.
TOP = 5
#: A budget that keeps each counterfactual short (its rank before is what is checked).
OPTIONS = CounterfactualOptions.of(max_calls=2, max_edits=1)


@pytest.fixture(scope="module")
def index(tmp_path_factory, splade):
    """The packaged BEIR sample (223 items, 60 queries) indexed with splade-tiny."""
    folder = tmp_path_factory.mktemp("same-rank")
    build_index(splade, BEIR, folder / "ix")
    return open_index(folder / "ix")


def _recorded(scorer, monkeypatch, shift: int = 0) -> list[tuple[int, int | None]]:
    """Record every ``rank_of`` asked of ``scorer`` as (row, rank), calling through; with
    ``shift``, every rank it gives is moved by that much (a fault put into the scorer)."""
    calls: list[tuple[int, int | None]] = []
    rank_of = scorer.rank_of

    def recording(q, row, ranking=None):
        rank, score = rank_of(q, row, ranking)
        if shift and rank is not None:
            rank += shift
        calls.append((int(row), rank))
        return rank, score

    monkeypatch.setattr(scorer, "rank_of", recording)
    return calls


def _ranked_failures(evaluation, count: int = 4) -> list:
    """Failures whose relevant item the collection holds and ranks: some within the top
    evaluated, some beyond it."""
    ranked = [f for f in evaluation.failures if f.relevant is not None and f.relevant.rank]
    within = [f for f in ranked if f.relevant.rank <= TOP][: count // 2]
    beyond = [f for f in ranked if f.relevant.rank > TOP][: count // 2]
    assert within and beyond  # both ways an evaluation ranks an item are exercised
    return within + beyond


def test_counterfactual_rank_before_is_the_evaluations_rank_of_call(index, splade, monkeypatch):
    scorer = scorer_for(index)
    assert scorer_for(index) is scorer  # one scorer per collection
    calls = _recorded(scorer, monkeypatch)
    evaluation = evaluate_benchmark(index, query_encoder=splade, top=TOP)
    by_evaluation = list(calls)
    failures = _ranked_failures(evaluation)
    row_of = {str(item): r for r, item in enumerate(index.column("id"))}
    for f in failures:
        assert (row_of[f.relevant.id], f.relevant.rank) in by_evaluation
    calls.clear()
    found = failures_counterfactuals(
        index, replace(evaluation, failures=failures), query_encoder=splade, options=OPTIONS
    )
    assert [r.target for r in found.failures] == [f.relevant.id for f in failures]
    spec = QuerySpec(splade, evaluation.settings["query_mode"], evaluation.settings["gate_k"])
    for f, answer in zip(failures, found.failures, strict=True):
        row = row_of[f.relevant.id]
        assert answer.text.rank_before == answer.terms.rank_before == f.relevant.rank
        assert (row, f.relevant.rank) in calls  # asked of the same object, for the same row
        # another row of the same query is another rank: the item ranked first is first
        q, _ = spec.encode_with_units(f.query)
        assert scorer.rank_of(q, row)[0] == f.relevant.rank
        assert scorer.rank_of(q, row_of[f.nonrelevant.id])[0] == 1 != f.relevant.rank


def test_a_fault_in_the_scorer_moves_both_ranks_alike(index, splade, monkeypatch):
    """Were the counterfactual's rank before computed anywhere else, a fault put into the
    scorer's ``rank_of`` would move the evaluation's rank and leave the counterfactual's."""
    shift = 1000
    _recorded(scorer_for(index), monkeypatch, shift)
    evaluation = evaluate_benchmark(index, query_encoder=splade, top=TOP)
    failures = [f for f in evaluation.failures if f.relevant is not None and f.relevant.rank]
    failures = failures[:3]
    assert failures and all(f.relevant.rank > shift for f in failures)
    found = failures_counterfactuals(
        index, replace(evaluation, failures=failures), query_encoder=splade, options=OPTIONS
    )
    for f, answer in zip(failures, found.failures, strict=True):
        assert answer.text.rank_before == answer.terms.rank_before == f.relevant.rank
