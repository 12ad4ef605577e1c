"""Queries encoded elsewhere (``evaluate --query-vectors``): JSON lines of the very vectors
splade-tiny makes rank as the encoded queries do; Anserini's impact TSV (repeated terms)
ranks as a brute-force numpy product of its counts; a term outside the vocabulary is counted
and named; a malformed file is refused naming its line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from lexlens.analysis.collections.indexing import build_index
from lexlens.analysis.collections.store import open_index
from lexlens.analysis.evaluation.evaluate import evaluate_benchmark
from lexlens.analysis.evaluation.options import EvaluationOptions
from lexlens.analysis.retrieval.queries import QuerySpec
from lexlens.analysis.retrieval.query_vectors import read_query_vectors
from lexlens.models import InputError

TEXTS = {
    "d1": "a dog running on the beach",
    "d2": "espresso in a small cup",
    "d3": "a rocket launch into orbit",
    "d4": "the cat sleeps on a warm sofa",
    "d5": "coffee beans roasted dark",
    "d6": "puppies playing in the sand by the sea",
    "d7": "a spacecraft docking with the station",
    "d8": "kittens and a ball of yarn",
}
QUERIES = {
    "q1": "dog at the seaside",
    "q2": "strong coffee",
    "q3": "space flight",
    "q4": "a sleeping cat",
}
QRELS = {"q1": {"d1": 1, "d6": 1}, "q2": {"d2": 1, "d5": 1}, "q3": {"d3": 1}, "q4": {"d8": 1}}


@pytest.fixture(scope="module")
def bench(tmp_path_factory, splade) -> Path:
    """Eight texts indexed with splade-tiny, their queries and judgements as files."""
    folder = tmp_path_factory.mktemp("vectors")
    lines = ["id,text", *(f"{k},{v}" for k, v in TEXTS.items())]
    (folder / "items.csv").write_text("\n".join(lines) + "\n")
    build_index(splade, folder / "items.csv", folder / "ix")
    (folder / "queries.tsv").write_text("".join(f"{k}\t{v}\n" for k, v in QUERIES.items()))
    qrels = "".join(f"{q} 0 {d} {r}\n" for q, ds in QRELS.items() for d, r in ds.items())
    (folder / "qrels.txt").write_text(qrels)
    return folder


def _evaluate(bench: Path, **given):
    return evaluate_benchmark(
        bench / "ix", queries=bench / "queries.tsv", qrels=bench / "qrels.txt", top=8, **given
    )


def _brute_force(bench: Path, vectors: dict[str, np.ndarray]) -> dict[str, list[str]]:
    """Each query's items scoring above 0, by score then row (numpy over the CSR read)."""
    ix = open_index(bench / "ix")
    dense = ix.matrix().toarray().astype(np.float64)
    ids = [str(i) for i in ix.column("id")]
    out = {}
    for q, v in vectors.items():
        scores = dense @ v.astype(np.float64)
        rows = sorted(np.flatnonzero(scores > 0), key=lambda r: (-scores[r], r))
        out[q] = [ids[r] for r in rows]
    return out


def test_json_lines_of_the_encoded_vectors_rank_as_the_encoded_queries(bench, splade):
    gate = EvaluationOptions().gate_k
    vectors = QuerySpec(splade, "parametric", gate).vectors(list(QUERIES.values()))
    with open(bench / "q.jsonl", "w") as out:
        for qid, v in zip(QUERIES, vectors, strict=True):
            terms = {splade.vocab[t]: float(v[t]) for t in np.flatnonzero(v)}
            out.write(json.dumps({"id": qid, "vector": terms}) + "\n")
    encoded = _evaluate(bench)
    read = _evaluate(bench, query_vectors=bench / "q.jsonl")
    assert read.run == encoded.run
    assert read.metrics["aggregate"] == encoded.metrics["aggregate"]
    assert read.settings["query_encoder"] == "pre-encoded"
    assert [q["text"] for q in read.metrics["per_query"]] == list(QUERIES.values())
    expected = _brute_force(bench, dict(zip(QUERIES, vectors, strict=True)))
    assert {q: [d for d, _ in pairs] for q, pairs in read.run.items()} == expected


