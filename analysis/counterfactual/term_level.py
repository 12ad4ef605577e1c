"""The term-level counterfactual: the smallest set of vocabulary terms whose removal from
the query vector puts the target first among *all* items of the collection.

Removing term ``k`` lowers item ``i``'s score by ``a_ik = q_k d_ik``. With ``need_i = s_i −
s_t`` (how far item ``i`` is above the target ``t``) and ``g_ik = a_ik − a_tk`` (what
removing ``k`` gains against ``i``), a set ``S`` puts the target first when every other
item ends below it: ``need_i − Σ_{k∈S} g_ik < 0`` (``≤ 0`` for an item after the target in
collection order, the tie rule), and the target still scores above 0.

Exact search up to :data:`EXACT_SIZE` terms (iterative deepening, so the first size that
succeeds is the smallest):

- only *threats* can end above the target: a removal of at most ``m`` terms changes
  ``need_i`` by at most ``L`` (the ``m`` largest ``a_tk``, plus the ``m`` largest
  ``−a_ik`` of a signed collection), so items with ``need_i + L < 0`` are left out (each
  size ``m`` searches its own threats; they grow with ``m``);
- branching: some item still above the target needs a term with ``g_ik > 0`` (its gap
  cannot close otherwise), so each node branches only on the positive gains of the item
  still above with the fewest of them (complete: every solution contains one);
- bound: a node is cut when an item above the target cannot be passed even by its ``r``
  largest remaining gains (``r`` terms left);
- a target scoring 0 or less with no item above it (a signed collection) branches on the
  terms it loses by (``a_tk < 0``): only removing one of them raises it.

Beyond that size (or when the search exceeds its node budget) a greedy sequence — each step
removes the term that gains most against the current first rival — gives the *smallest
found*. Every step — the query without the terms removed so far — is scored against the
whole collection afresh (not by the subtraction above): its target score, rank and first
rival, the last step's being the answer's check.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lexlens.analysis.retrieval.scorer import Placement, Scorer, place

#: Sets up to this size are searched exhaustively (the answer is then the smallest).
EXACT_SIZE = 4
#: Search nodes visited at most before the exact search gives up (then: smallest found).
NODE_BUDGET = 200_000
#: The most terms the greedy sequence removes.
GREEDY_STEPS = 64
#: Solutions of the smallest size compared (the one leaving the target highest is kept).
SOLUTIONS_COMPARED = 32
#: Threat matrices larger than this (items × terms) are not searched exactly.
MAX_DENSE = 40_000_000


@dataclass(frozen=True)
class TermStep:
    """After removing one more term: the target's score and rank, the first rival."""

    term: int
    score: float
    rank: int | None
    rival: int | None
    rival_score: float


@dataclass
class TermAnswer:
    """The terms removed (vocabulary ids, in the order of the steps), whether the set is
    the smallest (exact search) and whether it puts the target first when checked."""

    terms: list[int] = field(default_factory=list)
    exact: bool = False
    first: bool = False
    steps: list[TermStep] = field(default_factory=list)
    before: Placement | None = None
    after: Placement | None = None
    nodes: int = 0
    note: str = ""


class _Search:
    """The exact search over one query's threats (see the module docstring)."""

    def __init__(self, need, gains, best_gains, target_gain, target_score, after_target, nodes):
        self.need = need  # [m] s_i − s_t over the threats
        self.gains = gains  # [m × c] g_ik
        self.best_gains = best_gains  # [m × (size + 1)] the sum of each item's r largest g_ik
        self.target_gain = target_gain  # [c] a_tk
        self.target_score = target_score
        self.after_target = after_target  # [m] the item's row is after the target's
        self.nodes = nodes  # visited so far (by the smaller sizes' searches too)
        self.solutions: list[tuple[int, ...]] = []
        self.seen: set[frozenset[int]] = set()

    def run(self, size: int) -> bool:
        """Search every set of ``size`` terms; ``False`` when the node budget ran out."""
        self.seen.clear()
        try:
            self._visit((), np.zeros(len(self.need)), 0.0, size)
        except _OutOfNodes:
            return False
        except _Enough:
            pass
        return True

    def _visit(self, chosen: tuple[int, ...], gained: np.ndarray, lost: float, left: int):
        self.nodes += 1
        if self.nodes > NODE_BUDGET:
            raise _OutOfNodes
        margin = self.need - gained
        above = (margin > 0) | ((margin == 0) & ~self.after_target)
        if not above.any():
            if self.target_score - lost > 0:
                if left == 0:
                    self.solutions.append(chosen)
                    if len(self.solutions) >= SOLUTIONS_COMPARED:
                        raise _Enough
                return
            # none above, but the target scores 0 or less (not retrieved): only removing a
            # term it loses by (a_tk < 0) raises it
            if left > 0:
                order = np.argsort(self.target_gain, kind="stable")
                self._branch(
                    chosen, gained, lost, left, [k for k in order if self.target_gain[k] < 0]
                )
            return
        if left == 0 or np.any(self.best_gains[above, left] < margin[above]):
            return
        rows = np.flatnonzero(above)
        options = (self.gains[rows] > 0).sum(axis=1)
        pick = rows[int(np.argmin(options))]
        order = np.argsort(-self.gains[pick], kind="stable")
        self._branch(chosen, gained, lost, left, [k for k in order if self.gains[pick, k] > 0])

    def _branch(self, chosen, gained, lost, left, terms) -> None:
        """Visit every set one term larger than ``chosen``, each of ``terms`` in turn."""
        for k in terms:
            if k in chosen:
                continue
            key = frozenset((*chosen, int(k)))
            if key in self.seen:
                continue
            self.seen.add(key)
            self._visit(
                (*chosen, int(k)), gained + self.gains[:, k], lost + self.target_gain[k], left - 1
            )


