"""Relevance judgements, runs and query sets in the formats the field exchanges them.

- qrels: TREC (``qid 0 docid rel``, whitespace) or BEIR (``query-id<TAB>corpus-id<TAB>score``
  after a header line), told apart by the first line;
- runs: TREC (``qid Q0 docid rank score tag``); the items of a query are ranked by score
  (ties: as listed; an evaluation orders them as trec_eval does unless told otherwise,
  see :func:`read_run`);
- queries: BEIR ``queries.jsonl`` (``_id``, ``text``) or MS MARCO's TSV (``qid<TAB>text``).

Readers stream and keep every readable line; each malformed line is a problem naming the
file and line (:class:`Problems`), and a file with none readable is refused in one line.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from lexlens.analysis.core.inputs import MAX_LINE_BYTES, json_line, text_lines
from lexlens.analysis.core.metrics import relevance_from_text, strictly_decreasing
from lexlens.analysis.datasets.items import id_problem
from lexlens.models.base import InputError

#: Problems kept per file (the count goes on).
MAX_PROBLEMS = 100


@dataclass
class Problems:
    """Malformed lines of the files read, one line each (file:line: why), and their count."""

    lines: list[str] = field(default_factory=list)
    count: int = 0

    def add(self, label: str, line: int, why: str) -> None:
        """Record one malformed line (``line`` 0: the file as a whole, or ``label`` already
        names the line)."""
        self.count += 1
        if len(self.lines) < MAX_PROBLEMS:
            self.lines.append(f"{label}:{line}: {why}" if line else f"{label}: {why}")


def lines(
    path: str | Path, label: str | None = None, problems: Problems | None = None
) -> Iterator[tuple[int, str]]:
    """(line number, text) of a regular UTF-8 file, streamed; anything else (a folder, a FIFO,
    a device) is refused before it is opened, so nothing blocks or reads without end.

    Lines end at ``\n`` only: a bare ``\r`` stays in its line (MS MARCO's passages hold
    some) and numbers stay true. A line longer than
    :data:`~lexlens.analysis.core.inputs.MAX_LINE_BYTES` (read past in chunks, never whole) or not UTF-8 is a problem naming its number, recorded in
    ``problems`` and skipped, so the readable lines around it are kept; without
    ``problems`` it is refused in one line."""
    path = Path(path).expanduser()
    label = label or str(path)
    for number, text, why in text_lines(path, label, limit=MAX_LINE_BYTES):
        if why:
            if problems is None:
                raise InputError(f"{label}:{number}: {why}")
            problems.add(label, number, f"{why}: skipped")
            continue
        yield number, text


def read_qrels(
    path: str | Path, problems: Problems | None = None, *, label: str | None = None
) -> dict[str, dict[str, int]]:
    """Query id → {item id: relevance} from TREC or BEIR qrels (told apart by line 1).

    A relevance is a whole number from −1,000 to 1,000
    (:mod:`lexlens.analysis.core.metrics`: pytrec_eval's memory grows with the largest
    grade). One that is not a whole number (``0.5``, ``inf``, ``nan``, ``1e400``) is a
    problem naming the file and line; a whole number beyond ±1,000 refuses the file naming
    its line (the item's grade cannot be dropped without changing every measure of its
    query). 0 and negatives are kept as written: they mean not relevant."""

    problems = problems if problems is not None else Problems()
    label = label or str(path)
    out: dict[str, dict[str, int]] = {}
    beir = False
    for number, text in lines(path, label, problems):
        fields = text.split("\t") if "\t" in text else text.split()
        if not fields or not text.strip():
            continue
        if number == 1 and fields[0].strip().lower() in ("query-id", "query_id", "qid"):
            beir = True
            continue
        if len(fields) not in (3, 4) or (beir and len(fields) != 3):
            want = "3 (query-id corpus-id score)" if beir else "4 (qid 0 docid rel)"
            problems.add(label, number, f"{len(fields)} fields, expected {want}")
            continue
        qid, doc, rel = (
            (fields[0], fields[1], fields[2])
            if len(fields) == 3
            else (fields[0], fields[2], fields[3])
        )
        try:
            value = relevance_from_text(rel)
        except ValueError as exc:
            problems.add(label, number, str(exc))
            continue
        except InputError as exc:
            raise InputError(f"{label}:{number}: {exc}") from None
        qid, doc = qid.strip(), doc.strip()
        if doc in out.setdefault(qid, {}):
            problems.add(label, number, f"({qid}, {doc}) judged twice: the first judgement kept")
            continue
        out[qid][doc] = value
    if not out:
        raise InputError(f"{label}: no readable judgement ({problems.count} malformed lines)")
    return out


def read_run(
    path: str | Path, problems: Problems | None = None, *, label: str | None = None
) -> dict[str, list[tuple[str, float]]]:
    """Query id → [(item id, score), …] best first, from a TREC run file.

    Each query's items are ranked by score, descending; tied items keep the order the file
    lists them in (trec_eval orders ties by item id, descending: an evaluation reorders them
    so, :func:`~lexlens.analysis.core.metrics.trec_eval_order`, unless its ``ties`` is
    as-listed). The rank column is not read. A NaN or infinite
    score (``1e400`` too) gives the run no order: the file is refused naming its line; any
    other malformed line is a problem (file:line) and the readable ones are kept."""
    problems = problems if problems is not None else Problems()
    label = label or str(path)
    rows: dict[str, list[tuple[float, int, str]]] = {}
    seen: set[tuple[str, str]] = set()
    for number, text in lines(path, label, problems):
        fields = text.split()
        if not fields:
            continue
        if len(fields) != 6:
            problems.add(
                label, number, f"{len(fields)} fields, expected 6 (qid Q0 docid rank score tag)"
            )
            continue
        qid, _, doc, _, score, _ = fields
        try:
            value = float(score)
        except ValueError:
            problems.add(label, number, f"score {score!r} is not a number")
            continue
        if not math.isfinite(value):
            raise InputError(f"{label}:{number}: score {score!r} is not a finite number")
        if (qid, doc) in seen:
            problems.add(label, number, f"{doc} listed twice for query {qid}: the first kept")
            continue
        seen.add((qid, doc))
        rows.setdefault(qid, []).append((value, number, doc))
    if not rows:
        raise InputError(f"{label}: no readable run line ({problems.count} malformed lines)")
    return {
        q: [(doc, score) for score, _, doc in sorted(items, key=lambda x: (-x[0], x[1]))]
        for q, items in rows.items()
    }


def read_queries(
    path: str | Path,
    problems: Problems | None = None,
    *,
    label: str | None = None,
    where: dict[str, str] | None = None,
) -> dict[str, str]:
    """Query id → text from BEIR's queries.jsonl or a ``qid<TAB>text`` TSV (by suffix).

    ``where``, when given, receives ``file:line`` of each query kept whose id a TREC file
    cannot hold (:func:`~lexlens.analysis.datasets.items.id_problem`), the queries a
    message will name, found in this one pass."""
    problems = problems if problems is not None else Problems()
    label = label or str(path)
    out: dict[str, str] = {}
    jsonl = Path(path).suffix.lower() == ".jsonl"
    for number, text in lines(path, label, problems):
        if not text.strip():
            continue
        if jsonl:
            row, why = json_line(text, label, number)
            if why:
                problems.add(label, number, why)
                continue
            qid, query = (
                (row.get("_id"), row.get("text")) if isinstance(row, dict) else (None, None)
            )
        else:
            qid, _, query = text.partition("\t")
        if not isinstance(qid, (str, int)) or not isinstance(query, str) or not query.strip():
            problems.add(label, number, "needs an id and a non-empty text")
            continue
        if str(qid) in out:
            problems.add(label, number, f"query id {qid!r} appears twice: the first kept")
            continue
        out[str(qid)] = query.strip()
        if where is not None and id_problem(str(qid)):
            where[str(qid)] = f"{label}:{number}"
    if not out:
        raise InputError(f"{label}: no readable query ({problems.count} malformed lines)")
    return out


def run_text(run: Mapping[str, list[tuple[str, float]]], *, tag: str = "lexlens") -> str:
    """A TREC run: ``qid Q0 docid rank score tag``, ranks from 1 in the order given (best
    first), scores as trec_eval reads them (float32) and strictly decreasing
    (:func:`~lexlens.analysis.core.metrics.strictly_decreasing`): trec_eval ignores
    the rank column and orders tied scores by docid, so tied scores would let it rank the
    items otherwise. Each score is the shortest text that reads back as its float32."""

    tag = "".join(tag.split()) or "lexlens"
    lines = [
        f"{q} Q0 {doc} {rank} {str(score)} {tag}"
        for q, pairs in run.items()
        for rank, (doc, score) in enumerate(
            zip([d for d, _ in pairs], strictly_decreasing([s for _, s in pairs]), strict=True),
            start=1,
        )
    ]
    return "\n".join(lines) + ("\n" if lines else "")
