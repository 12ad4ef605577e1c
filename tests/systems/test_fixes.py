"""Failures across systems on a real splade-tiny index: the queries B fixes and breaks
recounted from the per-query table, McNemar's exact p equal to a binomial sum written here
(and statsmodels' exact McNemar when installed), the causes of the fixed and of the new
failures recounted from each system's own evaluation, and the files, page text and command
lines that carry them."""

from __future__ import annotations

import csv
import io
import math

import numpy as np
import pytest

from lexlens.analysis.collections.indexing import build_index
from lexlens.analysis.evaluation.evaluate import evaluate_benchmark
from lexlens.analysis.evaluation.failures import CAUSES
from lexlens.analysis.systems.comparison import evaluate_systems
from lexlens.analysis.systems.fixes import mcnemar_exact
from lexlens.analysis.systems.options import ComparisonOptions
from lexlens.analysis.systems.systems import SystemsSpec
from lexlens.app.cli.evaluate_view import compared as compared_text
from tests.systems.test_comparison import TEXTS

ITEMS = list(TEXTS)
#: How each query fares under A and B: (A succeeds, B succeeds) × how many queries.
CELLS = {(True, True): 9, (False, False): 7, (False, True): 17, (True, False): 5}


def _benchmark() -> tuple[dict, dict, dict, dict]:
    """Queries spelled from their relevant item's words, one relevant and one judged
    non-relevant item each, and two runs whose outcome per query is the cell it is dealt
    (failures of three kinds: a judged rival first, an unjudged one first, the relevant item
    left out)."""
    rng = np.random.default_rng(7)
    cells = [cell for cell, n in CELLS.items() for _ in range(n)]
    rng.shuffle(cells)
    queries, qrels, run_a, run_b = {}, {}, {}, {}
    for i, (ok_a, ok_b) in enumerate(cells):
        q = f"q{i:02d}"
        rel, judged, unjudged = ITEMS[i % 12], ITEMS[(i + 1) % 12], ITEMS[(i + 5) % 12]
        words = TEXTS[rel].split()
        queries[q] = " ".join(words[i % 3 : i % 3 + 3])
        qrels[q] = {rel: 1, judged: 0}
        for ok, run, kind in ((ok_a, run_a, i % 3), (ok_b, run_b, (i + 1) % 3)):
            if ok:
                run[q] = [(rel, 3.0), (judged, 2.0), (unjudged, 1.0)]
            elif kind == 0:
                run[q] = [(judged, 3.0), (rel, 2.0)]
            elif kind == 1:
                run[q] = [(unjudged, 3.0), (rel, 2.0)]
            else:
                run[q] = [(judged, 3.0)]
    return queries, qrels, run_a, run_b


QUERIES, QRELS, RUN_A, RUN_B = _benchmark()


@pytest.fixture(scope="module")
def index(tmp_path_factory, splade):
    folder = tmp_path_factory.mktemp("fixes")
    (folder / "items.csv").write_text("id,text\n" + "".join(f"{i},{t}\n" for i, t in TEXTS.items()))
    build_index(splade, folder / "items.csv", folder / "ix")
    return folder / "ix"


@pytest.fixture(scope="module")
def result(index):
    spec = SystemsSpec([index], runs=[RUN_A, RUN_B], names=["a", "b"], with_exact=True)
    options = ComparisonOptions(resamples=200, baseline="a")
    return evaluate_systems(spec, queries=QUERIES, qrels=QRELS, options=options)


