"""Exclusion queries "A but not B" (Prachi, Bhatia and Bedathur, "Answering Multimodal
Exclusion Queries with Lightweight Sparse Disentangled Representations", ICTIR 2025): SR's
dimension sets and two baselines, each a ranking of a collection's items.

Exclusion methods
-----------------
``sr`` — the paper's sparse-representation method ("dimension extraction", then
"exclusion and final retrieval"), with every choice the paper leaves open made explicit:

1. Retrieve the top-``K`` items for the single-label query A (plain inner-product search
   with the query vector of A). From them take ``D1``: the smallest set of dimensions
   holding ``coverage`` of those items' summed *magnitude*. Likewise ``D2`` for B.
2. ``D = D1 \\ D2``. Rank every item by its *magnitude* on D:

   - ``magnitude="sum"`` (default): a dimension's magnitude is its weight. ``D1`` covers
     ``coverage`` of ``Σ_items Σ_t w̄_it``; an item scores ``s = Σ_{t∈D} w̄_t`` and term t
     contributes ``w̄_t``.
   - ``magnitude="l2"``: a dimension's magnitude is its squared weight (its share of the
     vector's squared L2 norm). ``D1`` covers ``coverage`` of ``Σ_items Σ_t w̄_it²``; an
     item scores ``s = ‖w̄_D‖₂ = sqrt(Σ_{t∈D} w̄_t²)`` and term t contributes
     ``w̄_t² / s`` (these sum to s).

   ``w̄ = w / ‖w‖₂`` when ``normalize`` (default: each item's gated vector is L2-normalised
   first, in both steps, so an item whose mass lies on B's dimensions ranks lower — without
   it, the set difference alone never penalises B), else ``w̄ = w``.

The paper states none of: the meaning of "magnitude", K, the threshold ``th`` (our
``coverage``), whether items are normalised, or the wording of the single-label query. The
defaults here (``sum``, normalised, K = 10, coverage = 0.5, the label itself as the query)
are ours; every result records the settings it used.

``avg`` — the paper's "average embedding" baseline: ``E_q(A) − E_q(B)`` (one prompt each, so
the averages are single embeddings; the paper does not say what it averaged), ranked by
inner product; negative contributions come from B's terms.

``text`` — the paper's single-line query (SLQ): one text, by default "images of A without B"
(the paper's wording) for image collections and "A without B" for text collections.
"""

from __future__ import annotations

import string
from typing import Any

import numpy as np

from lexlens.analysis.core.vocabulary import is_special_token
from lexlens.analysis.search.queries import QuerySpec
from lexlens.analysis.search.ranking import top_items
from lexlens.models.base import InputError

METHODS = ("sr", "avg", "text")
DEFAULT_K_ITEMS = 10
DEFAULT_COVERAGE = 0.5
SLQ_IMAGE = "images of {a} without {b}"
SLQ_TEXT = "{a} without {b}"


def slq_for(target: Any, template: str | None) -> str:
    """The single-line query template (default: the paper's wording for image collections)."""
    slq = template or (SLQ_IMAGE if getattr(target, "modality", "text") == "image" else SLQ_TEXT)
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(slq) if f is not None]
    except ValueError as exc:
        raise InputError(f"the single-line query template {slq!r}: {exc}") from None
    unknown = [f or "{}" for f in fields if f not in ("a", "b")]
    if unknown:
        raise InputError(
            f"the single-line query template may name {{a}} and {{b}} only, not {unknown[0]!r}"
        )
    if "a" not in fields or "b" not in fields:
        raise InputError("the single-line query template needs {a} and {b}")
    return slq


def check_settings(
    method: str, exclude: str | None, k_items: int | None, coverage: float | None, top: int,
    magnitude: str, explain: int,
) -> tuple[int, float]:  # fmt: skip
    if not isinstance(top, int) or isinstance(top, bool) or top < 1:
        raise InputError(f"--top must be a positive integer, not {top!r}")
    if not isinstance(explain, int) or explain < 0:
        raise InputError("the number of contributions shown must be 0 or more")
    if method not in METHODS:
        raise InputError(f"--method must be one of {', '.join(METHODS)}, not {method!r}")
    if magnitude not in ("sum", "l2"):
        raise InputError(f"--magnitude must be 'sum' or 'l2', not {magnitude!r}")
    uses_sets = bool(exclude) and method == "sr"
    if not uses_sets and (k_items is not None or coverage is not None):
        which = "--k-items" if k_items is not None else "--coverage"
        raise InputError(
            f"{which} applies to the sr exclusion method only (it sets how D1 and D2 are "
            "extracted); leave it out for this search"
        )
    if k_items is not None and (
        isinstance(k_items, bool) or not isinstance(k_items, int) or k_items < 1
    ):
        raise InputError(
            f"--k-items must be a positive integer (items per dimension set), not {k_items!r}"
        )
    if coverage is not None and not (isinstance(coverage, (int, float)) and 0 < coverage <= 1):
        raise InputError(f"--coverage must be in (0, 1], not {coverage!r}")
    return (
        DEFAULT_K_ITEMS if k_items is None else k_items,
        DEFAULT_COVERAGE if coverage is None else float(coverage),
    )


