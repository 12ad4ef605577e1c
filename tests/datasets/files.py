"""Benchmark files the reader tests write (each test writes what it reads), and the items a
benchmark streams, read and skipped apart."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from lexlens.analysis.datasets.items import Skipped, SourceItem


def items_of(bench) -> tuple[list[SourceItem], list[Skipped]]:
    """The items a benchmark streams, and its skipped notes, apart."""
    out = list(bench.items())
    return [i for i in out if isinstance(i, SourceItem)], [s for s in out if isinstance(s, Skipped)]


def jsonl(rows: Iterable[dict]) -> str:
    """JSON lines: one object a line."""
    return "".join(json.dumps(row) + "\n" for row in rows)


def beir_folder(folder: Path, corpus: str, queries: str, qrels: str | dict[str, str]) -> Path:
    """A BEIR folder: corpus.jsonl, queries.jsonl and qrels/SPLIT.tsv (a text alone: test)."""
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(corpus)
    (folder / "queries.jsonl").write_text(queries)
    for split, text in ({"test": qrels} if isinstance(qrels, str) else qrels).items():
        (folder / "qrels" / f"{split}.tsv").write_text(text)
    return folder


def beir_of_tables(
    folder: Path, corpus: dict[str, str], queries: dict[str, str], qrels: dict[str, dict[str, int]]
) -> Path:
    """A BEIR folder from tables: id → text (no titles), query id → text, query → {doc: grade}."""
    return beir_folder(
        folder,
        jsonl({"_id": i, "title": "", "text": t} for i, t in corpus.items()),
        jsonl({"_id": q, "text": t} for q, t in queries.items()),
        "query-id\tcorpus-id\tscore\n"
        + "".join(f"{q}\t{d}\t{r}\n" for q, docs in qrels.items() for d, r in docs.items()),
    )


def msmarco_files(folder: Path, collection: str | bytes, queries: str | bytes, qrels: str) -> Path:
    """MS MARCO's files of the dev split in ``folder``; returns collection.tsv's path."""
    for name, content in (
        ("collection.tsv", collection),
        ("queries.dev.tsv", queries),
        ("qrels.dev.tsv", qrels),
    ):
        path = folder / name
        path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    return folder / "collection.tsv"
