"""evaluation.html shows what evaluation.json holds for each failure: both sides of the score
gap with their sums (net: the gap) and the failure's causes, and the failures per cause."""

from __future__ import annotations

import json
from html.parser import HTMLParser

import pytest

from lexlens.analysis.collections.indexing import index_collection
from lexlens.analysis.collections.store import open_index
from lexlens.analysis.core.samples import sample_benchmark
from lexlens.analysis.evaluation.evaluate import evaluate_benchmark


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


class Folds(HTMLParser):
    """The report's folding sections and, in order, the failure sections it explains: their
    query ids and whether each opens folded; the per-query table's rows; the notes."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: dict[str, bool] = {}  # details id → opens unfolded
        self.failures: list[tuple[str, bool]] = []  # (query id, opens unfolded)
        self.per_query_rows = 0
        self.notes: dict[str, str] = {}
        self._query: str | None = None
        self._table = ""
        self._note: str | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        if tag == "details" and "id" in a:
            self.sections[a["id"]] = "open" in a
        elif tag == "section" and "data-query" in a:
            self._query = a["data-query"]
        elif tag == "details" and self._query is not None:
            self.failures.append((self._query, "open" in a))
            self._query = None
        elif tag == "table":
            self._table = a.get("id", "")
        elif tag == "tr" and self._table == "per-query":
            self.per_query_rows += 1
        elif tag == "p" and a.get("id", "").startswith("more-"):
            self._note = a["id"]

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._table = ""
        if tag == "p":
            self._note = None

    def handle_data(self, data: str) -> None:
        if self._note is not None:
            self.notes[self._note] = self.notes.get(self._note, "") + data


@pytest.fixture(scope="module")
def many(tmp_path_factory, splade):
    """Several hundred queries on the imagenet_beir sample's texts (runs of their own words,
    each judged relevant to its text alone): many fail."""
    import random

    folder = tmp_path_factory.mktemp("evalmany")
    corpus = sample_benchmark("imagenet_beir") / "corpus.jsonl"
    docs = [json.loads(line) for line in corpus.read_text().splitlines() if line.strip()][:80]
    index_collection(splade, corpus, folder / "ix")
    draw = random.Random(0)
    queries, qrels = {}, {}
    for n in range(320):
        doc = docs[n % len(docs)]
        words = doc["text"].replace(",", " ").replace(".", " ").split()
        start = draw.randrange(len(words) - 4)
        queries[f"q{n}"] = " ".join(words[start : start + draw.randint(2, 4)])
        qrels[f"q{n}"] = {doc["_id"]: 1}
    from lexlens.analysis.evaluation.evaluate import evaluate

    return evaluate(open_index(folder / "ix"), queries, qrels, query_encoder=splade)


#: What evaluation.html lists (the module's LISTED_QUERIES and LISTED_FAILURES).
LISTED_QUERIES, LISTED_FAILURES = 100, 50


def test_unbounded_evaluation_html_folds_its_sections_and_lists_the_worst_first(many):
    """Hundreds of queries: evaluation.html folds each section (the failures section open,
    each failure folded to its one line), lists the worst queries and failures first, up to
    its caps, and says how many more the CSV and JSON files hold; those hold every one."""
    from lexlens.analysis.evaluation.result import worst_first

    files = many.files()
    doc = json.loads(files["evaluation.json"])
    queries, failures = doc["metrics"]["per_query"], doc["failures"]
    assert len(queries) > LISTED_QUERIES and len(failures) > LISTED_FAILURES, "needs more"
    folds = Folds()
    folds.feed(files["evaluation.html"].decode("utf-8"))
    assert folds.sections == {"queries": False, "failures": True, "words-to-blame": False}
    order = [q["id"] for q in worst_first(queries)]
    failing = {f["query_id"] for f in failures}
    assert [q for q, _ in folds.failures] == [q for q in order if q in failing][:LISTED_FAILURES]
    assert not any(unfolded for _, unfolded in folds.failures)
    assert folds.per_query_rows == 1 + LISTED_QUERIES  # the header and the worst queries
    assert folds.notes == {
        "more-queries": f"… {len(queries) - LISTED_QUERIES} more queries in per_query.csv "
        "and evaluation.json.",
        "more-failures": f"… {len(failures) - LISTED_FAILURES} more failures in failures.csv "
        "and evaluation.json.",
    }
    assert len(files["per_query.csv"].decode().strip().splitlines()) == 1 + len(queries)
    assert len(files["failures.csv"].decode().strip().splitlines()) == 1 + len(failures)
