"""An evaluation, a counterfactual and a systems comparison display themselves in a notebook:
one escaped, self-contained fragment each (a query's markup is shown, never drawn), its
tables capped with the rest counted, and ``to_frame()`` the rows its CSV file holds."""

from __future__ import annotations

import csv
import io

import pytest

import lexlens
from lexlens.analysis.collections.indexing import index_collection
from lexlens.analysis.core.samples import sample_benchmark
from lexlens.analysis.datasets.trec import read_queries
from lexlens.analysis.render.html import num
from lexlens.analysis.render.notebook import WORST_SHOWN
from tests.lexical.test_notebook_display import parsed

#: A query text with markup: the views must show it as text.
MARKED = "frog <b>with</b> a loud call <script>alert(1)</script> living in ponds"


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory, splade):
    """The BEIR sample indexed; evaluated at gate 2 with q07's text given with markup."""
    folder = tmp_path_factory.mktemp("sections")
    index_collection(splade, sample_benchmark("imagenet_beir"), folder / "ix")
    queries_file, qrels_file = lexlens.open_index(folder / "ix").benchmark_files
    queries = {**read_queries(queries_file), "q07": MARKED}
    result = lexlens.evaluate_benchmark(
        folder / "ix", queries=queries, qrels=qrels_file, query_encoder=splade, gate_k=2
    )
    return folder / "ix", result


def _csv_rows(data: bytes) -> list[dict]:
    return list(csv.DictReader(io.StringIO(data.decode("utf-8"))))


def test_an_evaluation_shows_its_measures_worst_queries_and_causes_escaped(evaluated):
    _, result = evaluated
    doc = result.to_dict()
    html = result._repr_html_()
    fragment = parsed(html)
    assert "b" not in fragment.tags  # the query's markup, escaped
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    text = " ".join(fragment.text)
    per_query = doc["metrics"]["per_query"]
    assert any(q["text"] == MARKED for q in per_query)
    assert f"… {len(per_query) - WORST_SHOWN} more rows" in text
    assert [num(v) for v in doc["metrics"]["aggregate"].values()] == fragment.rows[0]
    for cause, count in doc["causes"].items():
        assert [cause, str(count)] == next(r[:2] for r in fragment.rows if r and r[0] == cause)
    frame = result.to_frame()
    written = _csv_rows(result.files()["per_query.csv"])
    assert list(frame["query_id"]) == [r["query_id"] for r in written]
    assert list(frame["nDCG@10"]) == [q["nDCG@10"] for q in per_query]


def test_a_counterfactual_shows_the_edit_on_the_texts_and_the_ranks(evaluated, splade):
    path, result = evaluated
    failure = next(f for f in result.failures if f.query == MARKED)
    answer = lexlens.counterfactual(
        path, MARKED, failure.relevant.id, query_encoder=splade, gate_k=2, max_calls=40
    )
    doc = answer.to_dict()
    html = answer._repr_html_()
    fragment = parsed(html)
    assert "b" not in fragment.tags and "&lt;b&gt;with&lt;/b&gt;" in html
    text = doc["counterfactual"]
    ranks = [str(text["rank_before"]), str(text["rank_after"])]
    assert ["rank", *ranks] in fragment.rows
    assert ["score", num(text["score_before"]), num(text["score_after"])] in fragment.rows
    assert text["edits"]  # q07 fails at gate 2 and an edit fixes it
    for edit in text["edits"]:
        shown = f"+{edit['word']}" if edit["op"] == "insert" else edit["word"]
        assert shown in " ".join(fragment.text)
    frame = answer.to_frame()
    written = _csv_rows(answer.files()["edits.csv"])
    assert list(frame["word_or_term"]) == [r["word_or_term"] for r in written]
    assert len(frame) == len(text["edits"]) + len(doc["terms"]["edits"])


def test_a_comparison_shows_means_marks_and_the_delta_chart(evaluated):
    path, _ = evaluated
    result = lexlens.evaluate_systems(lexlens.SystemsSpec([path], gate_ks=[768, 2]))
    doc = result.section("comparison").to_dict()  # several systems: the comparison section
    html = result._repr_html_()
    fragment = parsed(html)
    assert "svg" in fragment.tags
    assert fragment.tags.count("rect") == len(doc["per_query"])  # one bar a query
    for system in doc["systems"]:
        row = next(r for r in fragment.rows if r and r[0].startswith(system["name"]))
        assert [c.rstrip("†") for c in row[1:]] == [
            num(doc["means"][system["name"]][m]) for m in doc["measures"]
        ]
    frame = result.to_frame()
    assert list(frame["delta"]) == [t["delta"] for t in doc["table"]]
    assert list(frame.columns) == list(_csv_rows(result.files()["comparison.csv"])[0])


def _same_as_csv(frame, data: bytes) -> None:
    """``frame`` holds the CSV file's columns and cells: numbers equal to the digits written
    (Python writes a float's shortest round-trip form), texts equal, empty cells missing."""
    written = _csv_rows(data)
    header = next(csv.reader(io.StringIO(data.decode("utf-8"))))
    assert list(frame.columns) == header
    assert len(frame) == len(written)
    for row, line in zip(frame.to_dict(orient="records"), written, strict=True):
        for column, cell in line.items():
            value = row[column]
            if cell == "":
                assert value is None or value == "" or value != value, (column, value)
            elif isinstance(value, bool) or not isinstance(value, (int, float)):
                assert str(value) == cell, (column, value, cell)
            else:
                assert float(value) == float(cell), (column, value, cell)


def test_an_evaluations_failures_blame_and_causes_are_frames_of_its_csv_files(evaluated):
    _, result = evaluated
    files = result.files()
    assert result.failures and result.blame  # gate 2 fails queries, so words are blamed
    for table in ("per_query", "failures", "blame", "causes"):
        _same_as_csv(result.to_frame(table), files[f"{table}.csv"])
    failures = result.to_frame("failures")
    doc = result.to_dict()
    assert list(failures["gap"]) == [f["gap"] for f in doc["failures"]]
    assert list(failures["query_id"]) == [f["query_id"] for f in doc["failures"]]
    blame = result.to_frame("blame")
    assert list(blame["amount"]) == [b["amount"] for b in doc["blame"]]
    with pytest.raises(lexlens.LexlensError, match="has no table 'deltas'.*'failures'"):
        result.to_frame("deltas")


def test_a_comparisons_per_query_deltas_are_a_frame_of_its_csv(evaluated):
    path, _ = evaluated
    result = lexlens.evaluate_systems(lexlens.SystemsSpec([path], gate_ks=[768, 2]))
    doc = result.section("comparison").to_dict()
    deltas = result.to_frame("deltas")
    _same_as_csv(deltas, result.reported().files()["per_query_deltas.csv"])
    a, b = (s["name"] for s in doc["systems"])
    measures = doc["measures"]
    assert len(deltas) == len(measures) * len(doc["per_query"])  # one pair
    expected = [q["values"][b][m] - q["values"][a][m] for m in measures for q in doc["per_query"]]
    assert list(deltas["delta"]) == expected
    assert set(deltas["system_a"]) == {a} and set(deltas["system_b"]) == {b}
    _same_as_csv(result.to_frame("comparison"), result.reported().files()["comparison.csv"])
