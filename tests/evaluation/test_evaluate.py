"""Evaluation of a stored collection: exact batched rankings, ir-measures on the exported
run, failures whose decompositions sum to the scores, blame, and another system's run."""

from __future__ import annotations

import numpy as np
import pytest

from lexlens.analysis.collections.indexing import build_index
from lexlens.analysis.collections.store import open_index
from lexlens.analysis.core.gating import gate
from lexlens.analysis.datasets.trec import Problems, read_qrels, read_run, run_text
from lexlens.analysis.evaluation.evaluate import evaluate
from lexlens.analysis.evaluation.result import MEASURES
from lexlens.analysis.retrieval.scorer import scorer_for

TEXTS = {
    "d0": "a puppy sleeping by the sea shore",
    "d1": "two dogs running on the beach",
    "d2": "a cup of hot coffee on a wooden table",
    "d3": "espresso poured into a small white cup",
    "d4": "a rocket launching into the night sky",
    "d5": "astronaut floating in space near the station",
    "d6": "a cat sleeping on a pile of books",
    "d7": "a kitten playing with a ball of wool",
    "d8": "fresh bread in a bakery window",
    "d9": "a giraffe eating leaves from a tall tree",
}
QUERIES = {
    "q-dog": "dog on the beach",
    "q-coffee": "a cup of espresso",
    "q-space": "rocket in space",
    "q-cat": "a sleeping kitten",
    "q-giraffe": "giraffe",
    "q-none": "something nobody judged",
}
QRELS = {
    "q-dog": {"d1": 1, "d0": 1},
    "q-coffee": {"d3": 1, "d2": 1},
    "q-space": {"d4": 1, "d5": 1},
    "q-cat": {"d7": 1},
    "q-giraffe": {"d9": 1},
}


@pytest.fixture(scope="module", params=[False, True], ids=["transpose", "stored-postings"])
def index(request, tmp_path_factory, splade):
    """The collection, searched through an exact transpose, or through the float16 postings
    a large index stores (forced here on a small one)."""
    folder = tmp_path_factory.mktemp("bench")
    source = folder / "items.csv"
    source.write_text("id,text\n" + "".join(f"{i},{t}\n" for i, t in TEXTS.items()))
    build_index(splade, source, folder / "ix", postings=request.param)
    index = open_index(folder / "ix")
    assert (index.postings is not None) == request.param
    return index


@pytest.fixture(scope="module")
def result(index, splade):
    return evaluate(index, QUERIES, QRELS, top=5, query_encoder=splade)


def test_batched_rankings_are_the_exact_per_query_rankings(index, splade):
    vectors = [gate(e, splade.vocab, 768) for e in splade.encode_texts(list(QUERIES.values()))]
    dense = np.stack([index.vector(r) for r in range(len(index))]).astype(np.float64)
    for q, ranking in zip(vectors, scorer_for(index).rank(vectors, 4), strict=True):
        rows, scores = scorer_for(index).top(q, 4)
        assert ranking.rows.tolist() == rows.tolist()
        np.testing.assert_array_equal(ranking.scores, scores)
        exact = dense @ q.astype(np.float64)  # the reference: every item, in float64
        order = np.lexsort((np.arange(len(index)), -exact))
        assert ranking.rows.tolist() == order[: ranking.rows.size].tolist()
        np.testing.assert_allclose(ranking.scores, exact[ranking.rows], rtol=1e-12)


def test_the_rank_of_any_item_is_its_place_in_the_full_ranking(index, splade):
    """An item scoring above 0 has its place in the full exact ranking (ties by row); one
    scoring 0 shares no term with the query: not retrieved (rank None), never "rank 9"."""
    vectors = [gate(e, splade.vocab, 768) for e in splade.encode_texts(list(QUERIES.values()))]
    dense = np.stack([index.vector(r) for r in range(len(index))]).astype(np.float64)
    scorer = scorer_for(index)
    unretrieved = 0
    for q, ranking in zip(vectors, scorer.rank(vectors, 2), strict=True):
        exact = dense @ q.astype(np.float64)
        full = [int(r) for r in np.lexsort((np.arange(len(index)), -exact)) if exact[r] > 0]
        for row in range(len(index)):
            rank, score = scorer.rank_of(q, row, ranking)
            assert rank == (full.index(row) + 1 if exact[row] > 0 else None)
            assert scorer.rank_of(q, row)[0] == rank  # without the ranking, the same
            unretrieved += rank is None
            assert score == pytest.approx(exact[row], rel=1e-6, abs=1e-9)
    assert unretrieved  # the case is exercised


