"""Relevance grades are bounded (−1,000 to 1,000): pytrec_eval sizes each query's gain arrays
by its largest grade (8 bytes a level), so a legal 32-bit grade of 2,147,483,647 took 16.8 GB,
and under an address-space limit it returned 0 for nDCG, R@k and AP of every query. A grade
beyond the bound refuses the file with its line; one at the bound is evaluated as ir-measures
evaluates it; a measure the provider fails to compute is refused, never a 0.

References are independent: ir-measures reads the run file the command wrote and the qrels
file the test wrote; the provider's failure is made by a stand-in for ir-measures' iterator
(the real values, with the ones pytrec_eval computes set to 0, as it returns them when its
memory is refused)."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from lexlens.analysis.collections.indexing import index_collection
from lexlens.analysis.core.metrics import measure
from lexlens.analysis.datasets.trec import Problems, read_qrels
from lexlens.analysis.evaluation.result import MEASURES
from lexlens.models.base import InputError, LexlensError
from tests.datasets.files import beir_of_tables
from tests.helpers import ROOT, one_line_error

CORPUS = {
    "d-apple": "red apple pie with cinnamon",
    "d-crumble": "apple crumble",
    "d-rocket": "a rocket launching into the night sky",
    "d-bread": "fresh bread in a bakery window",
    "d-chess": "chess opening gambit",
}
QUERIES = {"q1": "apple pie", "q2": "rocket launch", "q3": "bakery bread"}
QRELS = {"q1": {"d-apple": 1}, "q2": {"d-rocket": 1}, "q3": {"d-bread": 1}}
#: The address space the command runs in: room for torch and scipy (about 2.2 GB of
#: mappings), none for the 16 GB a grade of 2**31 - 1 asks of pytrec_eval.
LIMIT = 3 * 1024**3


@pytest.fixture(scope="module")
def ix(tmp_path_factory, splade) -> Path:
    folder = tmp_path_factory.mktemp("grades")
    beir_of_tables(folder / "beir", CORPUS, QUERIES, QRELS)
    index_collection(splade, folder / "beir", folder / "ix")
    return folder / "ix"


def _limited_cli(*args: object) -> subprocess.CompletedProcess:
    """``lexlens ARGS`` in a child whose address space is capped at :data:`LIMIT`."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))

    exe = Path(sys.executable).parent / "lexlens"
    return subprocess.run(
        [str(exe), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        preexec_fn=cap,
    )


def test_unbounded_a_maxint_grade_is_refused_with_its_line_in_bounded_memory(ix, tmp_path):
    qrels = tmp_path / "g_maxint.tsv"
    qrels.write_text("q1 0 d-crumble 1\nq1 0 d-apple 2147483647\nq2 0 d-rocket 1\n")
    run = _limited_cli("evaluate", "--index", ix, "--qrels", qrels)
    line = one_line_error(run, f"{qrels}:2:", "2147483647", "-1,000 to 1,000")
    assert "nDCG" not in run.stdout, line


def test_unbounded_a_grade_at_the_bound_gives_ir_measures_numbers_in_bounded_memory(ix, tmp_path):
    import ir_measures

    qrels = tmp_path / "g_1000.tsv"
    qrels.write_text(
        "q1 0 d-crumble 1000\nq1 0 d-apple 3\nq2 0 d-rocket 1000\nq2 0 d-bread -1000\n"
        "q3 0 d-bread 1\nq3 0 d-chess 999\n"
    )
    out = tmp_path / "out"
    run = _limited_cli("evaluate", "--index", ix, "--qrels", qrels, "--out", out, "--json")
    assert run.returncode == 0, run.stderr
    document = json.loads((out / "evaluation.json").read_text())
    gains: dict[str, dict[str, int]] = {}
    for judged in ir_measures.read_trec_qrels(str(qrels)):  # the test's own reading
        gains.setdefault(judged.query_id, {})[judged.doc_id] = max(0, judged.relevance)
    ranking = list(ir_measures.read_trec_run(str(out / "run.trec")))
    parsed = [ir_measures.parse_measure(m) for m in MEASURES]
    reference = {
        (m.query_id, str(m.measure)): m.value for m in ir_measures.iter_calc(parsed, gains, ranking)
    }
    rows = {row["id"]: row for row in document["metrics"]["per_query"]}
    assert set(rows) == {"q1", "q2", "q3"}
    assert any(0 < reference[(q, "nDCG@10")] < 1 for q in rows)  # the grades weigh in
    for q, row in rows.items():
        for name in MEASURES:
            # each value is one ratio of sums of at most 10 gains ≤ 1,000 over log2 terms
            assert row[name] == pytest.approx(reference[(q, name)], rel=1e-12, abs=1e-12)
    for name in MEASURES:
        mean = sum(reference[(q, name)] for q in rows) / len(rows)
        assert document["metrics"]["aggregate"][name] == pytest.approx(mean, rel=1e-12)


@pytest.mark.parametrize("beir", [False, True])
def test_silent_wrong_a_grade_beyond_the_bound_refuses_the_file_with_its_line(tmp_path, beir):
    header = "query-id\tcorpus-id\tscore\n" if beir else ""
    row = "q1\td{}\t{}\n" if beir else "q1 0 d{} {}\n"
    first = 2 if beir else 1
    kept = {"1000": 1000, "-1000": -1000, "1000.0": 1000, "+0001000": 1000, "0": 0}
    path = tmp_path / "ok.qrels"
    path.write_text(header + "".join(row.format(i, g) for i, g in enumerate(kept)))
    assert read_qrels(path) == {"q1": {f"d{i}": v for i, v in enumerate(kept.values())}}
    for grade in ("2147483647", "1001", "-1001", "9" * 5000, "-2147483648"):
        path = tmp_path / "bad.qrels"
        path.write_text(header + row.format(0, 1) + row.format(1, grade) + row.format(2, 1))
        problems = Problems()
        with pytest.raises(InputError) as refused:
            read_qrels(path, problems)
        message = str(refused.value)
        assert message.startswith(f"{path}:{first + 1}: relevance ")
        assert "-1,000 to 1,000" in message and "\n" not in message and len(message) < 300


def _failing_provider(monkeypatch, zero: set[str] = frozenset(), drop: set[str] = frozenset()):
    """ir-measures' iterator as a failed provider makes it: its real values, with the
    measures ``zero`` returned as 0 and those of ``drop`` not returned."""
    import ir_measures

    real = ir_measures.iter_calc

    def failed(measures, qrels, run):
        for value in real(measures, qrels, run):
            name = str(value.measure)
            if name in drop:
                continue
            yield value._replace(value=0.0) if name in zero else value

    monkeypatch.setattr(ir_measures, "iter_calc", failed)


def test_silent_wrong_a_measure_its_provider_failed_is_refused_never_a_zero(monkeypatch):
    run = {"q1": [("d1", 3.0), ("d2", 2.0)], "q2": [("d5", 1.0), ("d3", 0.5)], "q3": []}
    qrels = {"q1": {"d1": 2}, "q2": {"d3": 1}, "q3": {"d9": 1}, "q4": {"d1": 0}}
    aggregate, per_query = measure(run, qrels, MEASURES)  # the real provider: no refusal
    assert per_query["q1"]["nDCG@10"] == 1.0 and per_query["q2"]["R@1"] == 0.0
    assert per_query["q3"]["nDCG@10"] == 0.0 and per_query["q4"]["AP@100"] == 0.0
    _failing_provider(monkeypatch, zero={"nDCG@10", "R@5", "AP@100"})
    with pytest.raises(LexlensError, match=r"nDCG@10 = 0 for query 'q1'.*'d1' is ranked 1"):
        measure(run, qrels, MEASURES)
    monkeypatch.undo()
    _failing_provider(monkeypatch, drop={"AP@100"})
    with pytest.raises(LexlensError, match=r"no AP@100 for query 'q1'"):
        measure(run, qrels, MEASURES)
    monkeypatch.undo()
    _failing_provider(monkeypatch, zero={"R@1"})  # q2's relevant item is ranked 2: R@1 is 0
    assert measure({"q2": run["q2"]}, {"q2": qrels["q2"]}, MEASURES)[1]["q2"]["R@1"] == 0.0
