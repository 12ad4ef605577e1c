"""Which candidate edits are worth encoding: each edit's outcome predicted before the model
runs on it, and only those predicted near success encoded.

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

A candidate is encoded when its predicted margin (the best other item's predicted score
minus the target's) is at most a tolerance times the target's score before the edit. On
the clipart benchmark sample with splade-tiny (60 failures, 358 single edits, 63 of them
successes once re-encoded) no success had a predicted margin above 0.106 of it for a
deletion or above −0.012 for an insertion; the tolerances (0.25 and 0.1) leave room beyond
both. The screen decides only what is encoded, and in which order: every answer shown is
encoded alone and ranked against the whole collection.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from lexlens.analysis.counterfactual.scoring import WholeIndexScorer

#: A candidate is encoded when its predicted margin to the first rival is at most this
#: share of the target's score before the edit: for a deletion only, and with an insertion.
TOLERANCE_DELETE = 0.25
TOLERANCE_INSERT = 0.1


class EditScreen:
    """Predicted outcomes of edited states from the query as given (see the module
    docstring); ``probe`` encodes words alone as documents (gated vectors), for inserted
    words whose probe ``probes`` does not hold."""

    def __init__(
        self, scorer: WholeIndexScorer, q0: np.ndarray, root_scores: np.ndarray, row: int,
        provenance: Sequence[set[int]], d0: np.ndarray,
        probe: Callable[[list[str]], list[np.ndarray]] | None = None,
    ) -> None:  # fmt: skip
        self.scorer, self.q0, self.scores, self.row = scorer, q0, root_scores, row
        self.provenance, self.d0, self.probe = provenance, d0.astype(np.float64), probe
        self.order = np.argsort(-root_scores, kind="stable")  # items by score, best first
        self.probes: dict[str, np.ndarray] = {}
        self.calls = 0  # words encoded alone as probes
        self._drops: dict[frozenset[int], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._margins: dict[tuple, float] = {}

    def _drop(self, deleted: frozenset[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The items the deleted words' terms touch, each one's predicted loss, and the
        query without those terms."""
        if deleted not in self._drops:
            terms = set().union(*(self.provenance[j] for j in deleted if j < len(self.provenance)))
            cols = np.array(sorted(terms), dtype=np.int64)
            q = self.q0.astype(np.float64).copy()
            items, loss = np.zeros(0, np.int64), np.zeros(0)
            if cols.size:
                import scipy.sparse as sp

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

    def margin(self, deleted: frozenset[int], inserted: Sequence[str]) -> float:
        """The predicted margin after the edits (the best other item's predicted score minus
        the target's), as a share of the target's score before them."""
        key = (deleted, tuple(sorted(inserted)))
        if key not in self._margins:
            items, loss, q = self._drop(deleted)
            own = float(self.scores[self.row]) - float(loss[items == self.row].sum())
            if inserted:
                self.prepare(inserted)
                pooled = self.d0
                for word in inserted:
                    if word in self.probes:
                        pooled = np.maximum(pooled, self.probes[word])
                own = float(q @ pooled)
            lowered = self.scores[items] - loss
            lowered[items == self.row] = -np.inf
            best = self._best_untouched(items)
            if lowered.size:
                best = max(best, float(lowered.max()))
            self._margins[key] = (best - own) / max(abs(float(self.scores[self.row])), 1e-12)
        return self._margins[key]

    def _best_untouched(self, items: np.ndarray) -> float:
        """The best score among the items (but the target) outside ``items`` (sorted)."""
        for start in range(0, self.order.size, 256):
            head = self.order[start : start + 256]
            at = np.minimum(np.searchsorted(items, head), max(items.size - 1, 0))
            free = (head != self.row) & ((items[at] != head) if items.size else True)
            if np.any(free):
                return float(self.scores[head[int(np.argmax(free))]])
        return -np.inf

    def may_rank_first(self, deleted: frozenset[int], inserted: Sequence[str]) -> bool:
        """Whether the predicted margin is within the tolerance (:data:`TOLERANCE_DELETE`,
        :data:`TOLERANCE_INSERT` with an insertion)."""
        tolerance = TOLERANCE_INSERT if inserted else TOLERANCE_DELETE
        return self.margin(deleted, inserted) <= tolerance