def _binomial_two_sided(b: int, c: int) -> float:
    """McNemar's exact p by hand: twice the smaller tail of Binomial(b + c, ½), capped at 1."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1)) / 2**n
    return min(1.0, 2 * tail)


def _succeeded(comparison, name: str) -> dict[str, bool]:
    """Per query, whether RR@10 is 1 (the first relevant item first), from the per-query
    table."""
    return {q["id"]: q["values"][name]["RR@10"] == 1.0 for q in comparison.per_query}


def test_silent_wrong_fixed_and_broken_recount_from_the_per_query_table(result):
    comparison = result.section("comparison")
    names = [s.name for s in comparison.systems]
    assert "a" in names and "b" in names and len(names) == 3
    for found in comparison.fixes:
        won = _succeeded(comparison, found["system_a"])
        got = _succeeded(comparison, found["system_b"])
        fixed = [q for q in won if not won[q] and got[q]]
        broken = [q for q in won if won[q] and not got[q]]
        assert found["fixed"] == len(fixed) and found["fixed_queries"] == fixed
        assert found["broken"] == len(broken) and found["broken_queries"] == broken
        assert found["both_succeed"] == sum(won[q] and got[q] for q in won)
        assert found["both_fail"] == sum(not won[q] and not got[q] for q in won)
    ab = next(f for f in comparison.fixes if f["system_b"] == "b")
    assert (ab["fixed"], ab["broken"]) == (CELLS[(False, True)], CELLS[(True, False)])


def test_silent_wrong_mcnemar_equals_a_binomial_sum_and_statsmodels(result):
    for found in result.section("comparison").fixes:
        want = _binomial_two_sided(found["fixed"], found["broken"])
        # the tail holds at most 2^n terms of size ≤ 1: rounding far below 1e-12
        assert found["p_mcnemar"] == pytest.approx(want, rel=1e-12, abs=1e-15)
    ab = next(f for f in result.section("comparison").fixes if f["system_b"] == "b")
    assert ab["p_mcnemar"] == pytest.approx(_binomial_two_sided(17, 5), rel=1e-12)
    assert 0.005 < ab["p_mcnemar"] < 0.02  # 17 vs 5: significant at 5 %, not at 0.5 %
    contingency = pytest.importorskip("statsmodels.stats.contingency_tables")
    table = [[ab["both_fail"], ab["fixed"]], [ab["broken"], ab["both_succeed"]]]
    assert ab["p_mcnemar"] == pytest.approx(
        contingency.mcnemar(table, exact=True).pvalue, rel=1e-12
    )


@pytest.mark.parametrize("b, c", [(0, 0), (0, 1), (3, 3), (1, 9), (12, 2), (40, 25)])
def test_silent_wrong_mcnemar_exact_on_edge_counts(b, c):
    assert mcnemar_exact(b, c) == pytest.approx(_binomial_two_sided(b, c), rel=1e-12, abs=1e-15)


def _run_causes(causes) -> list[str]:
    """An outside run's causes by its own evidence: the collection's q ⊙ d reasons (won on
    expansion terms, and so "other") are not the run's; none left is "not decomposed"."""
    kept = [c for c in causes if c not in ("won on expansion terms", "other")]
    return kept or ["not decomposed"]


def test_silent_wrong_causes_recount_from_each_systems_own_evaluation(index, result):
    comparison = result.section("comparison")
    ab = next(f for f in comparison.fixes if f["system_b"] == "b")
    # the baseline's evaluation is what evaluate_systems returns; B's evaluated on its own.
    # Both are outside runs: only the causes their ranks and the items' words give are theirs
    own_a = {f.query_id: _run_causes(f.causes) for f in result.failures}
    alone_b = evaluate_benchmark(index, queries=QUERIES, qrels=QRELS, run=RUN_B)
    own_b = {f.query_id: _run_causes(f.causes) for f in alone_b.failures}
    for key, ids, own in (
        ("fixed_causes", ab["fixed_queries"], own_a),
        ("broken_causes", ab["broken_queries"], own_b),
    ):
        want = {c: sum(c in own[q] for q in ids) for c in (*CAUSES, "not decomposed")}
        assert {r["cause"]: r["queries"] for r in ab[key]} == {c: n for c, n in want.items() if n}
    rows = {r["cause"]: r for r in ab["causes"]}
    assert not {"won on expansion terms", "other"} & set(rows)
    for cause in (*CAUSES, "not decomposed"):
        in_a = sum(cause in c for c in own_a.values())
        in_b = sum(cause in c for c in own_b.values())
        if in_a or in_b:
            assert (rows[cause]["failures_a"], rows[cause]["failures_b"]) == (in_a, in_b)
            assert rows[cause]["reduced"] == (in_b < in_a)
    assert ab["failures_a"] == len(own_a) and ab["failures_b"] == len(own_b)
    # B leaves the relevant item out on a third of its failures: "not retrieved" is a cause
    assert "not retrieved" in rows
    unjudged_first = {q for q, pairs in RUN_B.items() if pairs[0][0] not in QRELS[q]}
    assert ab["broken_rival_unjudged"] == len(set(ab["broken_queries"]) & unjudged_first)


def test_silent_wrong_files_and_text_carry_the_fixes(result):
    comparison = result.section("comparison")
    ab = next(f for f in comparison.fixes if f["system_b"] == "b")
    files = comparison.files()
    rows = list(csv.DictReader(io.StringIO(files["comparison.csv"].decode("utf-8"))))
    for row in rows:
        found = next(
            f
            for f in comparison.fixes
            if (f["system_a"], f["system_b"]) == (row["system_a"], row["system_b"])
        )
        assert (int(row["fixed"]), int(row["broken"])) == (found["fixed"], found["broken"])
        assert float(row["p_mcnemar"]) == pytest.approx(found["p_mcnemar"], rel=1e-9)
    assert '"fixes"' in files["comparison.json"].decode("utf-8")
    html = files["comparison.html"].decode("utf-8")
    assert "Failures across systems" in html and 'id="fixes"' in html
    text = compared_text(comparison)
    assert f"b vs a: fixes {ab['fixed']}, breaks {ab['broken']} of {ab['queries']}" in text
    assert "McNemar's exact p" in text
