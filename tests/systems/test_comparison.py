"""Several systems on one benchmark, end to end on a real splade-tiny index: per-query values
equal ir-measures' iter_calc on each system's ranking, a run's missing queries named and
scored 0, the table's tests equal scipy on the per-query values with Holm by hand, the why's
decompositions sum to the exact scores, the files, and one system unchanged on the CLI."""

from __future__ import annotations

import csv
import io
import json

import ir_measures
import numpy as np
import pytest
from scipy import stats

from lexlens.analysis.collections.indexing import build_index
from lexlens.analysis.core.outputs import json_text
from lexlens.analysis.evaluation.evaluate import evaluate_benchmark
from lexlens.analysis.systems.comparison import compare_systems, evaluate_systems, why_of
from lexlens.analysis.systems.systems import SystemsSpec, systems_of
from tests.helpers import close_to

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
    "d10": "a dog chasing a ball in the park",
    "d11": "latte art in a ceramic mug",
}
QUERIES = {
    "q-dog": "dog on the beach",
    "q-coffee": "a cup of espresso",
    "q-space": "rocket in space",
    "q-cat": "a sleeping kitten",
    "q-giraffe": "giraffe",
    "q-ball": "playing with a ball",
    "q-bread": "bakery",
    "q-mug": "a mug of coffee",
}
QRELS = {
    "q-dog": {"d1": 1, "d0": 1, "d10": 1},
    "q-coffee": {"d3": 1, "d2": 1, "d11": 1},
    "q-space": {"d4": 1, "d5": 1},
    "q-cat": {"d7": 1},
    "q-giraffe": {"d9": 1},
    "q-ball": {"d7": 1, "d10": 1},
    "q-bread": {"d8": 1},
    "q-mug": {"d11": 2, "d2": 1, "d3": 0},
}
#: An outside run that misses q-giraffe and q-bread, and gets some others wrong.
RUN = {
    "q-dog": [("d10", 5.0), ("d0", 4.0), ("d1", 3.0)],
    "q-coffee": [("d8", 2.0), ("d3", 1.0)],
    "q-space": [("d5", 3.0), ("d4", 2.0)],
    "q-cat": [("d6", 2.0), ("d0", 1.5), ("d7", 1.0)],
    "q-ball": [("d7", 1.0)],
    "q-mug": [("d2", 4.0), ("d11", 3.0)],
}


@pytest.fixture(scope="module")
def index(tmp_path_factory, splade):
    folder = tmp_path_factory.mktemp("systems")
    (folder / "items.csv").write_text("id,text\n" + "".join(f"{i},{t}\n" for i, t in TEXTS.items()))
    build_index(splade, folder / "items.csv", folder / "ix")
    return folder / "ix"


@pytest.fixture(scope="module")
def compared(index):
    spec = SystemsSpec([index], runs=[RUN], names=["outside"], gate_ks=[768, 2])
    return evaluate_systems(spec, queries=QUERIES, qrels=QRELS).section("comparison")


def test_silent_wrong_per_query_values_equal_ir_measures_iter_calc(compared):
    assert [s.name for s in compared.systems] == [
        "ix query gate k=768",
        "ix query gate k=2",
        "outside",
    ]
    qrels = {q: dict(j) for q, j in QRELS.items()}
    for system in compared.systems:
        ranking = compared.runs[system.name]
        # each ranking handed over with strictly decreasing scores (its order as shown)
        run = {
            q: {d: float(len(p) - i) for i, (d, _) in enumerate(p)} for q, p in ranking.items() if p
        }
        want = {
            (m.query_id, str(m.measure)): m.value
            for m in ir_measures.iter_calc(
                [ir_measures.parse_measure(x) for x in compared.measures], qrels, run
            )
        }
        for row in compared.per_query:
            for name in compared.measures:
                key = (row["id"], str(ir_measures.parse_measure(name)))
                assert row["values"][system.name][name] == pytest.approx(want.get(key, 0.0))


def test_silent_wrong_a_runs_missing_queries_are_named_counted_and_scored_zero(compared):
    assert compared.missing["outside"] == {"count": 2, "queries": ["q-giraffe", "q-bread"]}
    assert compared.missing["ix query gate k=768"]["count"] == 0
    values = {q["id"]: q["values"]["outside"] for q in compared.per_query}
    assert all(v == 0.0 for q in ("q-giraffe", "q-bread") for v in values[q].values())
    assert any("q-giraffe" in n and "outside" in n for n in compared.notes)


def test_silent_wrong_table_equals_scipy_on_the_per_query_values_with_holm_by_hand(compared):
    table = compared.table
    assert {(r["system_a"], r["system_b"]) for r in table} == {
        ("ix query gate k=768", "ix query gate k=2"),
        ("ix query gate k=768", "outside"),
    }
    assert len(table) == 2 * len(compared.measures)
    for row in table:
        a = np.array([q["values"][row["system_a"]][row["measure"]] for q in compared.per_query])
        b = np.array([q["values"][row["system_b"]][row["measure"]] for q in compared.per_query])
        assert row["mean_a"] == pytest.approx(a.mean()) and row["delta"] == pytest.approx(
            (b - a).mean()
        )
        if np.ptp(b - a) > 0:
            assert row["p_t"] == pytest.approx(stats.ttest_rel(b, a).pvalue)
        if np.any(b != a):
            assert row["p_wilcoxon"] == pytest.approx(stats.wilcoxon((b - a)[b != a]).pvalue)
        assert row["wins"] + row["ties"] + row["losses"] == len(QUERIES)
    # Holm over the whole family (2 comparisons × 7 measures), by hand
    p = [r["p_t"] for r in table]
    order = sorted(range(len(p)), key=lambda i: p[i])
    running, holm = 0.0, [0.0] * len(p)
    for k, i in enumerate(order):
        running = max(running, min(1.0, p[i] * (len(p) - k)))
        holm[i] = running
    assert [r["p_t_corrected"] for r in table] == pytest.approx(holm)
    assert compared.georisk is not None and set(compared.georisk["nDCG@10"]) == {
        s.name for s in compared.systems
    }


