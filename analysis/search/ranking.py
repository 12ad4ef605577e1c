"""Exact top-n over a collection's gated sparse vectors (stored or in memory).

:func:`top_items` scores ``score_i = Σ_t q_t f(w_it) / ν_i`` over the query terms' postings
(float16 postings of a large stored index, or an exact float32 transpose built once),
bounds each approximate score's rounding error, and rescores every item that could still
reach the top exactly in float64: the result equals an exact ranking (ties by row).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from lexlens.analysis.collections.store import (
    FP16_ABS,
    FP16_REL,
    POSTINGS_MIN_NNZ,
    POSTINGS_TOP,
    StoredIndex,
)
from lexlens.analysis.core.collection import Collection
from lexlens.analysis.search.memory_collection import MemoryCollection

#: (indptr, items, weights, scale, exact) of a collection's inverted index.
Postings = tuple[np.ndarray, np.ndarray, np.ndarray, float, bool]

#: What search derives from a collection once and keeps while the collection lives: its
#: whole CSR matrix and the exact transpose of a small one (kept beside the collection,
#: never written into it).
_CSR: weakref.WeakKeyDictionary[Collection, Any] = weakref.WeakKeyDictionary()
_POSTINGS: weakref.WeakKeyDictionary[Collection, Postings] = weakref.WeakKeyDictionary()


def _csr(target: Collection) -> Any:
    """The whole collection as one scipy CSR matrix (made once per collection)."""
    if isinstance(target, MemoryCollection):
        return target.matrix
    matrix = _CSR.get(target)
    if matrix is None:
        matrix = _stacked(target)
        _CSR[target] = matrix
    return matrix


def _stacked(target: Collection) -> Any:
    """Every row of ``target`` in one scipy CSR matrix (a stored index reads its arrays)."""
    import scipy.sparse as sp

    if isinstance(target, StoredIndex):
        return target.rows(0, len(target))
    rows = [target.row(i) for i in range(len(target))]
    indptr = np.r_[0, np.cumsum([cols.size for cols, _ in rows])]
    cols = np.concatenate([c for c, _ in rows]) if rows else np.zeros(0, np.int32)
    vals = np.concatenate([v for _, v in rows]) if rows else np.zeros(0, np.float32)
    return sp.csr_matrix((vals, cols, indptr), shape=(len(target), target.vocab_size))


def _postings(target: Collection) -> Postings | None:
    """(indptr, items, weights, scale, exact) of the collection's inverted index.

    A large stored index keeps float16 postings on disk (``exact`` False). A small one (or
    an in-memory collection) gets an exact float32 transpose of its CSR, made once per
    collection. ``None`` for a large index stored without postings.
    """
    stored = getattr(target, "postings", None)
    if stored is not None:
        return (*stored, False)
    cached = _POSTINGS.get(target)
    if cached is None:
        if len(target) and getattr(target, "nnz", 0) > POSTINGS_MIN_NNZ:
            return None
        csc = _csr(target).tocsc()
        csc.sort_indices()
        cached = (
            csc.indptr.astype(np.int64), csc.indices.astype(np.int32),
            csc.data.astype(np.float32), 1.0, True,
        )  # fmt: skip
        _POSTINGS[target] = cached
    return cached


@dataclass(frozen=True)
class _Accumulated:
    """Approximate scores of the items a query touches, and how far each may be off:
    ``|score − acc| ≤ rel · mag + absolute · Σ_t |q_t|``. ``touched`` and ``mag`` are
    ``None`` when no term can lower a score (every touched item has ``acc > 0``)."""

    acc: np.ndarray
    mag: np.ndarray | None
    touched: np.ndarray | None
    rel: float
    absolute: float


_NOTHING = (np.zeros(0, np.int64), np.zeros(0))


def top_items(
    target: Collection,
    q: np.ndarray,
    n: int,
    *,
    normalize: bool = False,
    square: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Rows and exact scores of the ``n`` best items for ``score_i = Σ_t q_t f(w_it) / ν_i``.

    ``f(w) = w`` (or ``w²`` when ``square``); ``ν_i = ‖w_i‖₂`` (``‖w_i‖₂²`` when square)
    when ``normalize``, else 1. Only items that share a term with ``q`` are candidates.

    Scores accumulate over the query terms' postings (one ``bincount``: time and memory
    O(postings touched)). The accumulated scores are approximate — float16 postings of a
    large index, float32 products — so each carries a bound on its rounding error, and
    every item whose score could still reach the top ``n`` is rescored exactly (float64,
    from its CSR row): the result equals an exact ranking. Ties are broken by row.
    """
    terms = np.flatnonzero(q)
    if n <= 0 or terms.size == 0 or len(target) == 0:
        return _NOTHING
    postings = _postings(target)
    if postings is None:  # a large index stored without postings: one pass over the CSR
        scores = _accumulated_csr(target, q, terms, square)
    else:
        scores = _accumulated_postings(target, q, terms, postings, square)
        if scores is None:
            return _NOTHING
    spread = float(np.abs(q[terms]).sum())
    if scores.touched is None:
        candidates = _candidates_nonnegative(
            target, scores.acc, n, scores.rel, scores.absolute * spread, normalize, square
        )
    else:
        candidates = _candidates_signed(target, scores, spread, n, normalize, square)
        if candidates is None:
            return _NOTHING
    return _rescored(target, candidates, q, n, normalize, square)


def _accumulated_csr(
    target: Collection, q: np.ndarray, terms: np.ndarray, square: bool
) -> _Accumulated:
    """Every item's score in one float64 product over the whole CSR matrix."""
    matrix = _csr(target)
    values = matrix.power(2) if square else matrix
    acc = np.asarray(values @ q.astype(np.float64)).ravel()
    mag = np.asarray(abs(values) @ np.abs(q).astype(np.float64)).ravel()
    touched = np.flatnonzero(np.asarray(matrix[:, terms].getnnz(axis=1)) > 0)
    return _Accumulated(acc, mag, touched, 1e-12, 0.0)