def test_an_impact_tsv_ranks_by_its_counts_and_names_unknown_terms(bench, splade):
    counts = {
        "q1": {"dog": 3, "beach": 2, "##s": 1},
        "q2": {"coffee": 4, "cup": 1},
        "q3": {"rocket": 2, "space": 2, "zzzqx": 5},
    }
    with open(bench / "q.tsv", "w") as out:
        for qid, terms in counts.items():
            words = [t for t, n in terms.items() for _ in range(n)]
            out.write(f"{qid}\t{' '.join(words)}\n")
    result = evaluate_benchmark(
        bench / "ix", qrels=bench / "qrels.txt", query_vectors=bench / "q.tsv", top=8
    )
    vocab = {t: i for i, t in enumerate(splade.vocab)}
    dense = {}
    for qid, terms in counts.items():
        v = np.zeros(len(splade.vocab))
        for term, n in terms.items():
            if term in vocab:
                v[vocab[term]] = n
        dense[qid] = v
    assert {q: [d for d, _ in p] for q, p in result.run.items()} == _brute_force(bench, dense)
    assert any(
        "5 terms of 1 queries are not in the collection's vocabulary" in n and "'zzzqx' (5)" in n
        for n in result.notes
    )
    assert any("q4" in n for n in result.notes)  # a judged query without a vector is named
    assert result.metrics["per_query"][0]["text"] == "dog beach ##s"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            '{"id": "q1", "vector": {"dog": 1.0}}\n{"id": "q2", "vector": \n',
            r"q\.jsonl:2: not JSON",
        ),
        ('{"id": "q1", "vector": {"dog": -1.0}}\n', r"q\.jsonl:1: a weight must be a finite"),
        ('{"id": "q1", "vector": {"dog": "high"}}\n', r"q\.jsonl:1: a weight that is not a number"),
        (
            '{"id": "q1", "vector": {"dog": 1}}\n\n{"id": "q1", "vector": {}}\n',
            r"q\.jsonl:3: the query 'q1' appears twice",
        ),
        ('{"id": "q 1", "vector": {}}\n', r"q\.jsonl:1: the query id must be"),
        ('{"vector": {"dog": 1}}\n', r"q\.jsonl:1: the query id must be"),
        ('{"id": "q1", "terms": {"dog": 1}}\n', r'q\.jsonl:1: no "vector" object'),
        ("\n\n", r"holds no query"),
    ],
)
def test_a_malformed_json_lines_file_is_refused_naming_its_line(tmp_path, content, message):
    path = tmp_path / "q.jsonl"
    path.write_text(content)
    with pytest.raises(InputError, match=message) as refused:
        read_query_vectors(path, ["dog", "cat"])
    assert "\n" not in str(refused.value)


def test_a_tsv_line_without_a_tab_is_refused_naming_it(tmp_path):
    path = tmp_path / "q.tsv"
    path.write_text("q1\tdog dog cat\nq2 dog\n")
    with pytest.raises(InputError, match=r"q\.tsv:2: no tab"):
        read_query_vectors(path, ["dog", "cat"])


def test_repeated_terms_sum_and_the_vector_is_over_the_vocabulary(tmp_path):
    path = tmp_path / "q.tsv"
    path.write_text("q1\tcat dog cat cat\n")
    read = read_query_vectors(path, ["dog", "cat", "bird"])
    assert read.vector("q1").tolist() == [1.0, 3.0, 0.0]


def test_the_command_refuses_a_bad_file_in_one_line(bench, cli, tmp_path):
    bad = tmp_path / "q.jsonl"
    bad.write_text('{"id": "q1", "vector": {"dog": NaN}}\n')
    ran = cli(
        "evaluate",
        "--index",
        bench / "ix",
        "--qrels",
        bench / "qrels.txt",
        "--query-vectors",
        bad,
        "--out",
        tmp_path / "out",
    )
    assert ran.returncode == 2
    assert "q.jsonl:1: a weight must be a finite" in ran.stderr
    assert len(ran.stderr.strip().splitlines()) == 1


def test_query_vectors_are_refused_beside_what_they_replace(bench, tmp_path):
    path = tmp_path / "q.tsv"
    path.write_text("q1\tdog\n")
    with pytest.raises(InputError, match="give no --query-encoder"):
        evaluate_benchmark(
            bench / "ix", qrels=bench / "qrels.txt", query_vectors=path, query_encoder="splade-tiny"
        )