def test_silent_wrong_why_decompositions_sum_to_the_exact_scores(compared):
    """Each Lexlens side's words sum to its exact score; a run's side has no words."""
    assert compared.why, "the largest wins and losses are explained"
    both = [w for w in compared.why if w.system_b == "ix query gate k=2"]
    outside = [w for w in compared.why if w.system_b == "outside"]
    for why in both + outside:
        item = why.relevant
        assert item is not None and item.relevant
        assert item.id in {d for d, r in QRELS[why.query_id].items() if r > 0}
        total = sum(w["contribution"] for w in item.words_a)
        assert total == pytest.approx(item.score_a or 0.0, abs=1e-9)
    for why in outside:
        # a run is explained by its own scores or not at all: never another system's terms
        assert "no decomposition: ranks only for outside" in why.note
        assert why.relevant.score_b in (None, *[s for _, s in RUN.get(why.query_id, [])])
        assert why.relevant.words_b == [] and why.decisive_b == [] and why.changed == []
        assert all(m.words_b == [] for m in why.moved)
        if why.rival is not None:
            assert why.rival.words_b == []
    # any query can be explained on demand, the same way (its vector encoded alone: a
    # batch's padding moves weights by float32 rounding only)
    again = why_of(compared, outside[0].query_id, ("ix query gate k=768", "outside"))
    assert again.relevant.id == outside[0].relevant.id
    assert again.relevant.rank_a == outside[0].relevant.rank_a
    score = outside[0].relevant.score_a  # of non-negative products: its own Σ|terms|
    assert again.relevant.score_a == close_to(score, terms=score)
    assert [m.id for m in again.moved] == [m.id for m in outside[0].moved]


def test_silent_wrong_files_hold_the_table_deltas_and_marks(compared):
    files = compared.files()
    assert set(files) == {
        "comparison.json",
        "comparison.csv",
        "per_query_deltas.csv",
        "comparison.html",
        "comparison.tex",
    }
    assert json.loads(files["comparison.json"]) == json.loads(json_text(compared))
    rows = list(csv.DictReader(io.StringIO(files["per_query_deltas.csv"].decode())))
    assert len(rows) == 2 * len(compared.measures) * len(QUERIES)
    for row in rows[:20]:
        assert float(row["delta"]) == pytest.approx(float(row["b"]) - float(row["a"]))
    table = list(csv.DictReader(io.StringIO(files["comparison.csv"].decode())))
    assert len(table) == len(compared.table)
    tex = files["comparison.tex"].decode()
    marked = sum(r["significant"] for r in compared.table if r["system_a"] == compared.baseline)
    assert tex.count(r"$^\dagger$") == marked
    assert r"ix query gate k=768" in tex
    html = files["comparison.html"].decode()
    assert "<script" not in html and "Blame shift" in html


def test_silent_wrong_one_system_is_todays_evaluation_byte_for_byte(cli, index, tmp_path):
    queries = tmp_path / "queries.jsonl"
    queries.write_text(
        "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in QUERIES.items())
    )
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text(
        "query-id\tcorpus-id\tscore\n"
        + "".join(f"{q}\t{d}\t{r}\n" for q, j in QRELS.items() for d, r in j.items())
    )
    run = cli(
        "evaluate",
        "--index",
        index,
        "--queries",
        queries,
        "--qrels",
        qrels,
        "--gate-k",
        "16",
        "--json",
    )
    assert run.returncode == 0, run.stderr
    direct = evaluate_benchmark(index, queries=queries, qrels=qrels, gate_k=16)
    assert run.stdout == json_text(direct) + "\n"
    two = cli(
        "evaluate",
        "--index",
        index,
        "--queries",
        queries,
        "--qrels",
        qrels,
        "--gate-k",
        "16",
        "--gate-k",
        "768",
        "--resamples",
        "200",
        "--latex",
    )
    assert two.returncode == 0, two.stderr
    assert two.stdout.startswith("% Lexlens comparison") and r"\toprule" in two.stdout


def test_silent_wrong_systems_and_baseline_are_chosen_as_stated(index, tmp_path):
    one = systems_of(SystemsSpec([index], runs=[RUN]), 768)
    assert [(s.name, s.kind) for s in one] == [("run1", "run")]  # a run alone: today's
    exact = systems_of(SystemsSpec([index], runs=[RUN], with_exact=True), 768)
    assert [s.kind for s in exact] == ["lexlens", "run"]
    result = compare_systems(
        exact,
        queries=QUERIES,
        qrels=QRELS,
        baseline="run1",
        all_pairs=True,
        resamples=200,
        explain=1,
    )
    assert result.baseline == "run1"
    assert {(r["system_a"], r["system_b"]) for r in result.table} == {("run1", "ix")}
    assert result.engine and result.engine[0]["run"] == "run1"
    assert 0.0 <= result.engine[0]["mean_overlap"] <= 1.0