def test_metrics_equal_ir_measures_on_the_exported_run(result, tmp_path):
    import ir_measures

    files = result.files()
    (tmp_path / "run.trec").write_bytes(files["run.trec"])
    run = list(ir_measures.read_trec_run(str(tmp_path / "run.trec")))
    qrels = [ir_measures.Qrel(q, d, r) for q, docs in QRELS.items() for d, r in docs.items()]
    measures = [ir_measures.parse_measure(m) for m in MEASURES]
    again = ir_measures.calc_aggregate(measures, qrels, run)
    for name, measure in zip(MEASURES, measures, strict=True):
        assert result.metrics["aggregate"][name] == pytest.approx(again[measure], abs=1e-9)
    assert {q["id"] for q in result.metrics["per_query"]} == set(QRELS)
    assert any("no judgement (q-none)" in n for n in result.notes)


def test_every_failure_is_explained_and_sums_to_the_scores(result, index, splade):
    per_query = {q["id"]: q for q in result.metrics["per_query"]}
    failing = {q for q, v in per_query.items() if v["first_relevant_rank"] != 1}
    assert {f.query_id for f in result.failures} == failing and failing
    for f in result.failures:
        for item in (f.nonrelevant, f.relevant):
            total = sum(c["contribution"] for c in item.contributions) + item.other_contribution
            assert total == pytest.approx(item.score, abs=1e-9)
            assert item.relevant == (item.id in QRELS[f.query_id])
        assert f.gap == pytest.approx(f.nonrelevant.score - f.relevant.score)
        deltas = [d["delta"] for d in f.decisive]
        assert deltas == sorted(deltas, reverse=True)
        assert sum(deltas) >= f.gap - 1e-12  # they make up the gap…
        assert sum(deltas[:-1]) < f.gap  # …and no fewer would
        # The relevant item's rank is its place in the full exact ranking.
        q = gate(splade.encode_texts([f.query])[0], splade.vocab, 768)
        rows, _ = scorer_for(index).top(q, len(index))
        ids = [str(i) for i in index.column("id")]
        ranked = [ids[r] for r in rows]
        if f.relevant.id in ranked:
            assert f.relevant.rank == ranked.index(f.relevant.id) + 1


def test_blame_counts_the_failures_behind_each_word(result):
    pushed = {}
    for f in result.failures:
        for d in f.decisive:
            pushed.setdefault(d["word"], []).append(f.query_id)
    for b in result.blame:
        assert b["pushed_queries"] == pushed.get(b["word"], [])
        assert b["pushed"] == len(b["pushed_queries"]) and b["mismatch"] == len(
            b["mismatch_queries"]
        )


def test_another_systems_run_is_explained_and_its_unknown_items_named(index, splade, tmp_path):
    run = {"q-dog": [("d2", 9.0), ("ghost", 8.0), ("d1", 7.0)], "q-cat": [("d7", 3.0)]}
    path = tmp_path / "other.trec"
    path.write_text(run_text(run, tag="bm25") + "q-cat Q0 d6 2 not-a-number bm25\nbad line\n")
    problems = Problems()
    read = read_run(path, problems)
    assert read == run and problems.count == 2
    assert all(str(path) in line for line in problems.lines)
    qrels = {q: QRELS[q] for q in run}
    r = evaluate(index, {q: QUERIES[q] for q in run}, qrels, run=read, query_encoder=splade)
    assert r.missing == {"count": 1, "items": ["ghost"]}
    dog = next(f for f in r.failures if f.query_id == "q-dog")
    assert dog.nonrelevant.id == "d2" and dog.nonrelevant.rank == 1
    assert dog.relevant.id == "d1" and dog.relevant.rank == 3
    assert r.metrics["aggregate"]["RR@10"] == pytest.approx((1 / 3 + 1) / 2)


@pytest.mark.parametrize(
    "text, problem, line",
    [
        ("q1 d1\n", "2 fields", 2),
        ("q1 0 d1 yes\n", "not a whole number", 2),
        ("q1 0 d1 1\nq1 0 d1 0\n", "judged twice", 3),
    ],
)
def test_malformed_qrels_lines_are_named_and_the_rest_kept(tmp_path, text, problem, line):
    path = tmp_path / "q.qrels"
    path.write_text("q0 0 d0 1\n" + text)
    problems = Problems()
    assert read_qrels(path, problems)["q0"] == {"d0": 1}
    assert problems.count == 1 and problem in problems.lines[0]
    assert problems.lines[0].startswith(f"{path}:{line}: ")
