"""Which candidate edits to encode first: each edit's outcome predicted before the model
runs on it, the candidates predicted nearest success encoded first.

Every item's score is ``s_i = Σ_t q_t d_it``. A learned sparse encoder is contextual, so
no exact bound on a re-encoded score is known short of running it; the prediction works in
vocabulary space through provenance (the word whose unit won each query term's max pool):

- deleting words ``D`` takes their terms ``P_D`` out of the query: item ``i`` is predicted
  at ``s_i − Σ_{t∈P_D} q_t d_it`` (exact for the vector edit, linear in the scores);
- inserting words ``I`` into the target's text: each word's *probe* ``e_w`` is the largest
  per-unit weights of the query's own units of that word (what the word expands to, read
  from the query's encoding; without per-unit rows, the word encoded alone as a document),
  and the target is predicted at ``q·max(d, e_I)``: its vector pooled with the words'
  (max pooling, as the encoder pools its units); the query and every other item are
  unchanged by an insertion.

The search orders each level's candidates by the predicted margin (the best other item's
predicted score minus the target's, as a share of the target's score before the edit) and
encodes them in that order; the prediction never decides that a candidate fails: a "none
exists" means every candidate was encoded and ranked. Every answer shown is encoded alone
and ranked against the whole collection. The same prediction of a deletion's gap orders
single edits by their priors (:func:`.edit_search.prior_of`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import scipy.sparse as sp

from lexlens.analysis.retrieval.scorer import Scorer

#: The items scoring highest before the edit whose per-term contributions are kept: a
#: deletion only lowers scores, so when one of them stays above every other item's score
#: before the edit, the best other item is among them.
CONTENDERS = 512


class EditScreen:
    """Predicted outcomes of edited states from the query as given (see the module
    docstring); ``probe`` encodes words alone as documents (gated vectors), for inserted
    words whose probe ``probes`` does not hold."""

    def __init__(
        self,
        scorer: Scorer,
        q0: np.ndarray,
        root_scores: np.ndarray,
        row: int,
        provenance: Sequence[set[int]],
        d0: np.ndarray,
        probe: Callable[[list[str]], list[np.ndarray]] | None = None,
    ) -> None:
        self.scorer, self.q0, self.scores, self.row = scorer, q0, root_scores, row
        self.provenance, self.d0, self.probe = provenance, d0.astype(np.float64), probe
        self._order: np.ndarray | None = None  # items by score, best first (when needed)
        self.probes: dict[str, np.ndarray] = {}
        self.calls = 0  # words encoded alone as probes
        self._drops: dict[frozenset[int], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._gaps: dict[tuple, float] = {}
        self._contenders()

    def _contenders(self) -> None:
        """The :data:`CONTENDERS` best items' scores (the target's left out) and each query
        term's contribution to them, and the best score of every other item."""
        terms = np.flatnonzero(self.q0)
        scoring = np.flatnonzero(self.scores)  # every other item scores 0 (no query term)
        rest_best = 0.0 if scoring.size < self.scores.size else -np.inf
        if scoring.size > CONTENDERS:  # the best (any order), then the best of the others
            best = scoring[np.argpartition(-self.scores[scoring], CONTENDERS)[: CONTENDERS + 1]]
            top, rest_best = best[:CONTENDERS], max(rest_best, float(self.scores[best[-1]]))
        else:
            top = scoring
        self.term_index = {int(t): i for i, t in enumerate(terms)}
        parts = self.scorer.term_columns(terms)[:, top].toarray() if terms.size else None
        self.top_parts = (
            None if parts is None else parts * self.q0[terms].astype(np.float64)[:, None]
        )
        self.top_scores = self.scores[top].astype(np.float64)
        self.top_scores[top == self.row] = -np.inf
        self.rest_best = rest_best

    def _best_other(self, deleted: frozenset[int]) -> float:
        """The best predicted score of an item other than the target after the deletions."""
        terms = set().union(*(self.provenance[j] for j in deleted if j < len(self.provenance)))
        rows = [self.term_index[t] for t in terms if t in self.term_index]
        if self.top_parts is not None and len(rows) == len(terms):
            lowered = self.top_scores - self.top_parts[rows].sum(axis=0)
            best = float(lowered.max()) if lowered.size else -np.inf
            if best >= self.rest_best:
                return best
        items, loss, _ = self._drop(deleted)
        lowered = self.scores[items] - loss
        lowered[items == self.row] = -np.inf
        best = self._best_untouched(items)
        return max(best, float(lowered.max())) if lowered.size else best

    def _without(self, deleted: frozenset[int]) -> tuple[np.ndarray, float]:
        """The query without the deleted words' terms, and the target's predicted score."""
        terms = set().union(*(self.provenance[j] for j in deleted if j < len(self.provenance)))
        cols = np.array(sorted(terms), dtype=np.int64)
        q = self.q0.astype(np.float64).copy()
        own = float(self.scores[self.row]) - float(q[cols] @ self.d0[cols])
        q[cols] = 0.0
        return q, own

    def _drop(self, deleted: frozenset[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The items the deleted words' terms touch, each one's predicted loss, and the
        query without those terms."""
        if deleted not in self._drops:
            terms = set().union(*(self.provenance[j] for j in deleted if j < len(self.provenance)))
            cols = np.array(sorted(terms), dtype=np.int64)
            q = self.q0.astype(np.float64).copy()
            items, loss = np.zeros(0, np.int64), np.zeros(0)
            if cols.size:
                found = sp.csr_matrix(q[cols][None, :]) @ self.scorer.term_columns(cols)
                found.sort_indices()
                items, loss = found.indices.astype(np.int64), found.data
                q[cols] = 0.0
            self._drops[deleted] = (items, loss, q)
        return self._drops[deleted]

    def prepare(self, words: Sequence[str]) -> None:
        """Encode as probes, in one batch, the inserted words not probed yet."""
        todo = [w for w in dict.fromkeys(words) if w not in self.probes]
        if todo and self.probe is not None:
            for word, vector in zip(todo, self.probe(todo), strict=True):
                self.probes[word] = np.asarray(vector, dtype=np.float64)
            self.calls += len(todo)

    def gap(self, deleted: frozenset[int], inserted: Sequence[str] = ()) -> float:
        """The predicted gap after the edits: the best other item's predicted score minus
        the target's."""
        key = (deleted, tuple(sorted(inserted)))
        if key not in self._gaps:
            q, own = self._without(deleted)
            if inserted:
                self.prepare(inserted)
                pooled = self.d0
                for word in inserted:
                    if word in self.probes:
                        pooled = np.maximum(pooled, self.probes[word])
                own = float(q @ pooled)
            self._gaps[key] = self._best_other(deleted) - own
        return self._gaps[key]

    def margin(self, deleted: frozenset[int], inserted: Sequence[str]) -> float:
        """The predicted gap as a share of the target's score before the edits."""
        return self.gap(deleted, inserted) / max(abs(float(self.scores[self.row])), 1e-12)

    def _best_untouched(self, items: np.ndarray) -> float:
        """The best score among the items (but the target) outside ``items`` (sorted)."""
        if self._order is None:
            self._order = np.argsort(-self.scores, kind="stable")
        for start in range(0, self._order.size, 256):
            head = self._order[start : start + 256]
            at = np.minimum(np.searchsorted(items, head), max(items.size - 1, 0))
            free = (head != self.row) & ((items[at] != head) if items.size else True)
            if np.any(free):
                return float(self.scores[head[int(np.argmax(free))]])
        return -np.inf