def _accumulated_postings(
    target: Collection, q: np.ndarray, terms: np.ndarray, postings: Postings, square: bool
) -> _Accumulated | None:
    """The scores over the query terms' postings (``None`` when no item holds a term)."""
    import scipy.sparse as sp

    p_indptr, p_items, p_weights, scale, exact = postings
    signed = bool(np.any(q[terms] < 0)) or not (
        exact or getattr(target, "manifest", {}).get("nonnegative", False)
    )
    slices = [(int(p_indptr[t]), int(p_indptr[t + 1])) for t in terms]
    lengths = np.array([b - a for a, b in slices], dtype=np.int64)
    if not lengths.sum():
        return None
    items = np.concatenate([np.asarray(p_items[a:b]) for a, b in slices])
    weights = np.concatenate([np.asarray(p_weights[a:b], dtype=np.float32) for a, b in slices])
    if square:
        weights = weights * weights
    # The query terms' postings as a sparse [items × terms] matrix: one float32 product.
    matrix = sp.csc_matrix(
        (weights, items, np.r_[0, np.cumsum(lengths)]), shape=(len(target), terms.size)
    )
    factor = (scale * scale if square else scale) * q[terms].astype(np.float64)
    acc = matrix @ factor.astype(np.float32)
    mag = touched = None
    if signed:
        mag = abs(matrix) @ np.abs(factor).astype(np.float32)
        touched = np.flatnonzero(matrix @ np.ones(terms.size, np.float32))
    # Rounding bounds, relative to Σ_t |q_t f(w̃_t)|: float32 products and sums over the
    # item's terms ((T + 2)·2^-24, doubled); for float16 postings also |w̃ − w| ≤
    # 2^-11·|w̃|/(1 − 2^-11) + scale·2^-25 (doubled), squared for f(w) = w².
    rel, absolute = 2 * (terms.size + 2) * 2.0**-24, 0.0
    if not exact:
        r16, a16 = 2 * FP16_REL / (1 - FP16_REL), 2 * FP16_ABS * scale
        if square:
            top = POSTINGS_TOP * scale
            r16, a16 = (1 + r16) ** 2 - 1, 2 * a16 * top + a16**2
        rel = (1 + rel) * (1 + r16) - 1
        absolute = a16 * (1 + rel)
    return _Accumulated(acc, mag, touched, rel, absolute)


def _candidates_signed(
    target: Collection, scores: _Accumulated, spread: float, n: int, normalize: bool,
    square: bool,
) -> np.ndarray | None:  # fmt: skip
    """Items whose score could reach the top ``n`` when a term may lower a score: every
    touched item's score ± its bound against the ``n``-th lower bound (``None``: none)."""
    touched, mag = scores.touched, scores.mag
    if touched is None or mag is None or touched.size == 0:
        return None
    approx = scores.acc[touched].astype(np.float64)
    slack = scores.rel * np.abs(mag[touched]).astype(np.float64) + scores.absolute * spread + 1e-300
    if normalize:
        norms = np.asarray(target.norms, dtype=np.float64)[touched]
        denominators = np.where(norms > 0, norms**2 if square else norms, 1.0)
        approx, slack = approx / denominators, slack / denominators
    keep = min(n, touched.size)
    low = approx - slack
    threshold = np.partition(low, touched.size - keep)[touched.size - keep]
    return touched[approx + slack >= threshold]


def _candidates_nonnegative(
    target: Collection, acc: np.ndarray, n: int, rel: float, absolute: float, normalize: bool,
    square: bool,
) -> np.ndarray:  # fmt: skip
    """Items whose score could reach the top ``n`` when no term can lower a score: the
    approximate scores ``acc`` (0 = untouched) need only a partition and one comparison."""
    size = acc.shape[0]
    keep = min(n, size)
    if normalize:
        norms = np.asarray(target.norms, dtype=np.float64)
        denominators = np.where(norms > 0, norms**2 if square else norms, 1.0)
        scores = acc / denominators
        low = scores * (1 - rel) - absolute / denominators
        threshold = np.partition(low, size - keep)[size - keep]
        upper = scores * (1 + rel) + absolute / denominators
    else:
        scores = acc
        nth = float(np.partition(scores, size - keep)[size - keep])
        threshold = nth * (1 - rel) - absolute
        upper = scores  # compared against the threshold moved to the scores' side below
        threshold = (threshold - absolute) / (1 + rel)
    mask = upper >= threshold
    if threshold <= 0:
        mask &= acc > 0
    return np.flatnonzero(mask)


def _rescored(
    target: Collection, candidates: np.ndarray, q: np.ndarray, n: int, normalize: bool, square: bool
) -> tuple[np.ndarray, np.ndarray]:
    """The top ``n`` of ``candidates`` by their exact float64 scores (ties by row)."""
    exact_scores = np.array(
        [_exact(target, int(i), q, square) for i in candidates], dtype=np.float64
    )
    if normalize:
        norms = np.asarray(target.norms, dtype=np.float64)[candidates]
        exact_scores = exact_scores / np.where(norms > 0, norms**2 if square else norms, 1.0)
    order = np.lexsort((candidates, -exact_scores))[: min(n, candidates.size)]
    return candidates[order].astype(np.int64), exact_scores[order]


def _exact(target: Collection, row: int, q: np.ndarray, square: bool) -> float:
    cols, vals = target.row(row)
    w = vals.astype(np.float64)
    return float(np.sum(q[cols].astype(np.float64) * (w * w if square else w)))
