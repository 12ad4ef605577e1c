"""No silent wrong number in ``lexlens evaluate``: the aggregate is the per-query table's mean,
queries left out are named, ties have one order for every measure and for run.trec, an item
scoring 0 is not retrieved, relevance is a whole number (negatives are not relevant), runs
come as lists or pytrec_eval mappings and NaN scores are refused by name.

Every reference is computed independently: the exact ranking from the index's dense vectors
(float64, ties by row, items scoring above 0), ir-measures and pytrec_eval called directly on
hand-built runs with explicit strictly decreasing scores, and values by hand."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest

from lexlens.analysis.collections.indexing import index_collection
from lexlens.analysis.collections.store import open_index
from lexlens.analysis.core.gating import DEFAULT_GATE_K, gate
from lexlens.analysis.core.metrics import measure as lexlens_measure
from lexlens.analysis.core.metrics import ranked_run
from lexlens.analysis.datasets.trec import Problems, read_qrels, read_run, run_text
from lexlens.analysis.evaluation.evaluate import evaluate, evaluate_benchmark
from lexlens.analysis.evaluation.failures import NONE_RELEVANT, NOT_RETRIEVED, RETRIEVED
from lexlens.analysis.evaluation.result import MEASURES, PER_QUERY_COLUMNS, worst_first
from lexlens.models.base import InputError
from tests.datasets.files import beir_of_tables
from tests.helpers import one_line_error

#: Row order matters: d-apple-a (row 8) and d-apple-z (row 9) have the same text, so they
#: tie for "apple pie"; Lexlens ranks the lower row first, trec_eval the larger docid.
CORPUS = {
    "d-bread": "fresh bread in a bakery window",
    "d-rocket": "a rocket launching into the night sky",
    "d-xyl": "xylophone",
    "d-chess": "chess opening gambit",
    "d-qcd": "quantum chromodynamics lecture notes",
    "d-tax": "tax return deadline",
    "d-violin": "violin concerto",
    "d-glacier": "glacier melting",
    "d-apple-a": "red apple pie with cinnamon",
    "d-apple-z": "red apple pie with cinnamon",
}
QUERIES = {
    "q2": "apple pie",  # its relevant item ties with a non-relevant one
    "q10": "zebra stripes",  # its relevant item (d-bread) shares no term: scores 0
    "q102": "rocket in space",  # found first
    "q7": "volcano eruption",  # judged, nothing relevant
    "q3": "kiwi",  # not judged
}
QRELS = {
    "q2": {"d-apple-a": 1, "d-apple-z": 0},
    "q10": {"d-bread": 2},
    "q102": {"d-rocket": 1},
    "q7": {"d-glacier": 0},
    "q50": {"d-apple-z": 1},  # judged, not among the queries (the index does not keep it)
}
ORDERED = ["q2", "q10", "q102", "q7"]  # the queries evaluated, in the order given


def _measures():
    import ir_measures

    return [ir_measures.parse_measure(m) for m in MEASURES]


@pytest.fixture(scope="module")
def bench(tmp_path_factory, splade):
    """A BEIR folder (corpus, queries, qrels/test.tsv) indexed with splade-tiny."""
    folder = tmp_path_factory.mktemp("trust")
    beir = folder / "beir"
    beir_of_tables(beir, CORPUS, QUERIES, QRELS)
    index_collection(splade, beir, folder / "ix")
    return folder


@pytest.fixture(scope="module")
def index(bench):
    return open_index(bench / "ix")


@pytest.fixture(scope="module")
def exact(index, splade):
    """Each query's exact ranking by hand: dense float64 scores, items above 0, ties by row."""
    ids = [str(i) for i in index.column("id")]
    dense = np.stack([index.vector(r) for r in range(len(index))]).astype(np.float64)
    out = {}
    for q, text in QUERIES.items():
        vector = gate(splade.encode_texts([text])[0], splade.vocab, DEFAULT_GATE_K)
        scores = dense @ vector.astype(np.float64)
        order = np.lexsort((np.arange(len(ids)), -scores))
        out[q] = [(ids[r], float(scores[r])) for r in order if scores[r] > 0]
    return out


