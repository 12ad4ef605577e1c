"""Judged items only (the condensed-list convention): on a real splade-tiny index with sparse
judgements, every measure equals ir-measures on the same rankings with their unjudged items
filtered out here — Lexlens's own ranking and an outside run —, the count of removed items
is the one the notes state, no failure's rival is unjudged, and the command's flag gives the
API's JSON."""

from __future__ import annotations

import json

import ir_measures
import pytest

from lexlens.analysis.collections.indexing import build_index
from lexlens.analysis.core.outputs import json_text
from lexlens.analysis.evaluation.evaluate import evaluate
from lexlens.analysis.evaluation.options import EvaluationOptions
from lexlens.analysis.evaluation.result import MEASURES
from tests.systems.test_comparison import QUERIES, TEXTS

#: Sparse judgements: most items each query ranks are not judged at all.
QRELS = {
    "q-dog": {"d1": 1, "d6": 0},
    "q-coffee": {"d3": 1, "d8": 0},
    "q-space": {"d5": 1},
    "q-cat": {"d7": 1, "d0": 0},
    "q-giraffe": {"d9": 1, "d4": 0},
    "q-ball": {"d10": 2, "d7": 0},
    "q-bread": {"d8": 1},
    "q-mug": {"d11": 1, "d3": 0},
}
#: An outside run with unjudged items above, between and below the judged ones.
RUN = {
    "q-dog": [("d10", 9.0), ("d0", 8.0), ("d6", 7.0), ("d2", 6.0), ("d1", 5.0)],
    "q-coffee": [("d2", 4.0), ("d3", 3.0), ("d11", 2.0), ("d8", 1.0)],
    "q-space": [("d4", 3.0), ("d5", 2.0)],
    "q-cat": [("d6", 3.0), ("d0", 2.0), ("d7", 1.0)],
    "q-giraffe": [("d9", 1.0)],
    "q-ball": [("d7", 5.0), ("d1", 4.0), ("d10", 3.0)],
    "q-bread": [("d1", 2.0), ("d2", 1.0)],
    "q-mug": [("d2", 4.0), ("d3", 3.0), ("d0", 2.0), ("d11", 1.0)],
}


@pytest.fixture(scope="module")
def index(tmp_path_factory, splade):
    folder = tmp_path_factory.mktemp("judged_only")
    (folder / "items.csv").write_text("id,text\n" + "".join(f"{i},{t}\n" for i, t in TEXTS.items()))
    build_index(splade, folder / "items.csv", folder / "ix")
    return folder / "ix"


def _ir_measures(run: dict[str, list[tuple[str, float]]]) -> dict[tuple[str, str], float]:
    """ir-measures per query on ``run`` handed over in its order (strictly decreasing
    scores), every query of the judgements scored."""
    handed = {q: {d: float(len(p) - i) for i, (d, _) in enumerate(p)} for q, p in run.items() if p}
    measures = [ir_measures.parse_measure(m) for m in MEASURES]
    return {
        (m.query_id, str(m.measure)): m.value
        for m in ir_measures.iter_calc(measures, {q: dict(j) for q, j in QRELS.items()}, handed)
    }


def _filtered(run: dict[str, list[tuple[str, float]]]) -> dict[str, list[tuple[str, float]]]:
    """Every ranking without the items its query's judgements do not name."""
    return {q: [(d, s) for d, s in pairs if d in QRELS[q]] for q, pairs in run.items()}


@pytest.mark.parametrize("outside", [False, True], ids=["lexlens", "run"])
def test_silent_wrong_judged_only_equals_ir_measures_on_the_filtered_run(index, outside):
    run = RUN if outside else None
    full = evaluate(index, QUERIES, QRELS, run=run)
    condensed = evaluate(index, QUERIES, QRELS, run=run, judged_only=True)
    # the reference: the full evaluation's rankings (in trec_eval's order) filtered here
    filtered = _filtered(full.run)
    removed = sum(len(p) for p in full.run.values()) - sum(len(p) for p in filtered.values())
    assert removed > 0
    want = _ir_measures(filtered)
    for row in condensed.metrics["per_query"]:
        for m in MEASURES:
            key = (row["id"], str(ir_measures.parse_measure(m)))
            assert row[m] == pytest.approx(want.get(key, 0.0), abs=1e-12)
    before = _ir_measures(full.run)
    assert any(
        row[m] != pytest.approx(before.get((row["id"], str(ir_measures.parse_measure(m))), 0.0))
        for row in condensed.metrics["per_query"]
        for m in MEASURES
    )
    for m in MEASURES:
        mean = sum(r[m] for r in condensed.metrics["per_query"]) / len(QUERIES)
        assert condensed.metrics["aggregate"][m] == pytest.approx(mean, abs=1e-12)
    assert condensed.run == filtered
    # every item left is judged: Judged@10 is 1, or 0 for a ranking left empty (ir-measures)
    for row in condensed.metrics["per_query"]:
        assert row["Judged@10"] == (1.0 if filtered[row["id"]] else 0.0)
    assert f"judged only: {removed} unjudged items removed from the rankings" in " ".join(
        condensed.notes
    )
    assert condensed.settings["judged_only"] is True and "judged_only" not in full.settings
    assert not condensed.cause_rates["rival_unjudged"]
    for failure in condensed.failures:
        assert failure.nonrelevant is None or failure.nonrelevant.id in QRELS[failure.query_id]
    assert condensed.options == EvaluationOptions(judged_only=True)


def test_silent_wrong_the_flag_gives_the_apis_json(cli, index, tmp_path):
    queries = tmp_path / "queries.jsonl"
    queries.write_text(
        "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in QUERIES.items())
    )
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text(
        "query-id\tcorpus-id\tscore\n"
        + "".join(f"{q}\t{d}\t{r}\n" for q, j in QRELS.items() for d, r in j.items())
    )
    run = cli("evaluate", "--index", index, "--queries", queries, "--qrels", qrels, "--judged-only")
    assert run.returncode == 0, run.stderr
    assert "judged only:" in run.stdout and "unjudged items removed from the rankings" in run.stdout
    as_json = cli(
        "evaluate",
        "--index",
        index,
        "--queries",
        queries,
        "--qrels",
        qrels,
        "--judged-only",
        "--json",
    )
    direct = evaluate(index, QUERIES, QRELS, judged_only=True)
    assert json.loads(as_json.stdout)["metrics"] == json.loads(json_text(direct))["metrics"]
