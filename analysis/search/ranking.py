"""Exact top-n over a collection's gated sparse vectors (stored or in memory).

:func:`top_items` scores ``score_i = Σ_t q_t f(w_it) / ν_i`` over the query terms' postings
(float16 postings of a large stored index, or an exact float32 transpose built once),
bounds each approximate score's rounding error, and rescores every item that could still
reach the top exactly in float64: the result equals an exact ranking (ties by row).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lexlens.analysis.collections.store import FP16_ABS, FP16_REL, POSTINGS_MIN_NNZ, POSTINGS_TOP
from lexlens.analysis.search.memory_collection import MemoryCollection


def _csr(target: Any):
    """The whole collection as one scipy CSR matrix (cached on the target)."""
    if isinstance(target, MemoryCollection):
        return target.matrix
    cached = getattr(target, "_search_csr", None)
    if cached is None:
        cached = target.rows(0, len(target))
        target._search_csr = cached
    return cached


def _query_terms(q: np.ndarray) -> np.ndarray:
    return np.flatnonzero(q)


def _postings(target: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, bool] | None:
    """(indptr, items, weights, scale, exact) of the collection's inverted index.

    A large stored index keeps float16 postings on disk (``exact`` False). A small one (or
    an in-memory collection) gets an exact float32 transpose of its CSR, built once and
    kept on the object. ``None`` for a large index stored without postings.
    """
    stored = getattr(target, "postings", None)
    if stored is not None:
        return (*stored, False)
    cached = target.__dict__.get("_search_postings")
    if cached is None:
        if len(target) and getattr(target, "nnz", 0) > POSTINGS_MIN_NNZ:
            return None
        csc = _csr(target).tocsc()
        csc.sort_indices()
        cached = (
            csc.indptr.astype(np.int64), csc.indices.astype(np.int32),
            csc.data.astype(np.float32), 1.0, True,
        )  # fmt: skip
        target.__dict__["_search_postings"] = cached
    return cached


def top_items(
    target: Any,
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
    terms = _query_terms(q)
    if n <= 0 or terms.size == 0 or len(target) == 0:
        return np.zeros(0, np.int64), np.zeros(0)
    size = len(target)
    postings = _postings(target)
    if postings is None:  # a large index stored without postings: one pass over the CSR
        matrix = _csr(target)
        values = matrix.power(2) if square else matrix
        acc = np.asarray(values @ q.astype(np.float64)).ravel()
        mag = np.asarray(abs(values) @ np.abs(q).astype(np.float64)).ravel()
        touched = np.flatnonzero(np.asarray(matrix[:, terms].getnnz(axis=1)) > 0)
        rel, absolute = 1e-12, 0.0
    else:
        import scipy.sparse as sp

        p_indptr, p_items, p_weights, scale, exact = postings
        signed = bool(np.any(q[terms] < 0)) or not (
            exact or getattr(target, "manifest", {}).get("nonnegative", False)
        )
        slices = [(int(p_indptr[t]), int(p_indptr[t + 1])) for t in terms]
        lengths = np.array([b - a for a, b in slices], dtype=np.int64)
        if not lengths.sum():
            return np.zeros(0, np.int64), np.zeros(0)
        items = np.concatenate([np.asarray(p_items[a:b]) for a, b in slices])
        weights = np.concatenate([np.asarray(p_weights[a:b], dtype=np.float32) for a, b in slices])
        if square:
            weights = weights * weights
        # The query terms' postings as a sparse [items × terms] matrix: one float32 product.
        matrix = sp.csc_matrix(
            (weights, items, np.r_[0, np.cumsum(lengths)]), shape=(size, terms.size)
        )
        factor = (scale * scale if square else scale) * q[terms].astype(np.float64)
        acc = matrix @ factor.astype(np.float32)
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
        if not signed:
            candidates = _candidates_nonnegative(
                target, acc, n, rel, absolute * float(np.abs(q[terms]).sum()), normalize, square
            )
            return _rescored(target, candidates, q, n, normalize, square)
    if touched.size == 0:
        return np.zeros(0, np.int64), np.zeros(0)
    approx = acc[touched].astype(np.float64)
    slack = (
        rel * np.abs(mag[touched]).astype(np.float64)
        + absolute * float(np.abs(q[terms]).sum())
        + 1e-300
    )
    if normalize:
        norms = np.asarray(target.norms, dtype=np.float64)[touched]
        denominators = np.where(norms > 0, norms**2 if square else norms, 1.0)
        approx, slack = approx / denominators, slack / denominators
    keep = min(n, touched.size)
    low = approx - slack
    threshold = np.partition(low, touched.size - keep)[touched.size - keep]
    candidates = touched[approx + slack >= threshold]
    return _rescored(target, candidates, q, n, normalize, square)


def _candidates_nonnegative(
    target: Any, acc: np.ndarray, n: int, rel: float, absolute: float, normalize: bool,
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
    target: Any, candidates: np.ndarray, q: np.ndarray, n: int, normalize: bool, square: bool
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


def _exact(target: Any, row: int, q: np.ndarray, square: bool) -> float:
    cols, vals = target.row(row)
    w = vals.astype(np.float64)
    return float(np.sum(q[cols].astype(np.float64) * (w * w if square else w)))
