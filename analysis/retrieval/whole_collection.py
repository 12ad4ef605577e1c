"""Exact whole-index scores for many query vectors at once, and where a target item ranks.

The score is the benchmark evaluation's: ``s_i = Σ_t q_t d_it`` (no normalisation), in
float64. An item ranks above the target when it scores more, or the same with a lower row
(collection order, search's tie rule); a target scoring 0 or less is *not retrieved* (no
rank). :class:`WholeIndexScorer` keeps the collection's transpose ``[|V| × items]`` once
(float64) and scores a batch of query vectors in one sparse × dense product over the union
of their terms (each non-zero of those terms' postings read once for the whole batch, not
once per query), so every candidate edit is ranked against *all* items exactly.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from lexlens.analysis.core.collection import Collection

#: Single queries whose scores a scorer keeps.
KEPT = 4

_TRANSPOSES: weakref.WeakKeyDictionary[Collection, Any] = weakref.WeakKeyDictionary()


def collection_matrix(collection: Collection) -> Any:
    """The whole collection as one scipy CSR matrix ``[items × |V|]`` (float32)."""
    import scipy.sparse as sp

    return sp.csr_matrix(collection.matrix())


@dataclass(frozen=True)
class Placement:
    """Where the target ranks for one query vector: its 1-based rank (``None``: not
    retrieved), its score, and the best other item (the first rival) and its score."""

    rank: int | None
    score: float
    rival: int | None
    rival_score: float

    @property
    def first(self) -> bool:
        """The target ranks first."""
        return self.rank == 1


class WholeIndexScorer:
    """Exact float64 scores of query vectors against every item of one collection."""

    def __init__(self, collection: Collection) -> None:
        self.collection = collection
        transpose = _TRANSPOSES.get(collection)
        if transpose is None:
            transpose = collection_matrix(collection).astype(np.float64).T.tocsr()
            transpose.sort_indices()
            _TRANSPOSES[collection] = transpose
        self.by_term = transpose  # [|V| × items]
        self.size = int(transpose.shape[1])
        #: the last few single queries' scores (the query as given is scored again after
        #: each edit the search tries)
        self._kept: OrderedDict[bytes, np.ndarray] = OrderedDict()

    def scores(self, vectors: np.ndarray) -> np.ndarray:
        """``[queries × items]`` float64 scores of dense query vectors ``[queries × |V|]``
        (read-only; the last :data:`KEPT` single queries' are kept and given again)."""
        vectors = np.atleast_2d(np.asarray(vectors))
        terms = np.flatnonzero(np.any(vectors != 0, axis=0))
        if terms.size == 0:
            return np.zeros((vectors.shape[0], self.size))
        weights = vectors[:, terms].astype(np.float64)  # [queries × terms]
        key = terms.tobytes() + weights.tobytes() if vectors.shape[0] == 1 else None
        if key is not None and key in self._kept:
            self._kept.move_to_end(key)
            return self._kept[key]
        postings = self.by_term[terms]  # [terms × items]
        # (postingsᵀ [items × terms]) @ weightsᵀ: one pass over the postings for the batch
        found = np.ascontiguousarray((postings.T @ weights.T).T)
        found.flags.writeable = False
        if key is not None:
            self._kept[key] = found
            if len(self._kept) > KEPT:
                self._kept.popitem(last=False)
        return found

    def term_columns(self, terms: np.ndarray) -> Any:
        """The collection's weights of ``terms`` as a CSR ``[terms × items]`` (float64)."""
        return self.by_term[np.asarray(terms, dtype=np.int64)]


def place(scores: np.ndarray, target: int, target_score: float | None = None) -> Placement:
    """The target's placement among ``scores`` (every item's, float64); ``target_score``
    replaces the target's own (an edited target item against the others' unchanged scores)."""
    own = float(scores[target]) if target_score is None else float(target_score)
    others = scores.copy()
    others[target] = -np.inf
    rival = int(np.argmax(others)) if others.size > 1 else None  # argmax: lowest row of a tie
    rival_score = float(others[rival]) if rival is not None else float("-inf")
    if own <= 0:
        return Placement(None, own, rival, rival_score)
    above = int(np.count_nonzero(others > own)) + int(np.count_nonzero(others[:target] == own))
    return Placement(above + 1, own, rival, rival_score)
