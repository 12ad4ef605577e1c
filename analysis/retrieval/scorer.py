"""The one exact scorer of a collection: ``s_i = Σ_t q_t d_it`` (no normalisation), float64.

Every analysis that scores queries against a collection — search, an evaluation and its
failures, the counterfactuals and faithfulness checks added to it, the systems comparison's
"why", compare and export — asks the one :class:`Scorer` of that collection
(:func:`scorer_for`), so a counterfactual's rank before its edit *is* the evaluation's rank
of that item: the same call (:meth:`Scorer.rank_of`) on the same object.

- :meth:`~Scorer.top`: one query's exact top n by MaxScore over the collection's postings
  (:mod:`.ranking`: a large index's stored float16 postings, memory-mapped and read in place;
  an exact float32 transpose of a small one's CSR), every item whose score could still reach
  the top n rescored exactly in float64 from its stored row; ties broken by row;
- :meth:`~Scorer.rank`: the same for many queries (only items scoring above 0 ranked: one
  that shares no term with the query, or whose terms cancel to 0 or less, is *not
  retrieved*); memory: what one query touches, whatever the number of queries (a large
  batch maps the index's files in one pass first: the kernel's shared page cache);
- :meth:`~Scorer.scores_of`: the exact scores of given rows; :meth:`~Scorer.rank_of`: an
  item's exact rank at any depth;
- :meth:`~Scorer.all_scores`: every item's score for a batch of query vectors, from the
  collection's transpose ``[|V| × items]`` (float64, built on first use): one sparse × dense
  product over the union of their terms, so each candidate edit of a counterfactual is
  ranked against *all* items exactly; :func:`place` reads where an item ranks among them.

An item ranks above another when it scores more, or the same with a lower row (collection
order); a target scoring 0 or less is not retrieved (no rank).
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lexlens.analysis.collections.stored import is_stored
from lexlens.analysis.core.collection import Collection
from lexlens.analysis.core.results import Progress
from lexlens.analysis.retrieval.ranking import (
    exact_scores_of,
    ranked,
    touched_items,
)

#: Queries ranked between two progress reports.
PROGRESS_EVERY = 64
#: A batch whose queries × n reach this share of the items maps the index's rows and
#: postings in one pass first (the pages it would otherwise fault in one by one).
WARM_SHARE = 0.02
#: Bytes between two reads of that pass (one page).
PAGE = 4096
#: Single queries whose every-item scores a scorer keeps (a counterfactual scores the query
#: as given again after each edit it tries).
KEPT = 4

#: A query vector kept sparse: (columns int64, weights float32).
Sparse = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class QueryRanking:
    """One query's exact top n (rows, float64 scores > 0, best first, ties by row); the
    approximate scores of every item it touches, needed only to rank an item beyond the top
    n, are made on the first such request (:meth:`Scorer.rank_of`) and kept here."""

    rows: np.ndarray
    scores: np.ndarray
    _touched: list = field(default_factory=list, compare=False, repr=False)


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


class Scorer:
    """Exact scores of query vectors over one collection (see the module docstring); one
    per collection, from :func:`scorer_for`. It holds the collection weakly (the collection
    owns it), and what it derives is built on first use."""

    def __init__(self, collection: Collection) -> None:
        self._collection = weakref.ref(collection)
        self.size = len(collection)
        self._lock = threading.Lock()
        self._warmed = False
        self._by_term: Any = None  # the float64 transpose [|V| × items], on first use
        self._kept: OrderedDict[bytes, np.ndarray] = OrderedDict()

    @property
    def collection(self) -> Collection:
        """The collection scored."""
        collection = self._collection()
        if collection is None:
            raise ReferenceError("the collection of this scorer is no longer open")
        return collection

    # ------------------------------------------------------------------ top n
    def top(
        self, q: np.ndarray, n: int, *, normalize: bool = False, square: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """Rows and exact scores of the ``n`` best items for ``score_i = Σ_t q_t f(w_it) /
        ν_i`` (``f(w) = w``, or ``w²`` when ``square``; ``ν_i = ‖w_i‖₂``, squared when
        square, when ``normalize``, else 1), best first, ties by row; only items that share
        a term with ``q`` are candidates (:func:`.ranking.ranked`)."""
        return ranked(self.collection, q, n, normalize=normalize, square=square)

    def rank(
        self, vectors: Sequence[np.ndarray], n: int, progress: Progress | None = None
    ) -> Iterator[QueryRanking]:
        """The :class:`QueryRanking` of every query (dense vectors ``[|V|]``), in order."""
        collection = self.collection
        total = len(vectors)
        if total * n >= WARM_SHARE * self.size:
            self._warm(collection)
        for done, q in enumerate(vectors, 1):
            rows, scores = ranked(collection, q, n, mapped=True)
            retrieved = scores > 0  # scoring 0 or less: not retrieved
            yield QueryRanking(rows[retrieved], scores[retrieved])
            if progress and (done % PROGRESS_EVERY == 0 or done == total):
                progress(done / total, f"{done}/{total} queries ranked")

    def _warm(self, collection: Any) -> None:
        """Map the stored index's rows and postings into this process in one pass, once
        (they stay the kernel's shared page cache: nothing is copied)."""
        with self._lock:
            if self._warmed:
                return
            self._warmed = True
        if not is_stored(collection):
            return
        postings = collection.postings
        arrays = (collection.indices, collection.data)
        if postings is not None:
            arrays += (postings.items, postings.weights)
        for array in arrays:
            if isinstance(array, np.memmap) and array.size:
                np.asarray(array).view(np.uint8)[::PAGE].max()

    # ------------------------------------------------------------------ given rows
    def scores_of(self, rows: Sequence[int] | np.ndarray, q: np.ndarray) -> np.ndarray:
        """The exact scores (float64) of the items at ``rows``, their stored rows read at
        once."""
        return exact_scores_of(self.collection, np.asarray(rows, np.int64), q, mapped=True)

    def score_of(self, row: int, q: np.ndarray) -> float:
        """Item ``row``'s exact score for the dense query ``q`` (float64)."""
        return float(self.scores_of(np.array([row], np.int64), q)[0])

    def rank_of(
        self, q: np.ndarray, row: int, ranking: QueryRanking | None = None
    ) -> tuple[int | None, float]:
        """The exact 1-based rank and score of item ``row`` for ``q`` (ties by row), at any
        depth; rank ``None`` when it scores 0 or less (not retrieved). With ``ranking`` (the
        query's own, from :meth:`rank`), an item it lists is read from it, and the touched
        items' bounds an item beyond it needs are kept in it for the next call."""
        if ranking is not None:
            listed = np.flatnonzero(ranking.rows == row)
            if listed.size:
                return int(listed[0]) + 1, float(ranking.scores[listed[0]])
        score = self.score_of(row, q)
        if score <= 0:
            return None, score
        if ranking is None:
            touched, approx, slack = touched_items(self.collection, q)
        else:
            if not ranking._touched:
                ranking._touched.append(touched_items(self.collection, q))
            touched, approx, slack = ranking._touched[0]
        above = approx - slack > score
        unsure = ~above & (approx + slack >= score)
        count = int(above.sum())
        rows = touched[unsure]
        if rows.size:
            scores = self.scores_of(rows, q)
            count += int(np.count_nonzero((scores > score) | ((scores == score) & (rows < row))))
        return count + 1, score

    def placement(self, q: np.ndarray, row: int, scores: np.ndarray | None = None) -> Placement:
        """Where item ``row`` ranks for ``q``: its rank from :meth:`rank_of` (the call an
        evaluation ranks a relevant item with), its score and first rival among every
        item's scores (``scores``: :meth:`all_scores` of ``q``, given when made already)."""
        if scores is None:
            scores = self.all_scores(q)[0]
        rank, _ = self.rank_of(q, row)
        placed = place(scores, row)
        return Placement(rank, placed.score, placed.rival, placed.rival_score)

    def dense_rows(self, rows: Sequence[int]) -> np.ndarray:
        """Stored items as dense vectors ``[len(rows), |V|]`` (float32, as stored)."""
        collection = self.collection
        out = np.zeros((len(rows), collection.vocab_size), np.float32)
        for i, row in enumerate(rows):
            cols, vals = collection.row(int(row))
            out[i, np.asarray(cols, np.int64)] = np.asarray(vals, np.float32)
        return out

    # ------------------------------------------------------------------ every item
    @property
    def by_term(self) -> Any:
        """The collection's transpose ``[|V| × items]`` as a scipy CSR matrix (float64,
        sorted indices; built once, on first use)."""
        with self._lock:
            if self._by_term is None:
                transpose = self.collection.matrix().astype(np.float64).T.tocsr()
                transpose.sort_indices()
                self._by_term = transpose
            return self._by_term

    def all_scores(self, vectors: np.ndarray) -> np.ndarray:
        """``[queries × items]`` float64 scores of dense query vectors ``[queries × |V|]``
        (read-only; the last :data:`KEPT` single queries' are kept and given again)."""
        vectors = np.atleast_2d(np.asarray(vectors))
        terms = np.flatnonzero(np.any(vectors != 0, axis=0))
        if terms.size == 0:
            return np.zeros((vectors.shape[0], self.size))
        weights = vectors[:, terms].astype(np.float64)  # [queries × terms]
        key = terms.tobytes() + weights.tobytes() if vectors.shape[0] == 1 else None
        if key is not None:
            with self._lock:
                if key in self._kept:
                    self._kept.move_to_end(key)
                    return self._kept[key]
        postings = self.by_term[terms]  # [terms × items]
        # (postingsᵀ [items × terms]) @ weightsᵀ: one pass over the postings for the batch
        found = np.ascontiguousarray((postings.T @ weights.T).T)
        found.flags.writeable = False
        if key is not None:
            with self._lock:
                self._kept[key] = found
                if len(self._kept) > KEPT:
                    self._kept.popitem(last=False)
        return found

    def term_columns(self, terms: np.ndarray) -> Any:
        """The collection's weights of ``terms`` as a CSR ``[terms × items]`` (float64)."""
        return self.by_term[np.asarray(terms, dtype=np.int64)]


_SCORERS: weakref.WeakKeyDictionary[Collection, Scorer] = weakref.WeakKeyDictionary()
_SCORERS_LOCK = threading.Lock()


def scorer_for(collection: Collection) -> Scorer:
    """The one :class:`Scorer` of ``collection`` (made on first request, kept while the
    collection lives)."""
    with _SCORERS_LOCK:
        scorer = _SCORERS.get(collection)
        if scorer is None:
            scorer = _SCORERS[collection] = Scorer(collection)
        return scorer


def place(scores: np.ndarray, target: int, target_score: float | None = None) -> Placement:
    """The target's placement among ``scores`` (every item's, float64:
    :meth:`Scorer.all_scores`); ``target_score`` replaces the target's own (an edited target
    item against the others' unchanged scores)."""
    own = float(scores[target]) if target_score is None else float(target_score)
    others = scores.copy()
    others[target] = -np.inf
    rival = int(np.argmax(others)) if others.size > 1 else None  # argmax: lowest row of a tie
    rival_score = float(others[rival]) if rival is not None else float("-inf")
    if own <= 0:
        return Placement(None, own, rival, rival_score)
    above = int(np.count_nonzero(others > own)) + int(np.count_nonzero(others[:target] == own))
    return Placement(above + 1, own, rival, rival_score)


def scores_against(queries: Sequence[Sparse], items: np.ndarray) -> np.ndarray:
    """Scores ``[len(queries), len(items)]`` of sparse query vectors against dense item
    vectors ``items [n_items, |V|]`` (:meth:`Scorer.dense_rows`, or a document outside any
    collection), float64 products and sums."""
    out = np.zeros((len(queries), items.shape[0]))
    for i, (cols, vals) in enumerate(queries):
        if cols.size:
            out[i] = items[:, cols].astype(np.float64) @ vals.astype(np.float64)
    return out