class _OutOfNodes(Exception):
    pass


class _Enough(Exception):
    pass


class _Contributions:
    """Each query term's contribution ``a_ik = q_k d_ik`` to every item, read by term (a
    dense row over the items) and by item (a dense column over the terms) without scipy's
    indexing overhead: the same values kept row-major and column-major."""

    def __init__(self, scorer: Scorer, q: np.ndarray, terms: np.ndarray) -> None:
        by_term = scorer.term_columns(terms).multiply(q[terms][:, None]).tocsr()  # [c × N]
        by_term.sort_indices()
        self.by_term, self.by_item = by_term, by_term.tocsc()
        self.terms, self.items = terms.size, by_term.shape[1]

    def row(self, k: int) -> np.ndarray:
        """Term ``k``'s contribution to every item."""
        out = np.zeros(self.items)
        a, b = self.by_term.indptr[k], self.by_term.indptr[k + 1]
        out[self.by_term.indices[a:b]] = self.by_term.data[a:b]
        return out

    def column(self, item: int) -> np.ndarray:
        """Every term's contribution to item ``item``."""
        out = np.zeros(self.terms)
        a, b = self.by_item.indptr[item], self.by_item.indptr[item + 1]
        out[self.by_item.indices[a:b]] = self.by_item.data[a:b]
        return out

    def columns(self, items: np.ndarray) -> np.ndarray:
        """``[len(items) × terms]``: every term's contribution to each of ``items``."""
        return self.by_item[:, items].toarray().T

    def most_negative(self) -> np.ndarray:
        """Per term, the largest ``−a_ik`` over the items (0 when none is negative)."""
        data = self.by_term.data
        if not np.any(data < 0):
            return np.zeros(self.terms)
        return (-self.by_term).maximum(0).max(axis=1).toarray().ravel()


def term_counterfactual(
    scorer: Scorer, q: np.ndarray, target: int, *, exact_size: int = EXACT_SIZE
) -> TermAnswer:
    """The smallest set of query terms whose removal puts ``target`` first (see the module
    docstring): exact up to ``exact_size`` terms, the greedy smallest found beyond."""
    q = np.asarray(q, dtype=np.float64)
    scores = scorer.all_scores(q)[0]
    answer = TermAnswer(before=scorer.placement(q, target, scores))
    if answer.before.first:
        answer.first, answer.exact, answer.after = True, True, answer.before
        return answer
    terms = np.flatnonzero(q)
    parts = _Contributions(scorer, q, terms)
    own = parts.column(target)
    if answer.before.score <= 0 and not np.any(own < 0):
        answer.after, answer.exact = answer.before, True
        answer.note = "the target scores 0 or less: removing query terms cannot raise it"
        return answer
    if exact_size > 0:
        found = _exact(scores, parts, own, target, exact_size, answer)
        if found is not None:
            return _finish(scorer, q, parts, terms, found, True, target, answer)
    sequence = _greedy(scores, parts, own, target)
    if sequence is None:
        answer.after = answer.before
        answer.note = "no set of query terms puts the target first"
        return answer
    return _finish(scorer, q, parts, terms, sequence, False, target, answer)


