"""MS MARCO style TSV files: ``collection.tsv`` (``pid<TAB>text``), ``queries.{split}.tsv``
(``qid<TAB>text``) and TREC qrels (``qrels.{split}.tsv`` or ``*.qrels``: ``qid 0 docid
rel``), given as their folder or as the collection file. The collection is streamed (the
real one holds 8.8 million passages) in lines that end at ``\n`` only: a bare ``\r`` inside
a passage stays in it."""

from __future__ import annotations

from pathlib import Path

from lexlens.analysis.core.inputs import folder_file
from lexlens.analysis.datasets.dataset import Benchmark, corpus_items, file_stamp, pick_split
from lexlens.analysis.datasets.items import SourceItem
from lexlens.analysis.datasets.trec import Problems, read_qrels, read_queries
from lexlens.models.base import InputError


def _passage(text: str, label: str, number: int) -> SourceItem | str:
    """A ``pid<TAB>text`` line's passage, or why it is none."""
    pid, tab, passage = text.partition("\t")
    if not tab or not pid.strip() or not passage.strip():
        return "expected pid<TAB>text"
    return SourceItem(pid.strip(), text=passage.strip(), where=f"{label}:{number}")


def _split_of(name: str, prefix: str) -> str | None:
    stem = name[len(prefix) :] if name.startswith(prefix) else None
    return stem.rsplit(".", 1)[0] if stem else None


def open_msmarco(path: Path, *, split: str | None = None) -> Benchmark:
    """The collection and one split's queries and qrels (default ``dev``, else the only one);
    each file read stays inside the folder once links are followed (:func:`folder_file`)."""
    folder = path if path.is_dir() else path.parent
    if not (folder / "collection.tsv").is_file():
        raise InputError(f"{folder}: no collection.tsv")
    collection = path if path.is_file() else folder_file(folder, "collection.tsv")
    query_files = {_split_of(p.name, "queries."): p for p in sorted(folder.glob("queries.*.tsv"))}
    qrels_files = {_split_of(p.name, "qrels."): p for p in sorted(folder.glob("qrels.*.tsv"))}
    qrels_files.update({p.stem: p for p in sorted(folder.glob("*.qrels"))})
    splits = sorted(s for s in query_files if s and s in qrels_files)
    if not splits:
        raise InputError(
            f"{folder}: no split with both queries.SPLIT.tsv and qrels.SPLIT.tsv (or SPLIT.qrels)"
        )
    chosen = pick_split(splits, split, str(folder), default="dev")
    query_files[chosen] = folder_file(folder, query_files[chosen].name)
    qrels_files[chosen] = folder_file(folder, qrels_files[chosen].name)
    problems = Problems()
    where: dict[str, str] = {}
    queries = read_queries(query_files[chosen], problems, where=where)
    qrels = read_qrels(qrels_files[chosen], problems)
    label = str(collection)
    return Benchmark(
        kind="msmarco",
        label=str(folder),
        root=folder,
        split=chosen,
        splits=splits,
        queries=queries,
        qrels=qrels,
        read_items=lambda found: corpus_items(collection, label, found, _passage),
        fingerprint_parts=lambda: [
            file_stamp(collection),
            file_stamp(query_files[chosen]),
            file_stamp(qrels_files[chosen]),
        ],
        problems=problems,
        query_where=lambda qid: where.get(qid, str(query_files[chosen])),
    )
