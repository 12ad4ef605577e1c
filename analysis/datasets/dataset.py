"""A benchmark as researchers keep it, read as a collection's items plus its queries and
relevance judgements — nothing encoded.

:func:`lexlens.analysis.datasets.readers.open_benchmark` tells the format from the path (or takes ``kind``): a BEIR folder
(:mod:`.beir`), MS MARCO's TSV files (:mod:`.msmarco`), a Karpathy split JSON
(:mod:`.karpathy`), a Hugging Face dataset saved on disk or Parquet/Arrow files
(:mod:`.hf`), or an ``ir_datasets`` id already in the local cache (:mod:`.irds`). A
:class:`Benchmark` streams its items (``SourceItem`` or ``Skipped``, as any source of
``lexlens index``), and holds the queries, the judgements, the split and every problem met
(file and line, one line each); readable items are always kept. While the items stream,
an id a TREC file cannot hold (empty, or with whitespace) or a repeated id is skipped and
named (:func:`~lexlens.analysis.datasets.items.checked_items`, the check every source
passes through), and judged items the corpus lacks are counted at the end. A query id a
TREC file cannot hold is a problem naming its file and line, and the query is dropped.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lexlens.analysis.core.inputs import MAX_LINE_BYTES, text_lines
from lexlens.analysis.datasets.items import Skipped, SourceItem, checked_items, id_problem
from lexlens.analysis.datasets.trec import Problems
from lexlens.models.base import InputError


@dataclass
class Benchmark:
    """Items (streamed), queries, judgements and problems of one split of a benchmark."""

    kind: str
    label: str  # as the user named it
    root: Path  # image paths of the items are relative to it
    split: str | None
    splits: list[str]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    read_items: Callable[[Problems], Iterator[SourceItem | Skipped]]
    fingerprint_parts: Callable[[], list[str]]
    has_images: bool = False
    problems: Problems = field(default_factory=Problems)  # of the queries and judgements
    size_hint: int = 0  # items expected (for progress), 0 = unknown
    item_problems: Problems = field(default_factory=Problems)  # of the last pass over the items
    #: Where a query was read ("file:line"), for the messages that name it.
    query_where: Callable[[str], str] | None = None

    @property
    def has_texts(self) -> bool:
        return not self.has_images

    def items(self) -> Iterator[SourceItem | Skipped]:
        """The items in order, through :func:`checked_items` (an empty id, an id with
        whitespace or a repeated id is skipped and named); at the end, the judged items the
        corpus lacks are added to the problems."""
        problems = self.item_problems = Problems()
        judged = {d for rel in self.qrels.values() for d in rel}
        found: set[str] = set()

        def named(skipped: Skipped) -> None:
            problems.add(skipped.file, 0, skipped.reason)

        for item in checked_items(self.read_items(problems), named):
            if isinstance(item, SourceItem) and item.id in judged:
                found.add(item.id)
            yield item
        missing = sorted(judged - found)
        if missing:
            shown = ", ".join(missing[:5])
            problems.add(
                self.label, 0, f"{len(missing)} judged items are not in the corpus (e.g. {shown})"
            )

    def fingerprint(self) -> str:
        """A cheap fingerprint: the sizes and times of the files read, the split, options."""
        digest = hashlib.sha256(f"{self.kind}\0{self.split}\0".encode())
        for part in self.fingerprint_parts():
            digest.update(part.encode("utf-8") + b"\0")
        return digest.hexdigest()

    def problem_lines(self) -> list[str]:
        """Every problem met so far (the queries and judgements, then the last pass over the
        items), one line each."""
        return self.problems.lines + self.item_problems.lines

    def describe(self) -> dict:
        """Counts for a card or a message."""
        return {
            "kind": self.kind,
            "split": self.split,
            "splits": self.splits,
            "queries": len(self.queries),
            "judged_queries": len(self.qrels),
            "judgements": sum(len(v) for v in self.qrels.values()),
            "problems": self.problems.count + self.item_problems.count,
        }


def file_stamp(path: Path) -> str:
    """A file's name, size and modification time (for fingerprints)."""
    try:
        st = path.stat()
    except OSError:
        return f"{path}:missing"
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"


def check_queries_and_qrels(bench: Benchmark) -> Benchmark:
    """Every benchmark's queries and judgements, checked once whatever its format: a query
    whose id a TREC file cannot hold (:func:`id_problem`) is a problem naming its file and
    line, and is dropped with its judgements; judged query ids the queries lack become
    problems (and are dropped); queries with no judgement stay (an evaluation leaves them
    out and says so)."""
    for qid in [q for q in bench.queries if id_problem(q, "query id")]:
        where = bench.query_where(qid) if bench.query_where else bench.label
        bench.problems.add(where, 0, f"{id_problem(qid, 'query id')}: dropped")
        del bench.queries[qid]
        bench.qrels.pop(qid, None)
    for qid in sorted(set(bench.qrels) - set(bench.queries)):
        bench.problems.add(bench.label, 0, f"judged query {qid!r} is not among the queries")
        del bench.qrels[qid]
    for qid in list(bench.qrels):
        judged = bench.qrels[qid]
        for doc in [d for d in judged if id_problem(d, "judged item id")]:
            bench.problems.add(
                bench.label, 0, f"query {qid!r}: {id_problem(doc, 'judged item id')}: dropped"
            )
            del judged[doc]
        if not judged:
            del bench.qrels[qid]
    return bench


def corpus_items(
    path: Path, label: str, problems: Problems, parse: Callable[[str, str, int], Any]
) -> Iterator[SourceItem | Skipped]:
    """The items of a corpus file with one item a line, streamed: ``parse(text, label,
    number)`` makes a line's :class:`SourceItem` (or a :class:`Skipped` note), or says why
    the line is malformed — recorded in ``problems`` and skipped, as a line that cannot be
    read (too long, not UTF-8) is; blank lines are passed over."""
    for number, text, why in text_lines(path, label, limit=MAX_LINE_BYTES):
        where = f"{label}:{number}"
        if why:
            problems.add(label, number, f"{why}: skipped")
            yield Skipped(where, why)
            continue
        if not text.strip():
            continue
        item = parse(text, label, number)
        if isinstance(item, str):
            problems.add(label, number, item)
            item = Skipped(where, item)
        yield item


def pick_split(available: list[str], split: str | None, label: str, default: str = "test") -> str:
    """The split to read: the one asked for, else ``default`` or the only one."""
    if split is not None:
        if split not in available:
            raise InputError(
                f"{label}: no split {split!r} (splits: {', '.join(available) or 'none'})"
            )
        return split
    if default in available:
        return default
    if len(available) == 1:
        return available[0]
    raise InputError(f"{label}: several splits ({', '.join(available)}): pick one with --split")