@pytest.fixture(scope="module")
def result(index, splade):
    """The collection on the queries and judgements it keeps."""
    return evaluate_benchmark(index, top=10, query_encoder=splade)


def _by_hand_run(exact, queries):
    """ir-measures' run from the hand-made rankings: explicit strictly decreasing scores."""
    return {q: {d: float(100 - i) for i, (d, _) in enumerate(exact[q])} for q in queries}


def test_silent_wrong_aggregate_counts_only_the_queries_given(index, splade, exact, bench):
    import ir_measures

    given = bench / "given.jsonl"
    given.write_text(
        "".join(json.dumps({"_id": q, "text": QUERIES[q]}) + "\n" for q in ("q2", "q10"))
    )
    qrels = bench / "beir" / "qrels" / "test.tsv"  # q50 too (the index keeps none for it)
    r = evaluate_benchmark(index, queries=given, qrels=qrels, top=10, query_encoder=splade)
    table = r.metrics["per_query"]
    assert [q["id"] for q in table] == ["q2", "q10"]
    reference = ir_measures.calc_aggregate(
        _measures(), {q: QRELS[q] for q in ("q2", "q10")}, _by_hand_run(exact, ("q2", "q10"))
    )
    for name, measure in zip(MEASURES, _measures(), strict=True):
        mean = sum(q[name] for q in table) / len(table)
        assert r.metrics["aggregate"][name] == pytest.approx(mean, abs=1e-12)
        assert r.metrics["aggregate"][name] == pytest.approx(reference[measure], abs=1e-12)
    # q2's relevant item is first (RR 1), q10's is not retrieved (RR 0): the mean is 0.5,
    # not 1/5 (q102, q7, q50 counted as 0 beside them).
    assert r.metrics["aggregate"]["RR@10"] == pytest.approx(0.5)
    left_out = next(n for n in r.notes if "not among the queries given" in n)
    assert "3 judged queries" in left_out and all(q in left_out for q in ("q102", "q7", "q50"))


def test_silent_wrong_queries_without_a_relevant_item_count_as_trec_eval_counts_them(result, exact):
    import pytrec_eval

    table = {q["id"]: q for q in result.metrics["per_query"]}
    assert list(table) == ORDERED  # q3 (unjudged) and q50 (not given) left out
    assert table["q7"]["relevant_status"] == NONE_RELEVANT and table["q7"]["relevant"] == 0
    assert all(table["q7"][m] == 0.0 for m in MEASURES)
    assert "q7" not in {f.query_id for f in result.failures}
    qrels = {q: QRELS[q] for q in ORDERED}
    names = {
        "nDCG@10": "ndcg_cut_10",
        "R@1": "recall_1",
        "R@5": "recall_5",
        "R@100": "recall_100",
        "AP@100": "map_cut_100",
    }
    values = pytrec_eval.RelevanceEvaluator(qrels, set(names.values()) | {"num_q"}).evaluate(
        _by_hand_run(exact, ORDERED)
    )
    assert set(values) == set(ORDERED)  # trec_eval evaluates q7 too (every value 0)
    for ours, theirs in names.items():
        for q in ORDERED:
            assert table[q][ours] == pytest.approx(values[q][theirs], abs=1e-12)
        mean = sum(values[q][theirs] for q in ORDERED) / len(ORDERED)
        assert result.metrics["aggregate"][ours] == pytest.approx(mean, abs=1e-12)
    notes = " | ".join(result.notes)
    assert "no relevant item (q7)" in notes and "as trec_eval and ir-measures count them" in notes
    assert "no judgement (q3)" in notes


