"""evaluation.html shows what evaluation.json holds for each failure: both sides of the score
gap with their sums (net: the gap) and the failure's causes, and the failures per cause."""

from __future__ import annotations

import json
from html.parser import HTMLParser

import pytest

from lexlens.analysis.benchmark.evaluate import evaluate_benchmark
from lexlens.analysis.collections.indexing import index_collection
from lexlens.analysis.collections.store import open_index
from lexlens.analysis.core.samples import sample_benchmark


class FailureReader(HTMLParser):
    """Per failure section (by query id): its side totals, gap and causes, read from the
    markup's exact values; and the per-cause counts of the summary table."""

    def __init__(self) -> None:
        super().__init__()
        self.failures: dict[str, dict] = {}
        self.counts: dict[str, int] = {}
        self.current: dict | None = None
        self.reading: str | None = None  # "cause" or a counted cause

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        if tag == "section" and "data-query" in a:
            self.current = self.failures[a["data-query"]] = {"sides": {}, "causes": []}
        elif self.current is not None and "side-total" in (a.get("class") or ""):
            self.current["sides"][a["data-side"]] = float(a["data-value"])
        elif self.current is not None and a.get("class") == "gap":
            self.current["gap"] = float(a["data-value"])
        elif self.current is not None and a.get("class") == "cause":
            self.reading = "cause"
        elif "data-cause" in a:
            self.reading = a["data-cause"]

    def handle_endtag(self, tag: str) -> None:
        if tag == "section":
            self.current = None
        if tag in ("span", "td"):
            self.reading = None

    def handle_data(self, data: str) -> None:
        if self.reading == "cause":
            self.current["causes"].append(data)
        elif self.reading is not None:
            self.counts[self.reading] = int(data)


@pytest.fixture(scope="module")
def files(tmp_path_factory, splade):
    """The packaged imagenet_beir sample indexed with splade-tiny, evaluated at depth 10."""
    folder = tmp_path_factory.mktemp("evalhtml")
    index_collection(splade, sample_benchmark("imagenet_beir"), folder / "ix")
    result = evaluate_benchmark(open_index(folder / "ix"), top=10, query_encoder=splade)
    return result.files()


def test_silent_wrong_evaluation_html_shows_both_sides_and_causes(files):
    doc = json.loads(files["evaluation.json"])
    reader = FailureReader()
    reader.feed(files["evaluation.html"].decode("utf-8"))
    failures = doc["failures"]
    assert failures, "the sample must fail some queries for this test to say anything"
    with_sides = [f for f in failures if f["favour_nonrelevant"] is not None]
    assert with_sides  # failures whose two items are both held: the gap split by word
    assert set(reader.failures) == {f["query_id"] for f in failures}
    for f in failures:
        shown = reader.failures[f["query_id"]]
        assert shown["causes"] == f["causes"] and f["causes"], f["query_id"]
        expected = {
            key: f[f"favour_{key}"]["total"]
            for key in ("nonrelevant", "relevant")
            if f[f"favour_{key}"] is not None
        }
        assert shown["sides"] == expected, f["query_id"]
        if expected:
            assert shown["gap"] == f["gap"]
            assert expected["nonrelevant"] >= 0 >= expected.get("relevant", 0.0)
            assert sum(expected.values()) == pytest.approx(f["gap"], abs=1e-9)
    assert reader.counts == doc["causes"]
    by_hand = {c: sum(c in f["causes"] for f in failures) for c in doc["causes"]}
    assert reader.counts == by_hand