def covering_dimensions(mass: np.ndarray, coverage: float) -> np.ndarray:
    """Smallest set of dimensions holding ``coverage`` of ``mass`` (strongest first)."""
    if not 0 < coverage <= 1:
        raise InputError("coverage must be in (0, 1]")
    mass = np.asarray(mass, dtype=np.float64)
    total = mass[mass > 0].sum()
    if total <= 0:
        return np.zeros(0, dtype=np.int64)
    order = np.argsort(-mass, kind="stable")
    order = order[mass[order] > 0]
    cumulative = np.cumsum(mass[order]) / total
    n = int(np.searchsorted(cumulative, coverage - 1e-12) + 1)
    return order[: min(n, order.size)]


def dimension_set(
    target: Any, q: np.ndarray, k_items: int, coverage: float, magnitude: str, normalize: bool
) -> tuple[np.ndarray, np.ndarray]:
    """(D, the rows of the top-K items) for one single-label query vector ``q``."""
    rows, _ = top_items(target, q, k_items)
    mass = np.zeros(target.vocab_size, dtype=np.float64)
    for r in rows:
        cols, vals = target.row(int(r))
        w = vals.astype(np.float64)
        if normalize and target.norms[int(r)] > 0:
            w = w / float(target.norms[int(r)])
        mass[cols] += w * w if magnitude == "l2" else np.abs(w)
    return covering_dimensions(mass, coverage), rows


def rank_method(
    target: Any,
    spec: QuerySpec,
    method: str,
    a: str,
    b: str | None,
    *,
    n: int,
    k_items: int,
    coverage: float,
    magnitude: str,
    normalize: bool,
    slq: str,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict | None, list[str]]:
    """(rows, scores, the weights hits are explained with, SR dimension sets, messages)."""
    vocab = target.vocab
    messages: list[str] = []
    if not b:
        q = spec.text(a)
        rows, scores = top_items(target, q, n)
        return rows, scores, q, None, messages
    if method == "text":
        q = spec.text(slq.format(a=a, b=b))
        rows, scores = top_items(target, q, n)
        return rows, scores, q, None, messages
    qa, qb = spec.text(a), spec.text(b)
    if method == "avg":
        q = (qa.astype(np.float64) - qb.astype(np.float64)).astype(np.float32)
        rows, scores = top_items(target, q, n)
        return rows, scores, q, None, messages
    d1, rows_a = dimension_set(target, qa, k_items, coverage, magnitude, normalize)
    d2, rows_b = dimension_set(target, qb, k_items, coverage, magnitude, normalize)
    kept = d1[~np.isin(d1, d2)]
    own = _own_top_terms(qa, vocab, a)
    overlap = [vocab[i] for i in d2 if i in own]
    dims = {
        "include_terms": [vocab[i] for i in d1],
        "exclude_terms": [vocab[i] for i in d2],
        "kept_terms": [vocab[i] for i in kept],
        "removed_query_terms": overlap,
        "include_items": len(rows_a),
        "exclude_items": len(rows_b),
    }
    if rows_a.size == 0:
        messages.append(f"no item shares a term with {a!r}: D1 is empty, nothing is ranked")
    elif kept.size == 0:
        messages.append(
            "D = D1 \\ D2 is empty: every dimension of A's top items is also one of B's "
            f"({'A and B are the same query' if a.strip().casefold() == b.strip().casefold() else 'B covers A'}), "
            "so there is nothing to rank by: no results"
        )
    if overlap:
        messages.append(
            f"D2 (from the top items of {b!r}) holds {', '.join(repr(t) for t in overlap)}, "
            f"among the own top terms of the query {a!r}: they are removed from D, so items "
            "are ranked without them"
        )
    mask = np.zeros(target.vocab_size, dtype=np.float32)
    mask[kept] = 1.0
    if kept.size == 0:
        return np.zeros(0, np.int64), np.zeros(0), mask, dims, messages
    rows, scores = top_items(target, mask, n, normalize=normalize, square=magnitude == "l2")
    if magnitude == "l2":
        scores = np.sqrt(np.maximum(scores, 0))
    return rows, scores, mask, dims, messages


def _own_top_terms(q: np.ndarray, vocab: list[str], text: str, top: int = 10) -> set[int]:
    """A query's own words and its ``top`` strongest terms (dimension ids)."""
    nonzero = np.flatnonzero(q)
    strongest = nonzero[np.argsort(-q[nonzero], kind="stable")][:top]
    words = {w for w in text.casefold().split()}
    own = {int(i) for i in strongest}
    own |= {i for i in nonzero if vocab[i] in words and not is_special_token(vocab[i])}
    return own
