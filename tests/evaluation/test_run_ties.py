"""An outside run is scored as trec_eval scores it: its tied scores ordered as trec_eval orders
them (score as a C float, then item id descending) unless ``ties`` is as-listed, which keeps
the file's order; the notes say which rule and how many queries had ties.

References: ir-measures (pytrec_eval, trec_eval's code) on the very run file; the as-listed
numbers from ir-measures on explicit strictly decreasing scores in the file's order; the tie
count by hand."""

from __future__ import annotations

import random

import numpy as np
import pytest

from lexlens.analysis.collections.indexing import index_collection
from lexlens.analysis.collections.store import open_index
from lexlens.analysis.core.metrics import trec_eval_order
from lexlens.analysis.evaluation.evaluate import evaluate_benchmark
from lexlens.analysis.evaluation.result import MEASURES
from tests.datasets.files import beir_of_tables

WORDS = [
    "apple",
    "river",
    "stone",
    "cloud",
    "paper",
    "violin",
    "rocket",
    "garden",
    "winter",
    "copper",
    "glass",
    "honey",
]
#: Item ids whose string order is not their number's (d10 < d9) and mixed case (D < d).
IDS = [f"d{i}" for i in range(40)] + [f"D{i}" for i in range(10)] + ["x-a", "x-b"]


@pytest.fixture(scope="module")
def bench(tmp_path_factory, splade):
    """A collection of 52 items, 30 queries, graded judgements, and a run with many ties
    (scores of a few values, and pairs equal only as C floats)."""
    rng = random.Random(11)
    folder = tmp_path_factory.mktemp("ties")
    corpus = {i: " ".join(rng.sample(WORDS, 4)) for i in IDS}
    queries = {f"q{n}": " ".join(rng.sample(WORDS, 2)) for n in range(30)}
    qrels = {q: {d: rng.randint(0, 3) for d in rng.sample(IDS, 6)} for q in queries}
    qrels["q0"] = dict.fromkeys(rng.sample(IDS, 3), 0)  # nothing relevant: counts 0
    beir_of_tables(folder / "beir", corpus, queries, qrels)
    index_collection(splade, folder / "beir", folder / "ix")
    lines = []
    for q in queries:
        if q == "q29":
            continue  # the run lists nothing for q29: 0 everywhere
        docs = rng.sample(IDS, 30)
        for k, d in enumerate(docs):
            score = float(rng.randint(0, 3)) if q != "q28" else 30.0 - k  # q28: no tie
            if k % 7 == 3:
                score += 1e-9  # a different double, the same C float
            lines.append(f"{q} Q0 {d} {k + 1} {score!r} bm25")
    (folder / "run.trec").write_text("\n".join(lines) + "\n")
    return folder, queries, qrels


def _file_rankings(path) -> dict[str, list[tuple[str, float]]]:
    """The run's items per query in the file's order, ranked by score (ties as listed)."""
    rows: dict[str, list[tuple[str, float]]] = {}
    for line in path.read_text().splitlines():
        q, _, d, _, s, _ = line.split()
        rows.setdefault(q, []).append((d, float(s)))
    return {q: sorted(pairs, key=lambda p: -p[1]) for q, pairs in rows.items()}


def _reference(qrels, run) -> dict[str, dict[str, float]]:
    """ir-measures' per-query values of the seven measures (0 for a query it omits), each
    from trec_eval's code (pytrec_eval). RR@10 is pytrec_eval's RR (``recip_rank``) when it
    is at least 1/10, else 0: ir-measures hands RR@10 to its MS MARCO provider, which orders
    tied scores by item id *ascending* — not trec_eval's order."""
    import ir_measures

    parsed = {m: ir_measures.parse_measure(m) for m in MEASURES if m != "RR@10"}
    parsed["RR@10"] = ir_measures.RR
    by_name = {str(v): k for k, v in parsed.items()}
    gains = {q: {d: max(0, r) for d, r in j.items()} for q, j in qrels.items()}
    out = {q: dict.fromkeys(MEASURES, 0.0) for q in qrels}
    for value in ir_measures.iter_calc(list(parsed.values()), gains, run):
        out[value.query_id][by_name[str(value.measure)]] = value.value
    for values in out.values():
        values["RR@10"] = values["RR@10"] if values["RR@10"] >= 0.1 else 0.0
    return out


def _check(result, reference) -> None:
    """Every measure of every query, and the means, equal the reference."""
    table = {row["id"]: row for row in result.metrics["per_query"]}
    assert set(table) == set(reference)
    for name in MEASURES:
        for q, values in reference.items():
            assert table[q][name] == pytest.approx(values[name], abs=1e-12), (q, name)
        mean = sum(v[name] for v in reference.values()) / len(reference)
        assert result.metrics["aggregate"][name] == pytest.approx(mean, abs=1e-12)