def test_silent_wrong_tied_items_have_one_order_for_every_measure_and_run_trec(
    result, exact, tmp_path
):
    import ir_measures

    assert exact["q2"][0][1] == exact["q2"][1][1]  # the tie is real
    assert [d for d, _ in exact["q2"][:2]] == ["d-apple-a", "d-apple-z"]  # by row
    q2 = next(q for q in result.metrics["per_query"] if q["id"] == "q2")
    assert q2["first_relevant_rank"] == 1 and q2["RR@10"] == 1.0 and q2["R@1"] == 1.0
    assert [d for d, _ in result.run["q2"]] == [d for d, _ in exact["q2"]]
    # Raw tied scores: ir-measures computes R@1 with pytrec_eval (trec_eval: ties by docid,
    # descending: d-apple-z first) and RR@10 with its msmarco provider (d-apple-a first), so
    # one ranking gets two orders.
    raw = {"q2": dict(exact["q2"])}
    split = ir_measures.calc_aggregate(
        [ir_measures.R @ 1, ir_measures.RR @ 10], {"q2": QRELS["q2"]}, raw
    )
    assert (split[ir_measures.R @ 1], split[ir_measures.RR @ 10]) == (0.0, 1.0)
    # run.trec: scores strictly decreasing, and trec_eval on it gives the measures shown.
    text = result.files()["run.trec"].decode()
    scores: dict[str, list[float]] = {}
    for line in text.splitlines():
        q, _, _, _, score, _ = line.split()
        scores.setdefault(q, []).append(float(score))
    assert all(a > b for s in scores.values() for a, b in zip(s, s[1:], strict=False))
    for q, pairs in result.run.items():  # a few float32 units in the last place away at most
        for (_, shown), written in zip(pairs, scores[q], strict=True):
            assert written == pytest.approx(shown, rel=1e-6)
    (tmp_path / "run.trec").write_text(text)
    again = ir_measures.calc_aggregate(
        _measures(),
        {q: QRELS[q] for q in ORDERED},
        list(ir_measures.read_trec_run(str(tmp_path / "run.trec"))),
    )
    for name, measure in zip(MEASURES, _measures(), strict=True):
        assert result.metrics["aggregate"][name] == pytest.approx(again[measure], abs=1e-12)
    assert any("tied scores" in n and "q2" in n and "collection order" in n for n in result.notes)


def test_silent_wrong_a_runs_tied_items_keep_the_files_order_as_listed(index, splade, tmp_path):
    import ir_measures

    path = tmp_path / "other.trec"
    path.write_text(
        "q2 Q0 d-apple-a 1 5.0 bm25\nq2 Q0 d-apple-z 2 5.0 bm25\nq2 Q0 d-bread 3 1.0 bm25\n"
    )
    default = evaluate_benchmark(index, run=path, top=10, query_encoder=splade)
    q2 = next(q for q in default.metrics["per_query"] if q["id"] == "q2")
    assert q2["first_relevant_rank"] == 2 and q2["R@1"] == 0.0  # trec_eval: d-apple-z first
    r = evaluate_benchmark(index, run=path, top=10, query_encoder=splade, ties="as-listed")
    q2 = next(q for q in r.metrics["per_query"] if q["id"] == "q2")
    assert q2["first_relevant_rank"] == 1 and q2["RR@10"] == 1.0 and q2["R@1"] == 1.0
    measure = ir_measures.R @ 1  # pytrec_eval's: trec_eval's order
    raw = ir_measures.calc_aggregate(
        [measure], {"q2": QRELS["q2"]}, list(ir_measures.read_trec_run(str(path)))
    )
    assert raw[measure] == 0.0  # the file read raw: ties by docid, d-apple-z first
    (tmp_path / "run.trec").write_bytes(r.files()["run.trec"])
    ours = ir_measures.calc_aggregate(
        [measure],
        {"q2": QRELS["q2"]},
        list(ir_measures.read_trec_run(str(tmp_path / "run.trec"))),
    )
    assert ours[measure] == 1.0
    assert any("tied scores" in n and "trec_eval would order them" in n for n in r.notes)
    assert any("the run lists no item for 3 queries (q10, q102, q7)" in n for n in r.notes)