def _largest_gains(gains: np.ndarray, size: int) -> np.ndarray:
    """``[m × (size + 1)]``: per item, the sum of its ``r`` largest positive gains, r = 0…size."""
    positive = np.where(gains > 0, gains, 0.0)
    if positive.shape[1] > size:  # each item's ``size`` largest gains, then in order
        positive = -np.partition(-positive, size - 1, axis=1)[:, :size]
    top = -np.sort(-positive, axis=1)
    if top.shape[1] < size:  # fewer terms than the size searched: nothing more to gain
        top = np.pad(top, ((0, 0), (0, size - top.shape[1])))
    return np.concatenate([np.zeros((len(gains), 1)), np.cumsum(top, 1)], axis=1)


def _exact(scores, parts: _Contributions, own, target, size, answer) -> list[int] | None:
    """The exact search up to ``size`` terms (indices into the query's terms), or ``None``.
    Each size searches its own threats (the fewer terms removed, the fewer items can pass);
    they grow with the size, so each item's gains are read once."""
    largest_own = np.sort(np.maximum(own, 0))[::-1]
    largest_negative = np.sort(parts.most_negative())[::-1]
    spreads = [float(largest_own[:k].sum() + largest_negative[:k].sum()) for k in range(size + 1)]
    need_all = scores - scores[target]
    slack = 1e-9 * max(1.0, float(np.abs(scores[target])))
    candidates = np.flatnonzero(need_all + spreads[size] >= -slack)
    candidates = candidates[candidates != target]
    need_of = need_all[candidates]
    taken = np.zeros(candidates.size, dtype=bool)
    threats = np.zeros(0, dtype=np.int64)
    gains, best = np.zeros((0, own.size)), np.zeros((0, size + 1))
    for k in range(1, size + 1):
        wanted = need_of + spreads[k] >= -slack
        new = np.flatnonzero(wanted & ~taken)
        taken |= wanted
        if (threats.size + new.size) * own.size > MAX_DENSE:
            count = threats.size + new.size
            answer.note = f"{count:,} items could pass the target: too many to search exactly"
            return None
        if new.size:
            added = parts.columns(candidates[new]) - own[None, :]  # [new × c]
            threats = np.concatenate([threats, candidates[new]])
            gains = np.concatenate([gains, added])
            best = np.concatenate([best, _largest_gains(added, size)])
        search = _Search(
            need_all[threats],
            gains,
            best,
            own,
            float(scores[target]),
            threats > target,
            answer.nodes,
        )
        complete = search.run(k)
        answer.nodes = search.nodes
        if search.solutions:
            leftover = [float(scores[target]) - float(own[list(s)].sum()) for s in search.solutions]
            return list(search.solutions[int(np.argmax(leftover))])
        if not complete:
            answer.note = f"the exact search stopped after {NODE_BUDGET:,} nodes"
            return None
    return None


def _greedy(scores, parts: _Contributions, own, target) -> list[int] | None:
    """Remove, one at a time, the term that gains most against the current first rival."""
    current = scores.copy()
    removed: list[int] = []
    for _ in range(min(GREEDY_STEPS, own.size)):
        placed = place(current, target)
        if placed.first:
            return removed
        if placed.rank is None:  # the target scores 0 or less: the term it loses most by
            gain = -own
        elif placed.rival is None:
            return None
        else:
            gain = parts.column(placed.rival) - own
        gain[removed] = -np.inf
        k = int(np.argmax(gain))
        if not gain[k] > 0:
            return None
        removed.append(k)
        current -= parts.row(k)
    return removed if place(current, target).first else None


def _finish(scorer, q, parts: _Contributions, terms, chosen, exact, target, answer) -> TermAnswer:
    """Order the chosen terms (most gain against the current first rival first) and record
    each step: the query without the terms removed so far, scored against the whole
    collection afresh."""
    own = parts.column(target)
    edited, placed, left, steps, order = q.copy(), answer.before, list(chosen), [], []
    while left:
        rival_row = own if placed.rival is None else parts.column(placed.rival)
        k = max(left, key=lambda j: (rival_row[j] - own[j], -j))
        left.remove(k)
        order.append(k)
        edited[terms[k]] = 0.0
        placed = place(scorer.all_scores(edited)[0], target)
        steps.append(
            TermStep(int(terms[k]), placed.score, placed.rank, placed.rival, placed.rival_score)
        )
    answer.after = placed
    answer.terms = [int(terms[k]) for k in order]
    answer.steps = steps
    answer.first = answer.after.first
    answer.exact = exact and answer.first
    if not answer.first:
        answer.note = "the set found does not put the target first when scored afresh"
    return answer