def test_silent_wrong_a_runs_measures_equal_trec_evals_on_the_same_file(bench, splade):
    import ir_measures

    folder, queries, qrels = bench
    path = folder / "run.trec"
    result = evaluate_benchmark(open_index(folder / "ix"), run=path, query_encoder=splade)
    reference = _reference(qrels, list(ir_measures.read_trec_run(str(path))))
    _check(result, reference)
    listed = _reference(
        qrels,
        {
            q: {d: float(100 - k) for k, (d, _) in enumerate(pairs)}
            for q, pairs in _file_rankings(path).items()
        },
    )
    differ = [q for q in qrels if listed[q]["nDCG@10"] != reference[q]["nDCG@10"]]
    assert len(differ) >= 5  # the rule matters on this run: the file's order gives others
    tied = sum(
        1
        for q, pairs in _file_rankings(path).items()
        if len({np.float32(s) for _, s in pairs}) < len(pairs)
    )
    assert tied == 28  # every query listed but q28 (q29 lists nothing)
    assert any(
        n.startswith(f"{tied} of the {len(qrels)} queries evaluated have tied scores")
        and "as trec_eval orders them" in n
        for n in result.notes
    )
    assert result.settings["ties"] == "trec_eval"
    (folder / "again.trec").write_bytes(result.files()["run.trec"])  # trec_eval reads it so
    again = _reference(qrels, list(ir_measures.read_trec_run(str(folder / "again.trec"))))
    for q in qrels:
        assert again[q] == pytest.approx(reference[q], abs=1e-12)


def test_ties_as_listed_keeps_the_files_order(bench, splade):
    folder, queries, qrels = bench
    path = folder / "run.trec"
    result = evaluate_benchmark(
        open_index(folder / "ix"), run=path, query_encoder=splade, ties="as-listed"
    )
    explicit = {
        q: {d: float(100 - k) for k, (d, _) in enumerate(pairs)}
        for q, pairs in _file_rankings(path).items()
    }
    _check(result, _reference(qrels, explicit))
    assert any("kept in the order the run lists them" in n for n in result.notes)


def test_a_run_without_ties_says_so_and_is_unchanged(bench, splade):
    import ir_measures

    folder, queries, qrels = bench
    path = folder / "single.trec"
    path.write_text("".join(f"q3 Q0 {d} {k} {50 - k}.5 x\n" for k, d in enumerate(IDS[:20])))
    ix = open_index(folder / "ix")
    default = evaluate_benchmark(ix, run=path, query_encoder=splade)
    listed = evaluate_benchmark(ix, run=path, query_encoder=splade, ties="as-listed")
    assert default.metrics == listed.metrics
    _check(default, _reference(qrels, list(ir_measures.read_trec_run(str(path)))))
    assert any(n.startswith("ties in the run: none among the 30") for n in default.notes)


def test_silent_wrong_trec_eval_order_is_pytrec_evals_order():
    """Thousands of random rankings with ties, C-float ties and ids of every shape: RR and
    nDCG of pytrec_eval on the raw scores equal pytrec_eval on explicit strictly decreasing
    scores in :func:`trec_eval_order`'s order."""
    import pytrec_eval

    rng = random.Random(5)
    alphabet = ["d1", "d10", "d9", "D9", "a", "Z", "é", "z-1", "10", "9", "d01", "_x"]
    run, qrels = {}, {}
    for i in range(2000):
        q = f"q{i}"
        docs = rng.sample(alphabet, 8) + [f"n{rng.randint(0, 99)}x{k}" for k in range(4)]
        scores = [rng.choice([1.0, 2.0, 1.0 + 1e-9, 2.0 - 1e-10, 1.0 + 1e-6, -3.0]) for _ in docs]
        run[q] = dict(zip(docs, scores, strict=True))
        qrels[q] = {d: rng.randint(0, 2) for d in rng.sample(docs, 3)}
    ordered = {q: trec_eval_order(list(pairs.items())) for q, pairs in run.items()}
    for pairs in ordered.values():
        assert all(a[1] >= b[1] for a, b in zip(pairs, pairs[1:], strict=False))
    explicit = {q: {d: float(100 - k) for k, (d, _) in enumerate(p)} for q, p in ordered.items()}
    asked = {"recip_rank", "ndcg"}
    raw = pytrec_eval.RelevanceEvaluator(qrels, asked).evaluate(run)
    ours = pytrec_eval.RelevanceEvaluator(qrels, asked).evaluate(explicit)
    listed = {
        q: {d: float(100 - k) for k, (d, _) in enumerate(sorted(p.items(), key=lambda x: -x[1]))}
        for q, p in run.items()
    }
    as_listed = pytrec_eval.RelevanceEvaluator(qrels, asked).evaluate(listed)
    assert sum(as_listed[q]["ndcg"] != raw[q]["ndcg"] for q in run) > 200  # ties bite
    for q in run:
        for m in asked:
            assert ours[q][m] == raw[q][m], (q, m, run[q])