def test_silent_wrong_a_relevant_item_scoring_0_is_not_retrieved(result, exact, index):
    assert "d-bread" not in {d for d, _ in exact["q10"]}  # it scores 0 for "zebra stripes"
    q10 = next(q for q in result.metrics["per_query"] if q["id"] == "q10")
    assert q10["first_relevant_rank"] is None and q10["relevant_rank"] is None
    assert q10["relevant_status"] == NOT_RETRIEVED
    failure = next(f for f in result.failures if f.query_id == "q10")
    assert failure.relevant.id == "d-bread" and failure.relevant.rank is None
    assert not failure.relevant.retrieved and failure.relevant.score == 0.0
    assert failure.relevant.contributions == [] and "not retrieved" in failure.note
    assert failure.relevant_status == NOT_RETRIEVED
    files = result.files()
    rows = [line.split(",") for line in files["per_query.csv"].decode().splitlines()]
    assert rows[0] == list(PER_QUERY_COLUMNS)
    row = dict(zip(rows[0], next(r for r in rows if r[0] == "q10"), strict=True))
    assert row["first_relevant_rank"] == "" and row["relevant_rank"] == ""
    assert row["relevant_status"] == NOT_RETRIEVED
    failures = files["failures.csv"].decode().splitlines()
    q10_line = next(line for line in failures if line.startswith("q10,"))
    assert ",,not retrieved," in q10_line  # no relevant_rank, then its status
    assert (
        next(q for q in result.metrics["per_query"] if q["id"] == "q102")["relevant_status"]
        == RETRIEVED
    )


def test_silent_wrong_a_relevant_item_the_run_omits_is_not_retrieved(index, splade):
    r = evaluate(
        index,
        {"q102": QUERIES["q102"]},
        {"q102": QRELS["q102"]},
        run={"q102": {"d-bread": 2.0, "d-xyl": 1.0}},
        query_encoder=splade,
    )
    (q,) = r.metrics["per_query"]
    assert q["relevant_rank"] is None and q["relevant_status"] == NOT_RETRIEVED
    (failure,) = r.failures
    assert failure.relevant.id == "d-rocket" and failure.relevant.rank is None
    assert "the run does not list this relevant item" in failure.note
    # A relevant item the collection does not hold is retrieved second; the one it holds
    # is not retrieved: the query's status and the explained item's each say theirs.
    r = evaluate(
        index,
        {"q102": QUERIES["q102"]},
        {"q102": {"d-rocket": 1, "ghost": 1}},
        run={"q102": {"d-bread": 3.0, "ghost": 2.0}},
        query_encoder=splade,
    )
    (q,) = r.metrics["per_query"]
    assert (q["first_relevant_rank"], q["relevant_rank"], q["relevant_status"]) == (
        2,
        2,
        RETRIEVED,
    )
    (failure,) = r.failures
    assert failure.first_relevant_rank == 2 and failure.nonrelevant.id == "d-bread"
    assert failure.relevant.id == "d-rocket" and failure.relevant.rank is None
    assert failure.relevant_status == NOT_RETRIEVED


def test_silent_wrong_the_failure_view_says_not_retrieved(result, tmp_path):
    from streamlit.testing.v1 import AppTest

    failure = next(f for f in result.failures if f.query_id == "q10")
    state = tmp_path / "failure.json"
    state.write_text(json.dumps(failure.to_state()))

    def view(path):
        import json
        from pathlib import Path

        from lexlens.analysis.evaluation.explain import Failure
        from lexlens.app.views.evaluation import show_failure

        show_failure(Failure.from_state(json.loads(Path(path).read_text())), None)

    at = AppTest.from_function(view, args=(str(state),)).run()
    assert not at.exception
    captions = [c.value for c in at.caption]
    assert "d-bread — not retrieved, score 0.0000" in captions
    assert not any("rank" in c and "d-bread" in c for c in captions)
    assert any("no term of the query is in this item" in c for c in captions)
    assert len(at.dataframe) == 2  # the first item's terms and the decisive words; no empty one


def test_silent_wrong_the_html_report_says_not_retrieved(result):
    """A relevant item with no rank reads "not retrieved" in evaluation.html, as on the page
    (it read "rank None")."""
    html = result.files()["evaluation.html"].decode()
    section = html[html.index("<h3>q10: ") :]
    section = section[: section.index("</section>")]
    assert "d-bread — not retrieved, score" in section
    assert "rank None" not in html


