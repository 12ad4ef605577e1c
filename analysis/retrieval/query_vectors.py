"""Queries encoded elsewhere (``lexlens evaluate --query-vectors``), used as the query
vectors instead of encoding the texts.

Two formats, told apart by the first non-blank line:

- Anserini's impact query TSV (what its ``SearchCollection -impact`` and Pyserini's
  ``encode`` of queries write): ``qid<TAB>term term term …``, a term repeated as many times
  as its integer weight;
- JSON lines ``{"id": …, "vector": {term: weight}}`` (``"text"`` or ``"contents"``, when
  given, is the query's text), the query side of a JsonVectorCollection.

Terms are mapped to the collection's vocabulary by their spelling (word pieces as their
``##x`` tokens); a term the vocabulary lacks is left out of its query's vector and counted,
the most frequent named, in a note of the result. Weights are used as given (a ranking is
the same whatever positive factor scales a query). The file is read line by line and held
as sparse rows; each query's dense vector is made when it is ranked. A malformed line is
refused naming its file and line.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lexlens.analysis.core.arguments import path_argument
from lexlens.analysis.core.collection import Collection
from lexlens.analysis.datasets.trec import lines
from lexlens.models.base import InputError

#: Most queries a file may hold (MS MARCO's train queries are 808,731).
MAX_QUERIES = 2_000_000
#: Unknown terms a note names (the most frequent; all are counted).
UNKNOWN_NAMED = 10
#: Distinct unknown terms tallied by name (beyond: counted, not named).
UNKNOWN_TALLIED = 100_000
#: What a ``--query-vectors`` file may be, for its refusals.
WANTED = "Anserini's impact query TSV (qid<TAB>term term …) or JSON lines {id, vector}"


@dataclass
class QueryVectors:
    """Queries read with their sparse vectors over a vocabulary: ids in file order, each
    row's vocabulary ids and weights (CSR parts), a text per query, and the terms the
    vocabulary lacked (postings, queries, the names counted)."""

    source: str
    vocab_size: int
    ids: list[str] = field(default_factory=list)
    texts: dict[str, str] = field(default_factory=dict)
    indptr: list[int] = field(default_factory=lambda: [0])
    cols: list[np.ndarray] = field(default_factory=list)
    vals: list[np.ndarray] = field(default_factory=list)
    unknown_postings: int = 0
    unknown_queries: int = 0
    unknown: Counter = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self._row: dict[str, int] = {}
        self._packed: tuple[np.ndarray, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def __contains__(self, qid: object) -> bool:
        return qid in self._row

    def add(self, qid: str, cols: np.ndarray, vals: np.ndarray, text: str) -> None:
        """One query's vector (vocabulary ids, weights; a repeated id summed)."""
        self._row[qid] = len(self.ids)
        self.ids.append(qid)
        self.texts[qid] = text
        unique, inverse = np.unique(cols, return_inverse=True)
        self.cols.append(unique.astype(np.int32))
        self.vals.append(np.bincount(inverse, weights=vals, minlength=unique.size))
        self.indptr.append(self.indptr[-1] + unique.size)
        self._packed = None

    def vector(self, qid: str) -> np.ndarray:
        """Query ``qid``'s dense vector ``[|V|]`` (float32)."""
        if self._packed is None:
            empty = np.zeros(0)
            self._packed = (
                np.concatenate(self.cols or [empty]).astype(np.int64),
                np.concatenate(self.vals or [empty]).astype(np.float32),
            )
        row = self._row[qid]
        a, b = self.indptr[row], self.indptr[row + 1]
        out = np.zeros(self.vocab_size, np.float32)
        out[self._packed[0][a:b]] = self._packed[1][a:b]
        return out

    def dense(self, order: Sequence[str]) -> DenseQueries:
        """The queries of ``order`` as dense vectors, each made when it is read."""
        return DenseQueries(self, list(order))

    def notes(self) -> list[str]:
        """What a result says of these vectors: where they come from, and the terms the
        vocabulary lacked."""
        said = [f"query vectors read from {self.source} ({len(self):,} queries), not encoded"]
        if self.unknown_postings:
            named = ", ".join(f"{t!r} ({n})" for t, n in self.unknown.most_common(UNKNOWN_NAMED))
            more = len(self.unknown) - UNKNOWN_NAMED
            said.append(
                f"{self.unknown_postings:,} terms of {self.unknown_queries:,} queries are not "
                f"in the collection's vocabulary and were left out: {named}"
                + (f" and {more:,} more" if more > 0 else "")
            )
        return said


class DenseQueries(Sequence[np.ndarray]):
    """Dense query vectors made on demand, in a given order of query ids."""

    def __init__(self, vectors: QueryVectors, order: list[str]) -> None:
        self._vectors = vectors
        self._order = order

    def __len__(self) -> int:
        return len(self._order)

    def __getitem__(self, i: int | slice) -> Any:  # a vector, or a list of them for a slice
        if isinstance(i, slice):
            return [self._vectors.vector(q) for q in self._order[i]]
        return self._vectors.vector(self._order[i])

    def __iter__(self) -> Iterator[np.ndarray]:
        return (self._vectors.vector(q) for q in self._order)


