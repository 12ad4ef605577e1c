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
  ``−a_ik`` of a signed collection), so items with ``need_i + L < 0`` are left out;
- branching: some item still above the target needs a term with ``g_ik > 0`` (its gap
  cannot close otherwise), so each node branches only on the positive gains of the item
  still above with the fewest of them (complete: every solution contains one);
- bound: a node is cut when an item above the target cannot be passed even by its ``r``
  largest remaining gains (``r`` terms left).

Beyond that size (or when the search exceeds its node budget) a greedy sequence — each step
removes the term that gains most against the current first rival — gives the *smallest
found*. Every answer is checked by scoring the edited vector against the whole collection
afresh (not by the subtraction above), and each step's target score and first rival come
from the whole collection too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lexlens.analysis.counterfactual.scoring import Placement, WholeIndexScorer, place

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

    def __init__(self, need, gains, target_gain, target_score, after_target, size):
        self.need = need  # [m] s_i − s_t over the threats
        self.gains = gains  # [m × c] g_ik
        self.target_gain = target_gain  # [c] a_tk
        self.target_score = target_score
        self.after_target = after_target  # [m] the item's row is after the target's
        positive = np.where(gains > 0, gains, 0.0)
        top = -np.sort(-positive, axis=1)[:, :size]
        if top.shape[1] < size:  # fewer terms than the size searched: nothing more to gain
            top = np.pad(top, ((0, 0), (0, size - top.shape[1])))
        self.best_gains = np.concatenate([np.zeros((len(need), 1)), np.cumsum(top, 1)], axis=1)
        self.nodes = 0
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
            if self.target_score - lost > 0 and left == 0:
                self.solutions.append(chosen)
                if len(self.solutions) >= SOLUTIONS_COMPARED:
                    raise _Enough
            return
        if left == 0 or np.any(self.best_gains[above, left] < margin[above]):
            return
        rows = np.flatnonzero(above)
        options = (self.gains[rows] > 0).sum(axis=1)
        pick = rows[int(np.argmin(options))]
        order = np.argsort(-self.gains[pick], kind="stable")
        for k in order:
            if self.gains[pick, k] <= 0:
                break
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


def term_counterfactual(
    scorer: WholeIndexScorer, q: np.ndarray, target: int, *, exact_size: int = EXACT_SIZE
) -> TermAnswer:
    """The smallest set of query terms whose removal puts ``target`` first (see the module
    docstring): exact up to ``exact_size`` terms, the greedy smallest found beyond."""
    q = np.asarray(q, dtype=np.float64)
    scores = scorer.scores(q)[0]
    answer = TermAnswer(before=place(scores, target))
    if answer.before.first:
        answer.first, answer.exact, answer.after = True, True, answer.before
        return answer
    terms = np.flatnonzero(q)
    contributions = scorer.term_columns(terms).multiply(q[terms][:, None]).tocsr()  # [c × N]
    own = np.asarray(contributions[:, target].todense()).ravel()
    if answer.before.score <= 0 and not np.any(own < 0):
        answer.after, answer.exact = answer.before, True
        answer.note = "the target scores 0 or less: removing query terms cannot raise it"
        return answer
    if exact_size > 0:
        found = _exact(scores, contributions, own, target, exact_size, answer)
        if found is not None:
            return _finish(scorer, q, scores, contributions, terms, found, True, target, answer)
    sequence = _greedy(scores, contributions, own, target)
    if sequence is None:
        answer.after = answer.before
        answer.note = "no set of query terms puts the target first"
        return answer
    return _finish(scorer, q, scores, contributions, terms, sequence, False, target, answer)


def _exact(scores, contributions, own, target, size, answer) -> list[int] | None:
    """The exact search up to ``size`` terms (indices into the query's terms), or ``None``."""
    spread = float(np.sort(np.maximum(own, 0))[::-1][:size].sum())
    negative = (-contributions).maximum(0).max(axis=1).toarray().ravel()
    spread += float(np.sort(negative)[::-1][:size].sum())
    need = scores - scores[target]
    slack = 1e-9 * max(1.0, float(np.abs(scores[target])))
    threats = np.flatnonzero(need + spread >= -slack)
    threats = threats[threats != target]
    if threats.size * own.size > MAX_DENSE:
        answer.note = f"{threats.size:,} items could pass the target: too many to search exactly"
        return None
    gains = contributions[:, threats].toarray().T - own[None, :]  # [m × c]
    search = _Search(need[threats], gains, own, float(scores[target]), threats > target, size)
    for k in range(1, size + 1):
        complete = search.run(k)
        answer.nodes = search.nodes
        if search.solutions:
            leftover = [float(scores[target]) - float(own[list(s)].sum()) for s in search.solutions]
            best = search.solutions[int(np.argmax(leftover))]
            return list(best)
        if not complete:
            answer.note = f"the exact search stopped after {NODE_BUDGET:,} nodes"
            return None
    return None


def _greedy(scores, contributions, own, target) -> list[int] | None:
    """Remove, one at a time, the term that gains most against the current first rival."""
    current = scores.copy()
    removed: list[int] = []
    dense_rows: dict[int, np.ndarray] = {}
    for _ in range(min(GREEDY_STEPS, own.size)):
        placed = place(current, target)
        if placed.first:
            return removed
        if placed.rank is None or placed.rival is None:
            return None
        rival_row = np.asarray(contributions[:, placed.rival].todense()).ravel()
        gain = rival_row - own
        gain[removed] = -np.inf
        k = int(np.argmax(gain))
        if not gain[k] > 0:
            return None
        removed.append(k)
        if k not in dense_rows:
            dense_rows[k] = contributions[k].toarray().ravel()
        current = current - dense_rows[k]
    return removed if place(current, target).first else None


def _finish(scorer, q, scores, contributions, terms, chosen, exact, target, answer) -> TermAnswer:
    """Order the chosen terms (most gain against the current first rival first), record
    each step over the whole collection, and check the edited vector afresh."""
    own = np.asarray(contributions[:, target].todense()).ravel()
    current, left, steps, order = scores.copy(), list(chosen), [], []
    while left:
        placed = place(current, target)
        rival = placed.rival
        rival_row = (
            np.asarray(contributions[:, rival].todense()).ravel() if rival is not None else own
        )
        k = max(left, key=lambda j: (rival_row[j] - own[j], -j))
        left.remove(k)
        order.append(k)
        current = current - contributions[k].toarray().ravel()
        after = place(current, target)
        steps.append(
            TermStep(int(terms[k]), after.score, after.rank, after.rival, after.rival_score)
        )
    edited = q.copy()
    edited[terms[order]] = 0.0
    answer.after = place(scorer.scores(edited)[0], target)
    answer.terms = [int(terms[k]) for k in order]
    answer.steps = steps
    answer.first = answer.after.first
    answer.exact = exact and answer.first
    if not answer.first:
        answer.note = "the set found does not put the target first when scored afresh"
    return answer