def test_silent_wrong_worst_queries_in_natural_order_named_as_the_csv(result, bench, cli):
    # nDCG 0, 0, 1, 1: q7 < q10 and q2 < q102 as numbers, not as text
    assert [q["id"] for q in worst_first(result.metrics["per_query"])] == [
        "q7",
        "q10",
        "q2",
        "q102",
    ]
    run = cli("evaluate", "--index", bench / "ix", "--top", "10")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    header = next(line for line in lines if line.startswith("query_id  nDCG@10"))
    assert header.split() == [
        "query_id",
        "nDCG@10",
        "first_relevant_rank",
        "relevant_rank",
        "relevant_status",
        "query",
    ]
    start = lines.index(header) + 2
    assert [line.split()[0] for line in lines[start : start + 4]] == ["q7", "q10", "q2", "q102"]
    q10 = lines[start + 1].split()
    assert q10[2:6] == ["-", "-", "not", "retrieved"]
    blame_header = next(line for line in lines if line.startswith("word "))
    assert blame_header.split() == ["word", "pushed", "amount", "mismatch"]


@pytest.mark.parametrize(
    "relevance, why",
    [
        ("0.5", "not a whole number"),
        ("inf", "not a whole number"),
        ("nan", "not a whole number"),
        ("1e400", "not a whole number"),
    ],
)
def test_silent_wrong_relevance_must_be_a_whole_number(tmp_path, relevance, why):
    path = tmp_path / "r.qrels"
    path.write_text(f"q1 0 d1 1\nq1 0 d2 {relevance}\nq1 0 d3 2.0\nq1 0 d4 -1\n")
    problems = Problems()
    assert read_qrels(path, problems) == {"q1": {"d1": 1, "d3": 2, "d4": -1}}
    assert problems.count == 1 and problems.lines[0].startswith(f"{path}:2: ")
    assert why in problems.lines[0]
    only = tmp_path / "bad.qrels"
    only.write_text(f"q1 0 d2 {relevance}\n")
    with pytest.raises(InputError, match=r"no readable judgement \(1 malformed lines\)"):
        read_qrels(only)


@pytest.mark.parametrize("value", [0.5, math.inf, math.nan, 2**31, 1001, "1", True])
def test_traceback_api_relevance_must_be_a_whole_number(index, value):
    with pytest.raises(InputError, match=r"qrels\['q102'\]\['d-rocket'\]"):
        evaluate(index, {"q102": "rocket"}, {"q102": {"d-rocket": value}})


def test_silent_wrong_negative_relevance_never_lowers_ndcg(index, splade, exact):
    qrels = {"q2": {"d-apple-a": -3, "d-apple-z": 1}}  # the first item judged below 0
    r = evaluate(index, {"q2": QUERIES["q2"]}, qrels, top=10, query_encoder=splade)
    (q2,) = r.metrics["per_query"]
    assert [d for d, _ in r.run["q2"][:2]] == ["d-apple-a", "d-apple-z"]
    # By hand: gains 0 then 1 → DCG = 1/log2(3), ideal DCG = 1.
    assert q2["nDCG@10"] == pytest.approx(1 / math.log2(3), abs=1e-12)
    assert q2["RR@10"] == 0.5 and q2["relevant"] == 1 and q2["first_relevant_rank"] == 2
    (failure,) = r.failures
    assert failure.nonrelevant.id == "d-apple-a" and failure.relevant.id == "d-apple-z"
    assert any("1 judgement is below 0" in n for n in r.notes)


def test_silent_wrong_a_pytrec_eval_run_mapping_is_ranked_by_its_scores(index, splade):
    import ir_measures

    qrels = {"q102": QRELS["q102"], "q2": QRELS["q2"]}
    queries = {q: QUERIES[q] for q in qrels}
    mapping = {"q102": {"d-bread": 1.0, "d-rocket": 3.0}, "q2": {"d-tax": 2.0, "d-apple-a": 1.5}}
    pairs = {q: list(items.items()) for q, items in mapping.items()}  # not best first
    by_map = evaluate(index, queries, qrels, run=mapping, query_encoder=splade)
    by_list = evaluate(index, queries, qrels, run=pairs, query_encoder=splade)
    reference = ir_measures.calc_aggregate(_measures(), qrels, mapping)  # no tie: one order
    for name, measure in zip(MEASURES, _measures(), strict=True):
        assert by_map.metrics["aggregate"][name] == pytest.approx(reference[measure], abs=1e-12)
        assert by_list.metrics["aggregate"][name] == by_map.metrics["aggregate"][name]
    ranks = {q["id"]: q["first_relevant_rank"] for q in by_map.metrics["per_query"]}
    assert ranks == {"q102": 1, "q2": 2}
    assert by_map.run["q102"] == [("d-rocket", 3.0), ("d-bread", 1.0)]


