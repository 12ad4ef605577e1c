"""Exports for other engines: Anserini's integer impacts, Seismic's JSONL (a real Seismic
index built from it finds the same top 10), and the TREC run."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lexlens.analysis.datasets.trec import read_run
from lexlens.analysis.evaluation.evaluate import evaluate
from lexlens.analysis.export.export import export_index
from lexlens.models.base import InputError
from tests.evaluation.test_evaluate import QRELS, QUERIES, index  # noqa: F401  (fixture)


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_anserini_impacts_are_the_weights_times_the_scale(index, tmp_path, splade):  # noqa: F811
    result = export_index(index, tmp_path / "a", format="anserini", queries=QUERIES, scale=100)
    assert result.written == {"docs.jsonl": len(index), "queries.tsv": 6, "queries.jsonl": 6}
    docs = _lines(tmp_path / "a" / "docs.jsonl")
    ids = [str(i) for i in index.column("id")]
    for row, doc in enumerate(docs):
        assert doc["id"] == ids[row] and doc["contents"] == index.meta([row])[0]["text"]
        cols, vals = index.row(row)
        expected = {
            index.vocab[c]: int(round(float(v) * 100)) for c, v in zip(cols, vals, strict=True)
        }
        assert doc["vector"] == {t: n for t, n in expected.items() if n}
    # At the default scale (100) the TSV's repeats are the JSONL's impacts: the two query
    # forms Anserini reads (repeats for -impact -pretokenized, weights for JsonStringVector).
    tsv = (tmp_path / "a" / "queries.tsv").read_text().splitlines()
    vectors = {q["qid"]: q["vector"] for q in _lines(tmp_path / "a" / "queries.jsonl")}
    assert sorted(vectors) == sorted(QUERIES)
    for line in tsv:
        qid, text = line.split("\t")
        counts = {}
        for token in text.split():
            counts[token] = counts.get(token, 0) + 1
        assert counts == vectors[qid]


def test_a_seismic_index_of_the_export_finds_the_same_top_10(index, tmp_path, splade):  # noqa: F811
    seismic = pytest.importorskip("seismic", reason="pyseismic-lsr is an optional extra")
    export_index(index, tmp_path / "s", format="seismic", queries=QUERIES)
    export_index(index, tmp_path / "t", format="trec-run", queries=QUERIES, top=10)
    ours = read_run(tmp_path / "t" / "run.trec")
    # no pruning: an exact search
    engine = seismic.SeismicIndex.build(
        str(tmp_path / "s" / "docs.jsonl"),
        n_postings=10_000,
        centroid_fraction=1.0,
        min_cluster_size=1,
        summary_energy=1.0,
        max_fraction=100.0,
        doc_cut=10_000,
    )
    kind = seismic.get_seismic_string()
    queries = _lines(tmp_path / "s" / "queries.jsonl")
    found = engine.batch_search(
        np.array([q["id"] for q in queries], dtype=kind),
        [np.array(list(q["vector"]), dtype=kind) for q in queries],
        [np.array(list(q["vector"].values()), dtype=np.float32) for q in queries],
        k=10,
        query_cut=10_000,
        heap_factor=100.0,
    )
    # Results come back per query (not necessarily in the order asked): keyed by query id.
    by_query = {hits[0][0]: [doc for _, _, doc in hits] for hits in found if hits}
    same = 0
    for query in queries:
        theirs = by_query.get(query["id"], [])
        mine = [doc for doc, _ in ours.get(query["id"], [])]
        if not mine:  # no item shares a term with the query: nothing found on either side
            assert theirs == []
            continue
        assert len(set(theirs) & set(mine)) / len(mine) >= 0.99, (theirs, mine)
        same += theirs == mine
    assert same >= len(queries) - 1  # order too (one near-tie may swap in float16)


def test_the_trec_run_is_the_evaluations_run(index, tmp_path, splade):  # noqa: F811
    export_index(index, tmp_path / "t", format="trec-run", queries=QUERIES, top=5)
    result = evaluate(index, QUERIES, QRELS, top=5, query_encoder=splade)
    assert (tmp_path / "t" / "run.trec").read_bytes() == result.files()["run.trec"]


def test_an_export_never_writes_into_the_index(index):  # noqa: F811
    with pytest.raises(InputError, match="inside the index folder"):
        export_index(index, index.path / "export", format="seismic")
