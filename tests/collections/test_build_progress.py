"""A build's progress counts the source's items, not its judgements: on a BEIR folder of
2,000 documents and 300 judged queries it only grows, and its total is the number of lines
of corpus.jsonl counted here independently."""

from __future__ import annotations

import json
import re

from lexlens.analysis.collections.indexing import build_index
from lexlens.analysis.core.samples import sample_path
from lexlens.analysis.datasets.readers import open_benchmark
from lexlens.analysis.datasets.sources import count_items, count_lines, open_source

WORDS = ["red", "fox", "quiet", "harbour", "engine", "maple", "violin", "granite", "comet"]


def _beir(folder, docs: int = 2000, queries: int = 300):
    """A BEIR folder: ``docs`` short documents, ``queries`` queries judging one each."""
    (folder / "qrels").mkdir(parents=True)
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as out:
        for i in range(docs):
            text = " ".join(WORDS[(i * j + 1) % len(WORDS)] for j in range(1, 4))
            out.write(json.dumps({"_id": f"d{i}", "title": f"doc {i}", "text": text}) + "\n")
    with open(folder / "queries.jsonl", "w", encoding="utf-8") as out:
        for q in range(queries):
            out.write(json.dumps({"_id": f"q{q}", "text": WORDS[q % len(WORDS)]}) + "\n")
    rows = "".join(f"q{q}\td{q * 5}\t1\n" for q in range(queries))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + rows)
    return folder


def _lines(path) -> int:
    """The lines of a file, counted by reading it whole (not the package's counter)."""
    return len(path.read_text(encoding="utf-8").splitlines())


def test_silent_wrong_a_beir_folder_counts_its_corpus_not_its_judgements(tmp_path):
    folder = _beir(tmp_path / "bench")
    source = open_source(open_benchmark(folder))
    assert count_items(source) == _lines(folder / "corpus.jsonl") == 2000
    packaged = sample_path("benchmarks/imagenet_beir")
    assert count_items(open_source(open_benchmark(packaged))) == _lines(packaged / "corpus.jsonl")


def test_unbounded_a_large_file_is_counted_from_a_bounded_read(tmp_path):
    path = tmp_path / "big.jsonl"
    path.write_text(
        "".join(f'{{"_id": "d{i}", "text": "{"x" * (i % 50)}"}}\n' for i in range(20000))
    )
    exact = _lines(path)
    assert count_lines(path) == exact
    estimate = count_lines(path, limit=64 * 1024)  # a twentieth of the file read
    assert abs(estimate - exact) / exact < 0.05
    path.write_text("one\ntwo\nthree")  # a last line without a newline counts
    assert count_lines(path) == 3


def test_silent_wrong_build_progress_never_runs_backwards(splade, tmp_path):
    folder = _beir(tmp_path / "bench")
    seen: list[tuple[float, str]] = []
    result = build_index(
        splade,
        folder,
        tmp_path / "ix",
        batch_size=256,
        progress=lambda fraction, message: seen.append((fraction, message)),
    )
    fractions = [f for f, _ in seen]
    assert result.items == 2000
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    totals = {int(m.group(1)) for _, text in seen if (m := re.match(r"\d+/(\d+):", text))}
    assert totals == {_lines(folder / "corpus.jsonl")}
    assert seen[-1][1] == "2000/2000: 2000 items indexed"