@pytest.mark.parametrize(
    "run, name",
    [
        ({"q102": {"d-rocket": math.nan}}, "run['q102']['d-rocket']"),
        ({"q102": [("d-bread", 1.0), ("d-rocket", math.inf)]}, "run['q102'][1]"),
        ({"q102": [("d-rocket", "high")]}, "run['q102'][0]"),
        ({"q102": [("d-rocket", 1.0), ("d-rocket", 0.5)]}, "run['q102'][1]"),
        ({"q102": "d-rocket"}, "run['q102']"),
    ],
)
def test_traceback_a_runs_bad_scores_are_refused_naming_them(index, run, name):
    with pytest.raises(InputError) as caught:
        evaluate(index, {"q102": "rocket"}, {"q102": {"d-rocket": 1}}, run=run)
    assert str(caught.value).startswith(name + ":")


@pytest.mark.parametrize("score", ["nan", "inf", "-inf", "1e400"])
def test_traceback_a_run_files_non_finite_score_is_refused_with_its_line(
    tmp_path, bench, cli, score
):
    path = tmp_path / "run.trec"
    path.write_text(f"q102 Q0 d-rocket 1 2.5 x\nq102 Q0 d-bread 2 {score} x\n")
    with pytest.raises(InputError, match=f"^{path}:2: score '{score}' is not a finite number$"):
        read_run(path)
    run = cli("evaluate", "--index", bench / "ix", "--run", path)
    one_line_error(run, f"{path}:2:", "not a finite number")


def test_silent_wrong_thousands_of_tied_rankings_agree_with_pytrec_eval(tmp_path):
    """3,000 queries × 100 items with many tied scores, relevance from −2 to 3 (some queries
    with nothing relevant): the measures follow the order given (ties as listed) exactly as
    pytrec_eval does on explicit strictly decreasing scores, and the written run gives the
    same through trec_eval."""
    import ir_measures
    import pytrec_eval

    rng = random.Random(7)
    run, qrels = {}, {}
    for i in range(3000):
        q = f"q{i}"
        docs = rng.sample(range(5000), 100)
        run[q] = [(f"d{d}", float(rng.randint(0, 9))) for d in docs]
        judged = rng.sample(docs, 8) + [rng.randrange(5000, 6000)]  # one never retrieved
        qrels[q] = {f"d{d}": rng.randint(-2, 3) for d in judged}
    ranked = ranked_run(run)
    aggregate, per_query = lexlens_measure(ranked, qrels, MEASURES)
    gains = {q: {d: max(0, r) for d, r in j.items()} for q, j in qrels.items()}
    explicit = {q: {d: float(100 - k) for k, (d, _) in enumerate(ranked[q])} for q in ranked}
    names = {"nDCG@10": "ndcg_cut_10", "R@5": "recall_5", "AP@100": "map_cut_100"}
    values = pytrec_eval.RelevanceEvaluator(gains, set(names.values())).evaluate(explicit)
    raw = pytrec_eval.RelevanceEvaluator(gains, {"ndcg_cut_10"}).evaluate(
        {q: dict(pairs) for q, pairs in ranked.items()}
    )
    assert sum(raw[q]["ndcg_cut_10"] != values[q]["ndcg_cut_10"] for q in run) > 100  # ties bite
    for ours, theirs in names.items():
        for q in run:
            assert per_query[q][ours] == pytest.approx(values[q][theirs], abs=1e-12)
        assert aggregate[ours] == pytest.approx(
            sum(values[q][theirs] for q in run) / len(run), abs=1e-12
        )
    assert any(not any(r > 0 for r in j.values()) for j in qrels.values())  # counted as 0
    (tmp_path / "run.trec").write_text(run_text(ranked))
    again = ir_measures.calc_aggregate(
        [ir_measures.nDCG @ 10], gains, list(ir_measures.read_trec_run(str(tmp_path / "run.trec")))
    )
    assert again[ir_measures.nDCG @ 10] == pytest.approx(aggregate["nDCG@10"], abs=1e-12)