def _weight(value: object, where: str) -> float:
    """A JSON weight checked: a finite number, 0 or more."""
    if type(value) not in (int, float):
        raise InputError(f"{where}: a weight that is not a number: {value!r}")
    weight = float(value)
    if not math.isfinite(weight) or weight < 0:
        raise InputError(f"{where}: a weight must be a finite number of 0 or more, not {value!r}")
    return weight


def _json_query(text: str, where: str) -> tuple[str, list[str], list[float], str | None]:
    """One JSON line's id, terms, weights and text."""
    try:
        item = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}: not JSON ({exc.msg})") from None
    except RecursionError:
        raise InputError(f"{where}: JSON nested too deeply") from None
    if type(item) is not dict:
        raise InputError(f"{where}: not a JSON object")
    qid = item.get("id", item.get("qid", item.get("_id")))
    if type(qid) is int:
        qid = str(qid)
    vector = item.get("vector")
    if type(vector) is not dict:
        raise InputError(f'{where}: no "vector" object of term → weight')
    said = item.get("text", item.get("contents"))
    if said is not None and type(said) is not str:
        raise InputError(f'{where}: "text" must be a text')
    weights = [_weight(v, where) for v in vector.values()]
    return qid, list(vector), weights, said


def _tsv_query(text: str, where: str) -> tuple[str, list[str], list[float], str | None]:
    """One TSV line's id and terms, each occurrence weighing 1."""
    qid, tab, rest = text.partition("\t")
    if not tab:
        raise InputError(f"{where}: no tab: expected qid<TAB>term term …")
    terms = rest.split()
    return qid, terms, [1.0] * len(terms), None


def read_query_vectors(
    path: str | Path, vocab: list[str], *, label: str = "--query-vectors"
) -> QueryVectors:
    """The query vectors of an impact query TSV or JSON lines file (module docstring),
    mapped to ``vocab`` by spelling; the first malformed line refuses the file naming it."""
    shown = str(path_argument(path, label.lstrip("-").replace("-", "_"), WANTED))
    ids = {t: i for i, t in enumerate(vocab)}
    out = QueryVectors(shown, len(vocab))
    reader = None
    for number, text in lines(shown, shown):
        if not text.strip():
            continue
        where = f"{shown}:{number}"
        if reader is None:
            reader = _json_query if text.lstrip().startswith("{") else _tsv_query
        qid, terms, weights, said = reader(text, where)
        if type(qid) is not str or not qid.strip() or qid != qid.strip() or " " in qid:
            raise InputError(f"{where}: the query id must be a text without spaces")
        if qid in out:
            raise InputError(f"{where}: the query {qid!r} appears twice")
        if len(out) >= MAX_QUERIES:
            raise InputError(f"{shown}: more than {MAX_QUERIES:,} queries")
        cols = np.fromiter((ids.get(t, -1) for t in terms), np.int64, len(terms))
        vals = np.asarray(weights, np.float64)
        missing = cols < 0
        if missing.any():
            lacking = [terms[i] for i in np.flatnonzero(missing).tolist()]
            out.unknown_postings += len(lacking)
            out.unknown_queries += 1
            if len(out.unknown) < UNKNOWN_TALLIED:
                out.unknown.update(lacking)
            cols, vals = cols[~missing], vals[~missing]
        out.add(qid, cols, vals, said if said is not None else " ".join(dict.fromkeys(terms)))
    if not len(out):
        raise InputError(f"{label} {shown}: holds no query (expected {WANTED})")
    return out


#: The query encoder a result names when the query vectors were read, not encoded.
PRE_ENCODED = "pre-encoded"


def checked_vectors(vectors: object, collection: Collection, order: Sequence[str]) -> DenseQueries:
    """``vectors`` (a :class:`QueryVectors` read for ``collection``'s vocabulary) as the
    dense vectors of the queries ``order``, each of which they must hold."""
    if not isinstance(vectors, QueryVectors):
        raise InputError(
            f"query_vectors must be QueryVectors (read_query_vectors), not {type(vectors).__name__}"
        )
    size = collection.vocab_size
    if vectors.vocab_size != size:
        raise InputError(
            f"the query vectors of {vectors.source} were read for a vocabulary of "
            f"{vectors.vocab_size:,} terms; the collection's has {size:,}"
        )
    missing = [q for q in order if q not in vectors]
    if missing:
        raise InputError(
            f"{vectors.source}: {len(missing):,} of the queries have no vector "
            f"(the first: {missing[0]!r})"
        )
    return vectors.dense(order)


def queries_of(vectors: QueryVectors, texts: dict[str, str] | None) -> dict[str, str]:
    """The queries an evaluation with ``vectors`` asks: those the file holds, each with its
    text from ``texts`` (a queries file) when it is there, else the file's own."""
    texts = texts or {}
    return {q: texts.get(q) or vectors.texts[q] for q in vectors.ids}
