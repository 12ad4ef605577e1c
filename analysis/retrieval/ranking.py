"""Exact top-n over a collection's gated sparse vectors (stored or in memory).

:func:`ranked` scores ``score_i = Σ_t q_t f(w_it) / ν_i`` over the query terms' postings
only (the memory-mapped float16 postings of a large stored index, or an exact float32
transpose built once), so its time and memory are O(postings the query touches), never
O(items): the threshold of the top ``n`` is selected among the touched postings themselves
(a term-at-a-time accumulator, as an inverted-file engine keeps, without a pass over every
item). Each accumulated score carries a bound on its rounding error, and every item whose
score could still reach the top is rescored exactly in float64 from its stored row: the
result equals an exact ranking, ties broken by row. A query with positive weights over
non-negative postings is pruned by MaxScore first (:mod:`.pruning`): the postings of terms
whose upper bounds cannot lift an item into the top are looked up, not accumulated.
This is the engine behind the one scorer of a collection
(:class:`lexlens.analysis.retrieval.scorer.Scorer`): nothing else calls it.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from lexlens.analysis.collections.store import (
    FP16_ABS,
    FP16_REL,
    POSTINGS_MIN_NNZ,
    POSTINGS_TOP,
)
from lexlens.analysis.collections.stored import is_stored
from lexlens.analysis.core.collection import Collection
from lexlens.analysis.retrieval.pruning import Read, Rounding, maxscore_candidates, term_maxima


@dataclass(frozen=True, eq=False)
class Postings:
    """A collection's inverted index: for each term ``t`` the items
    ``items[indptr[t]:indptr[t + 1]]`` that use it and their weights (float16 ``w / scale``
    of a large stored index, or the exact float32 weights: ``exact``); ``nonnegative`` when
    no stored weight is below 0."""

    indptr: np.ndarray
    items: np.ndarray
    weights: np.ndarray
    scale: float
    exact: bool
    nonnegative: bool
    #: ``decode(read, starts, stops)``: the rows of the items read from those ranges (a
    #: stored index's 16-bit block ids, :mod:`~lexlens.analysis.collections.posting_blocks`),
    #: ``None`` when ``items`` holds the rows themselves.
    decode: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray] | None = None


#: What search derives from a collection once and keeps while the collection lives: its
#: whole CSR matrix and the exact transpose of a small one (kept beside the collection,
#: never written into it).
_CSR: weakref.WeakKeyDictionary[Collection, Any] = weakref.WeakKeyDictionary()
_POSTINGS: weakref.WeakKeyDictionary[Collection, Postings] = weakref.WeakKeyDictionary()


class _Reader:
    """Ranges of a memory-mapped array read with ``pread`` (an array in memory: sliced).

    A search reads a few scattered ranges of large files (its terms' postings, its
    candidates' rows); touching them through the mapping would map the kernel's
    read-around pages into the process too (about 200 MB for 50 queries over a million
    items, for 13 MB of postings), so they are read into the process's own small arrays
    and the page cache keeps the file."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array
        self.plain = np.asarray(array)  # the same memory, sliced without np.memmap's wrapper
        self.dtype = array.dtype
        self.fd = None
        filename = getattr(array, "filename", None)
        if isinstance(array, np.memmap) and filename and array.flags.c_contiguous:
            self.fd = os.open(filename, os.O_RDONLY)
            self.offset = int(array.offset)
            weakref.finalize(self, os.close, self.fd)

    def ranges(self, starts: np.ndarray, stops: np.ndarray, mapped: bool = False) -> np.ndarray:
        """``array[a:b]`` for each (a, b), concatenated (``mapped``: gathered through the
        mapping in one vectorised read; one range is a view)."""
        if self.fd is None or mapped:
            plain = self.plain
            if starts.size == 1:
                return plain[int(starts[0]) : int(stops[0])]
            if starts.size <= _FEW_RANGES:
                pieces = [plain[a:b] for a, b in zip(starts.tolist(), stops.tolist(), strict=True)]
                return np.concatenate(pieces) if pieces else plain[:0]
            lengths = stops - starts
            total = int(lengths.sum())
            ends = np.cumsum(lengths)
            positions = np.arange(total) + np.repeat(starts - (ends - lengths), lengths)
            return plain[positions]
        size = self.dtype.itemsize
        out = np.empty(int((stops - starts).sum()), self.dtype)
        view, at = memoryview(out).cast("B"), 0
        for a, b in zip(starts.tolist(), stops.tolist(), strict=True):
            want = (b - a) * size
            got = os.preadv(self.fd, [view[at : at + want]], self.offset + a * size)
            if got != want:
                raise OSError(f"{self.array.filename}: short read")
            at += want
        return out


#: Up to this many ranges are sliced and joined; more are gathered in one indexing.
_FEW_RANGES = 64
#: Readers of a collection's arrays (kept while the collection lives).
_READERS: weakref.WeakKeyDictionary[Any, dict[str, _Reader]] = weakref.WeakKeyDictionary()


def _reader(owner: Any, name: str, array: np.ndarray) -> _Reader:
    readers = _READERS.setdefault(owner, {})
    if name not in readers:
        readers[name] = _Reader(array)
    return readers[name]


#: float64 rounding: the unit roundoff 2^-53.
_U64 = 2.0**-53
#: Listings of the touched postings sampled to find a first floor of the top n's threshold.
SAMPLE_LISTINGS = 4096


def _csr(target: Collection) -> Any:
    """The whole collection as one scipy CSR matrix (read once per collection)."""
    matrix = _CSR.get(target)
    if matrix is None:
        matrix = target.matrix()
        _CSR[target] = matrix
    return matrix


def _postings(target: Collection) -> Postings | None:
    """The collection's inverted index (:class:`Postings`).

    A large stored index keeps float16 postings on disk, read memory-mapped. A small one
    (or an in-memory collection) gets an exact float32 transpose of its CSR, made once per
    collection. ``None`` for a large index stored without postings.
    """
    cached = _POSTINGS.get(target)
    if cached is not None:
        return cached
    stored = target.postings if is_stored(target) else None
    if stored is not None:
        cached = Postings(
            np.asarray(stored.indptr),
            stored.items,
            stored.weights,
            float(stored.scale),
            False,
            target.manifest.nonnegative,
            None if stored.blocks is None else stored.decode,
        )  # the memory-mapped items and weights, read by range (_Reader)
    else:
        if len(target) and is_stored(target) and target.nnz > POSTINGS_MIN_NNZ:
            return None
        csc = _csr(target).tocsc()
        csc.sort_indices()
        data = csc.data.astype(np.float32)
        cached = Postings(
            csc.indptr.astype(np.int64),
            csc.indices.astype(np.int32),
            data,
            1.0,
            True,
            bool(data.size == 0 or data.min() >= 0),
        )
    _POSTINGS[target] = cached
    return cached


@dataclass(frozen=True)
class _Touched:
    """The items a query touches, with their approximate scores and error bounds:
    ``|exact − approx| ≤ slack``. ``rows`` may list an item more than once (once per
    query term it holds), ``distinct`` says whether it lists each once; every listing of
    an item carries the same approx and slack."""

    rows: np.ndarray
    approx: np.ndarray
    slack: np.ndarray
    distinct: bool
    terms: int


_NOTHING = (np.zeros(0, np.int64), np.zeros(0))


def ranked(
    target: Collection,
    q: np.ndarray,
    n: int,
    *,
    normalize: bool = False,
    square: bool = False,
    mapped: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Rows and exact scores of the ``n`` best items for ``score_i = Σ_t q_t f(w_it) / ν_i``.

    ``f(w) = w`` (or ``w²`` when ``square``); ``ν_i = ‖w_i‖₂`` (``‖w_i‖₂²`` when square)
    when ``normalize``, else 1. Only items that share a term with ``q`` are candidates.
    ``mapped``: a stored index's postings and rows read through its mapping, for a batch
    that reads much of them; else by range into the query's own arrays.

    Scores accumulate over the query terms' postings in float64 (one ``bincount``), each
    with a bound on its error (float16 postings of a large index, float64 sums); the
    threshold of the top ``n`` is selected among the touched postings (time and memory
    O(postings touched)), and every item whose score could still reach it is rescored
    exactly (float64, from its stored row): the result equals an exact ranking. Ties are
    broken by row.

    A query with positive weights over non-negative postings (no normalisation, ``f(w) =
    w``) is pruned by MaxScore (:mod:`.pruning`); any other is accumulated over every
    posting of its terms."""
    terms = np.flatnonzero(q)
    if n <= 0 or terms.size == 0 or len(target) == 0:
        return _NOTHING
    postings = _postings(target)
    prunable = postings is not None and postings.nonnegative and not (normalize or square)
    if prunable and bool(np.all(q[terms] > 0)):
        candidates = maxscore_candidates(
            len(target),
            postings,
            q,
            terms,
            n,
            _rounding(postings, q, terms, square),
            term_maxima(postings, _read(postings, False)),
            _read(postings, mapped),
        )
        if candidates is not None:
            if candidates.size == 0:
                return _NOTHING
            return _rescored(target, candidates, q, n, False, False, mapped)
    if postings is None:  # a large index stored without postings: one pass over the CSR
        touched = _touched_csr(target, q, terms, square)
    else:
        touched = _touched_postings(len(target), q, terms, postings, square, mapped)
    if touched is None or touched.rows.size == 0:
        return _NOTHING
    if normalize:
        touched = _normalized(target, touched, square)
    return _rescored(target, _candidates(touched, n), q, n, normalize, square, mapped)


def touched_items(
    target: Collection, q: np.ndarray, square: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every item that shares a term with ``q`` (distinct rows, ascending), its approximate
    score and its bound ``|exact − approx| ≤ slack`` (accumulated over every posting of the
    query's terms: what an exact rank at any depth needs)."""
    terms = np.flatnonzero(q)
    empty = (np.zeros(0, np.int64), np.zeros(0), np.zeros(0))
    if terms.size == 0 or len(target) == 0:
        return empty
    postings = _postings(target)
    if postings is None:
        touched = _touched_csr(target, q, terms, square)
    else:
        touched = _touched_postings(len(target), q, terms, postings, square, True)
    if touched is None:
        return empty
    rows, first = np.unique(touched.rows, return_index=True)
    return rows.astype(np.int64), touched.approx[first], touched.slack[first]


def _read(postings: Postings, mapped: bool) -> Read:
    """``read(name, starts, stops)`` of the postings' ``items`` or ``weights``."""
    items = _reader(postings, "items", postings.items)
    weights = _reader(postings, "weights", postings.weights)
    decode = postings.decode

    def read(name: str, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
        if name == "weights":
            return weights.ranges(starts, stops, mapped)
        found = items.ranges(starts, stops, mapped)
        return found if decode is None else decode(found, starts, stops)

    return read


def _rounding(postings: Postings, q: np.ndarray, terms: np.ndarray, square: bool) -> Rounding:
    """The error bounds of scores accumulated from ``postings`` (:class:`.pruning.Rounding`).

    float64 products and sums, here and in the exact rescoring (2·(T + 3) roundings of
    2^-53, doubled); float16 postings add ``|w̃ − w| ≤ 2^-11·|w̃|/(1 − 2^-11) + scale·2^-25``
    (doubled), squared for ``f(w) = w²``."""
    rel, absolute, r16, a16 = 4 * (terms.size + 3) * _U64, 0.0, 0.0, 0.0
    if not postings.exact:
        r16, a16 = 2 * FP16_REL / (1 - FP16_REL), 2 * FP16_ABS * postings.scale
        if square:
            top = POSTINGS_TOP * postings.scale
            r16, a16 = (1 + r16) ** 2 - 1, 2 * a16 * top + a16**2
        rel = (1 + rel) * (1 + r16) - 1
        absolute = a16 * (1 + rel) * float(np.abs(q[terms]).sum())
    return Rounding(rel, absolute, r16, a16)


def _touched_csr(
    target: Collection, q: np.ndarray, terms: np.ndarray, square: bool
) -> _Touched | None:
    """Every item's score in one float64 product over the whole CSR matrix."""
    matrix = _csr(target)
    values = matrix.power(2) if square else matrix
    rows = np.flatnonzero(np.asarray(matrix[:, terms].getnnz(axis=1)) > 0)
    if rows.size == 0:
        return None
    acc = np.asarray(values[rows] @ q.astype(np.float64)).ravel()
    mag = np.asarray(abs(values[rows]) @ np.abs(q).astype(np.float64)).ravel()
    return _Touched(rows, acc, 4 * (terms.size + 3) * _U64 * mag, True, terms.size)


def _touched_postings(
    size: int,
    q: np.ndarray,
    terms: np.ndarray,
    postings: Postings,
    square: bool,
    mapped: bool = False,
) -> _Touched | None:
    """The items on the query terms' postings (one listing per posting), each with its
    float64 score accumulated over every query term, and its error bound."""
    indptr = postings.indptr
    starts, stops = indptr[terms], indptr[terms + 1]
    lengths = stops - starts
    if not lengths.sum():
        return None
    read = _read(postings, mapped)
    rows, weights = read("items", starts, stops), read("weights", starts, stops)
    weights = weights.astype(np.float64)
    if square:
        weights *= weights
    scale = postings.scale * postings.scale if square else postings.scale
    weights *= np.repeat(q[terms].astype(np.float64) * scale, lengths)
    acc = np.bincount(rows, weights=weights, minlength=size)
    signed = not postings.nonnegative or bool(np.any(q[terms] < 0))
    mag = np.bincount(rows, weights=np.abs(weights), minlength=size) if signed else acc
    approx, magnitude = acc[rows], mag[rows]
    bounds = _rounding(postings, q, terms, square)
    slack = bounds.rel * np.abs(magnitude) + bounds.absolute
    return _Touched(rows, approx, slack, terms.size == 1, terms.size)


def _normalized(target: Collection, touched: _Touched, square: bool) -> _Touched:
    """Scores and bounds divided by each item's ``ν_i`` (its norm, squared when square)."""
    norms = np.asarray(target.norms, dtype=np.float64)[touched.rows]
    denominators = np.where(norms > 0, norms**2 if square else norms, 1.0)
    return _Touched(
        touched.rows,
        touched.approx / denominators,
        touched.slack / denominators,
        touched.distinct,
        touched.terms,
    )


def _candidates(touched: _Touched, n: int) -> np.ndarray:
    """The distinct items whose score could reach the top ``n``: the ``n``-th best lower
    bound among distinct items is the threshold; every item whose upper bound reaches it.

    Items listed once per query term they hold are first narrowed without a pass over
    every item: the ``n``-th best lower bound among any ``n`` distinct items is at or below
    the threshold, so one found in a sample of the listings (:func:`_floor`) leaves, after
    one comparison over the listings, only the few that can reach the top to be made
    distinct."""
    rows, low, high = touched.rows, touched.approx - touched.slack, touched.approx + touched.slack
    if not touched.distinct:
        reach = np.flatnonzero(high >= _floor(rows, low, n, touched.terms))
        rows, first = np.unique(rows[reach], return_index=True)
        low, high = low[reach[first]], high[reach[first]]
    keep = min(n, rows.size)
    threshold = np.partition(low, rows.size - keep)[rows.size - keep]
    return rows[high >= threshold].astype(np.int64)


def _floor(rows: np.ndarray, low: np.ndarray, n: int, terms: int) -> float:
    """A value at or below the ``n``-th best lower bound among distinct items: the ``n``-th
    best of the distinct items among a sample's best listings (each item is listed at
    most ``terms`` times, so n·terms listings name at least ``n``); −inf when the sample
    names fewer than ``n``."""
    picked = np.arange(0, rows.size, max(1, rows.size // max(SAMPLE_LISTINGS, 8 * n)))
    for best in sorted({min(picked.size, 2 * n), min(picked.size, n * terms)}):
        top = picked[np.argpartition(low[picked], picked.size - best)[picked.size - best :]]
        _, first = np.unique(rows[top], return_index=True)
        if first.size >= n:
            distinct = low[top[first]]
            return float(np.partition(distinct, first.size - n)[first.size - n])
    return -np.inf


def _rescored(
    target: Collection,
    candidates: np.ndarray,
    q: np.ndarray,
    n: int,
    normalize: bool,
    square: bool,
    mapped: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """The top ``n`` of ``candidates`` by their exact float64 scores (ties by row)."""
    exact_scores = exact_scores_of(target, candidates, q, square, mapped)
    if normalize:
        norms = np.asarray(target.norms, dtype=np.float64)[candidates]
        exact_scores = exact_scores / np.where(norms > 0, norms**2 if square else norms, 1.0)
    order = np.lexsort((candidates, -exact_scores))[: min(n, candidates.size)]
    return candidates[order].astype(np.int64), exact_scores[order]


def exact_scores_of(
    target: Collection,
    rows: np.ndarray,
    q: np.ndarray,
    square: bool = False,
    mapped: bool = False,
) -> np.ndarray:
    """``Σ_t q_t f(w_it)`` of each item at ``rows``, in float64 over its stored row (a
    stored index's rows are read at once, their ids and weights checked)."""
    if is_stored(target) and rows.size:
        indptr = np.asarray(target.indptr)
        starts = indptr[rows]
        lengths = indptr[rows + 1] - starts
        total = int(lengths.sum())
        if total == 0:
            return np.zeros(rows.size)
        try:
            stops = starts + lengths
            cols = _reader(target, "indices", target.indices).ranges(starts, stops, mapped)
            w = _reader(target, "data", target.data).ranges(starts, stops, mapped)
        except OSError as exc:
            raise target.corrupt(str(exc)) from None
        if int(cols.min()) < 0 or int(cols.max()) >= target.vocab_size:
            raise target.corrupt("vocabulary ids out of range")
        w = w.astype(np.float64)
        if not np.isfinite(w).all():
            raise target.corrupt("data.npy holds a NaN or infinite weight")
        parts = q[cols].astype(np.float64) * (w * w if square else w)
        owner = np.repeat(np.arange(rows.size), lengths)
        return np.bincount(owner, weights=parts, minlength=rows.size)
    return np.array([_exact(target, int(i), q, square) for i in rows], dtype=np.float64)


def _exact(target: Collection, row: int, q: np.ndarray, square: bool) -> float:
    cols, vals = target.row(row)
    w = vals.astype(np.float64)
    return float(np.sum(q[cols].astype(np.float64) * (w * w if square else w)))
