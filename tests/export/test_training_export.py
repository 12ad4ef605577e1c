"""``lexlens export --format hard-negatives`` and ``--format expansions`` on the packaged BEIR
sample evaluated with splade-tiny at gate 2 (so that queries fail): every line read back
from the stored evaluation — its run.trec, its qrels, its failures — and nothing ranked or
encoded again; the hard-negative file loads as a Hugging Face dataset."""

from __future__ import annotations

import json
import re

import pytest

from lexlens.analysis.collections.indexing import index_collection
from lexlens.analysis.core.samples import sample_benchmark
from lexlens.analysis.datasets.trec import read_qrels, read_run

BEIR = sample_benchmark("imagenet_beir")


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory, splade):
    """The sample indexed and evaluated at gate 2 by ``lexlens evaluate --out``."""
    from lexlens.app.cli import main

    folder = tmp_path_factory.mktemp("training")
    index_collection(splade, BEIR, folder / "ix")
    assert (
        main(
            [
                "evaluate",
                "--index",
                str(folder / "ix"),
                "--gate-k",
                "2",
                "--out",
                str(folder / "ev"),
            ]
        )
        == 0
    )
    return folder


def _corpus_texts() -> dict[str, str]:
    """Each BEIR item's text as a collection stores it: its title, then its text."""
    texts = {}
    for line in (BEIR / "corpus.jsonl").read_text().splitlines():
        doc = json.loads(line)
        texts[doc["_id"]] = " ".join(t for t in (doc.get("title"), doc["text"]) if t)
    return texts


def _no_ranking(monkeypatch):
    """Encoding a query or ranking the collection fails the test: nothing is recomputed."""
    from lexlens.analysis.retrieval.queries import QuerySpec
    from lexlens.analysis.retrieval.scorer import Scorer

    def refuse(*args, **kwargs):
        raise AssertionError("an export from a stored evaluation encoded or ranked again")

    for owner, name in (
        (QuerySpec, "vectors"),
        (QuerySpec, "encode"),
        (Scorer, "rank"),
        (Scorer, "rank_of"),
    ):
        monkeypatch.setattr(owner, name, refuse)


def test_hard_negatives_outrank_their_positive_and_load_as_a_dataset(evaluated, cli, monkeypatch):
    datasets = pytest.importorskip("datasets")
    _no_ranking(monkeypatch)
    out = evaluated / "hn"
    run = cli(
        "export",
        "--index",
        evaluated / "ix",
        "--format",
        "hard-negatives",
        "--evaluation",
        evaluated / "ev",
        "--negatives",
        "3",
        "--out",
        out,
    )
    assert run.returncode == 0, run.stderr
    data = datasets.Dataset.from_json(str(out / "hard_negatives.jsonl"))
    assert {"query", "positive", "negatives"} <= set(data.column_names)
    assert data.features["negatives"].feature.dtype == "string"
    document = json.loads((evaluated / "ev" / "evaluation.json").read_text())
    failures = {f["query_id"]: f for f in document["failures"]}
    assert len(data) == len(failures) > 5
    ranking = read_run(evaluated / "ev" / "run.trec")
    qrels = read_qrels(BEIR / "qrels" / "test.tsv")
    texts = _corpus_texts()
    for row in data:
        q = row["query_id"]
        listed = ranking[q]
        positive = row["positive_rank"]
        assert qrels[q].get(row["positive_id"], 0) > 0
        assert row["positive"] == texts[row["positive_id"]]
        assert row["query"] == failures[q]["query"]
        above = listed if positive is None else listed[: positive - 1]
        assert 1 <= len(row["negatives"]) == min(3, len(above))
        for text, item, rank, score in zip(
            row["negatives"],
            row["negative_ids"],
            row["negative_ranks"],
            row["negative_scores"],
            strict=True,
        ):
            assert qrels[q].get(item, 0) <= 0  # not relevant
            assert positive is None or rank < positive  # outranks the positive
            assert listed[rank - 1] == (item, score)  # run.trec's rank and score
            assert text == texts[item]
        assert row["negative_ranks"] == list(range(1, len(row["negatives"]) + 1))  # hardest first
        if positive is not None and positive <= len(listed):
            assert listed[positive - 1] == (row["positive_id"], row["positive_score"])
    triplets = data.select_columns(["query", "positive", "negatives"])
    assert triplets.column_names == ["query", "positive", "negatives"]


def test_expansions_are_the_query_words_each_relevant_item_lacks(evaluated, cli, monkeypatch):
    _no_ranking(monkeypatch)
    out = evaluated / "exp"
    run = cli(
        "export",
        "--index",
        evaluated / "ix",
        "--format",
        "expansions",
        "--evaluation",
        evaluated / "ev",
        "--out",
        out,
    )
    assert run.returncode == 0, run.stderr
    lines = [json.loads(x) for x in (out / "expansions.jsonl").read_text().splitlines()]
    assert lines
    texts = _corpus_texts()
    qrels = read_qrels(BEIR / "qrels" / "test.tsv")
    for item in lines:
        spelled = set(re.findall(r"[a-z0-9]+", texts[item["id"]].lower()))
        union = []
        for query in item["queries"]:
            asked = set(re.findall(r"[a-z0-9]+", query["query"].lower()))
            assert qrels[query["query_id"]].get(item["id"], 0) > 0
            assert query["missing_words"] and set(query["missing_words"]) <= asked - spelled
            union += [w for w in query["missing_words"] if w not in union]
        assert item["missing_words"] == union and item["text"] == texts[item["id"]]


def test_traceback_training_export_refuses_in_one_line(evaluated, cli, three_texts_index):
    ix, ev = evaluated / "ix", evaluated / "ev"
    cases = [
        (["--format", "hard-negatives"], "give --evaluation"),
        (["--format", "trec-run", "--evaluation", ev], "--evaluation applies to"),
        (["--format", "expansions", "--evaluation", evaluated], "no evaluation.json there"),
        (["--format", "expansions", "--evaluation", ev, "--queries", ev / "run.trec"], "--queries"),
    ]
    for flags, message in cases:
        run = cli("export", "--index", ix, "--out", evaluated / "refused", *flags)
        assert run.returncode == 2 and message in run.stderr, (flags, run.stderr)
        assert len(run.stderr.strip().splitlines()) == 1
    other = cli(
        "export",
        "--index",
        three_texts_index,
        "--format",
        "expansions",
        "--evaluation",
        ev,
        "--out",
        evaluated / "refused",
    )
    assert (
        other.returncode == 2 and "is not the collection the evaluation evaluated" in other.stderr
    )
    assert not (evaluated / "refused").exists()
