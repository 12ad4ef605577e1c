"""BEIR folders: ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl`` (``_id``,
``text``) and ``qrels/{split}.tsv`` (a header line, then ``query-id corpus-id score``).

An item's text is its title and text joined by a space when the title is not empty, as
BEIR's own evaluations give them to a model.
"""

from __future__ import annotations

from pathlib import Path

from lexlens.analysis.core.inputs import folder_file, json_line
from lexlens.analysis.datasets.dataset import Benchmark, corpus_items, file_stamp, pick_split
from lexlens.analysis.datasets.items import Skipped, SourceItem
from lexlens.analysis.datasets.trec import Problems, read_qrels, read_queries
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


def open_beir(folder: Path, *, split: str | None = None) -> Benchmark:
    """A BEIR folder's split (default ``test``, else the only one); each file it reads
    stays inside the folder once links are followed (:func:`folder_file`)."""
    qrels_dir = folder / "qrels"
    splits = sorted(p.stem for p in qrels_dir.glob("*.tsv")) if qrels_dir.is_dir() else []
    if not splits:
        raise InputError(f"{folder}: no qrels/*.tsv (a BEIR folder has qrels/test.tsv, …)")
    chosen = pick_split(splits, split, str(folder))
    corpus = folder_file(folder, "corpus.jsonl")
    queries_path = folder / "queries.jsonl"
    if not queries_path.is_file():
        raise InputError(f"{folder}: no queries.jsonl")
    queries_path = folder_file(folder, "queries.jsonl")
    qrels_path = folder_file(folder, f"qrels/{chosen}.tsv")
    problems = Problems()
    where: dict[str, str] = {}
    queries = read_queries(queries_path, problems, where=where)
    qrels = read_qrels(qrels_path, problems)
    label = str(corpus)
    bench = Benchmark(
        kind="beir",
        label=str(folder),
        root=folder,
        split=chosen,
        splits=splits,
        queries=queries,
        qrels=qrels,
        read_items=lambda found: corpus_items(corpus, label, found, _document),
        fingerprint_parts=lambda: [
            file_stamp(corpus),
            file_stamp(queries_path),
            file_stamp(qrels_path),
        ],
        problems=problems,
        query_where=lambda qid: where.get(qid, str(queries_path)),
    )
    return bench
