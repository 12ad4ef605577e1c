"""BEIR folders: ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl`` (``_id``,
``text``) and ``qrels/{split}.tsv`` (a header line, then ``query-id corpus-id score``).

An item's text is its title and text joined by a space when the title is not empty, as
BEIR's own evaluations give them to a model.
"""

from __future__ import annotations

import json
from pathlib import Path

from lexlens.analysis.benchmark.dataset import (
    Benchmark,
    corpus_items,
    file_stamp,
    pick_split,
    query_line,
)
from lexlens.analysis.benchmark.trec import Problems, lines, read_qrels, read_queries
from lexlens.analysis.collections.items import Skipped, SourceItem
from lexlens.analysis.core.inputs import json_line, load_json
from lexlens.models.base import InputError


def _document(text: str, label: str, number: int) -> SourceItem | Skipped | str:
    """A ``corpus.jsonl`` line's document (title and text joined), or why it is none."""
    where = f"{label}:{number}"
    row, why = json_line(text, label, number)
    if why:
        return why
    doc_id = row.get("_id") if isinstance(row, dict) else None
    body = row.get("text") if isinstance(row, dict) else None
    title = row.get("title", "") if isinstance(row, dict) else ""
    if not isinstance(doc_id, (str, int)) or not isinstance(body, str):
        return "needs '_id' and a string 'text'"
    title = title if isinstance(title, str) else ""
    joined = f"{title.strip()} {body.strip()}".strip()
    if not joined:
        return Skipped(where, "empty title and text")
    return SourceItem(str(doc_id), text=joined, where=where)


def _too_deep(path: Path) -> InputError:
    """The one line naming the first line of a JSON-lines file nested too deeply."""
    for number, text in lines(path, str(path), Problems()):
        try:
            load_json(text, str(path), number)
        except InputError as exc:
            return exc
        except json.JSONDecodeError:
            continue
    return InputError(f"{path}: JSON nested too deeply: refused")


def open_beir(folder: Path, *, split: str | None = None) -> Benchmark:
    """A BEIR folder's split (default ``test``, else the only one)."""
    qrels_dir = folder / "qrels"
    splits = sorted(p.stem for p in qrels_dir.glob("*.tsv")) if qrels_dir.is_dir() else []
    if not splits:
        raise InputError(f"{folder}: no qrels/*.tsv (a BEIR folder has qrels/test.tsv, …)")
    chosen = pick_split(splits, split, str(folder))
    problems = Problems()
    queries_path = folder / "queries.jsonl"
    if not queries_path.is_file():
        raise InputError(f"{folder}: no queries.jsonl")
    try:
        queries = read_queries(queries_path, problems)
    except RecursionError:  # json.loads gave up on a line nested too deeply
        raise _too_deep(queries_path) from None
    qrels = read_qrels(qrels_dir / f"{chosen}.tsv", problems)
    corpus = folder / "corpus.jsonl"
    label = str(corpus)
    bench = Benchmark(
        kind="beir", label=str(folder), root=folder, split=chosen, splits=splits,
        queries=queries, qrels=qrels,
        read_items=lambda found: corpus_items(corpus, label, found, _document),
        fingerprint_parts=lambda: [file_stamp(corpus), file_stamp(queries_path),
                                   file_stamp(qrels_dir / f"{chosen}.tsv")],
        problems=problems, query_where=lambda qid: query_line(queries_path, qid),
    )  # fmt: skip
    return bench
