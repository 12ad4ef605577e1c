"""The text-level search: the shortest sequence of edits whose re-encoded inputs rank the
target first against the whole collection, within a budget of edits and model calls.

Breadth first by number of edits with a beam: every single edit first (deleting each
query word or occluding each cell, inserting each query word the target's text lacks), in
the order the term-level answer and provenance predict helps most; then the best few
states (lowest rank, smallest gap to the first rival) are extended by one more edit. An
edit of the target's text changes only the target's score, so it is ranked against the
others' scores kept for its query; an edited query is scored against every item
(:meth:`~lexlens.analysis.retrieval.scorer.Scorer.all_scores`).

With a screen (:mod:`.screen`, the default), a level's candidates are first predicted from
provenance without the model; those predicted near success are encoded, most promising
first — the first alone, the others in batches — until one ranks the target first; with
none, the :data:`BEAM` others predicted best are encoded too, as the next level's parents.
Without one, each level's candidates are all encoded (in one batch, or one at a time) and
the level's best success taken. The first level holding a success gives the answer, which
is verified before it is reported: its inputs encoded alone (as a user would; an input the
search already encoded alone is not encoded twice) and its query ranked against every item.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from lexlens.analysis.counterfactual.edits import (
    Edit,
    ImageQuery,
    TextQuery,
    TextTarget,
    word_key,
)
from lexlens.analysis.counterfactual.screen import EditScreen
from lexlens.analysis.retrieval.scorer import Placement, Scorer, place

#: States kept from one level to extend at the next.
BEAM = 4
#: Edited queries scored against the whole collection in one product.
SCORE_CHUNK = 32
#: Candidates encoded at once by a screened search (most promising first).
SCREEN_BATCH = 4
#: Successes of one level re-encoded alone before the level is given up on.
VERIFY_TRIES = 3


@dataclass(frozen=True)
class State:
    """Edits applied so far: the query's deleted words (cells) and the inserted words."""

    deleted: frozenset[int] = frozenset()
    inserted: tuple[str, ...] = ()
    edits: tuple[Edit, ...] = ()

    @property
    def key(self) -> tuple:
        return (self.deleted, tuple(sorted(self.inserted)))

    def plus(self, edit: Edit) -> State:
        if edit.side == "query":
            return State(self.deleted | {edit.position}, self.inserted, (*self.edits, edit))
        return State(self.deleted, (*self.inserted, edit.value), (*self.edits, edit))


def quality(placed: Placement) -> tuple[float, float]:
    """Lower is better: the rank (not retrieved last), then the gap to the first rival."""
    rank = math.inf if placed.rank is None else placed.rank
    return (rank, placed.rival_score - placed.score)


@dataclass
class Outcome:
    """What the search found: the answer (first and verified) or the closest state."""

    state: State
    placement: Placement
    found: bool
    verified: bool
    model_calls: int
    levels: int
    query_vector: np.ndarray | None = None
    notes: list[str] = field(default_factory=list)


class TextSearch:
    """One text-level search (see the module docstring)."""

    def __init__(
        self,
        scorer: Scorer,
        query: TextQuery | ImageQuery,
        target_row: int,
        target: TextTarget | None,
        q0: np.ndarray,
        d0: np.ndarray,
        budget: int,
        one_at_a_time: bool = False,
        screen: EditScreen | None = None,
    ) -> None:
        self.scorer, self.query, self.row, self.target = scorer, query, target_row, target
        #: encode and rank each candidate alone (the same search unbatched, for comparison)
        self.one_at_a_time = one_at_a_time
        #: predicts candidates' outcomes before encoding (``None``: encode every candidate)
        self.screen = screen
        self.screened = 0  # candidates left unencoded by the screen
        self.budget, self.calls = budget, 0
        self.d0 = d0.astype(np.float64)
        root_scores = scorer.all_scores(q0)[0]
        self.queries: dict[frozenset[int], tuple[np.ndarray, np.ndarray]] = {
            frozenset(): (q0.astype(np.float64), root_scores)
        }
        self.docs: dict[tuple[str, ...], np.ndarray] = {(): self.d0}
        #: the target before any edit: its rank is the evaluation's call (Scorer.rank_of)
        self.root = scorer.placement(q0, target_row, root_scores)
        #: inputs encoded alone (a batch of one), as a user would encode them: their vectors
        #: need no second encoding to be verified
        self.alone: set = {frozenset(), ()}
        self.seen: set[tuple] = {State().key}
        #: the single edits tried and how much each is predicted to help (set by the caller)
        self.singles: list[Edit] = []
        self.prior: Callable[[Edit], float] = lambda edit: 0.0

    # ------------------------------------------------------------------ evaluation
    def _placement(self, state: State) -> Placement:
        qv, scores = self.queries[state.deleted]
        if not state.inserted:
            return place(scores, self.row)
        dv = self.docs[tuple(sorted(state.inserted))]
        return place(scores, self.row, float(qv @ dv))

    def _needs(self, state: State) -> tuple[frozenset[int] | None, tuple[str, ...] | None]:
        doc = tuple(sorted(state.inserted))
        return (
            None if state.deleted in self.queries else state.deleted,
            None if doc in self.docs else doc,
        )

    def evaluate(self, states: list[State]) -> list[tuple[State, Placement]]:
        """Place ``states`` (best predicted first) within the budget: their new inputs
        encoded in batches, their queries scored against every item at once."""
        kept, new_queries, new_docs = [], [], []
        for state in states:
            q_key, d_key = self._needs(state)
            cost = int(q_key is not None and q_key not in new_queries)
            cost += int(d_key is not None and d_key not in new_docs)
            if self.calls + len(new_queries) + len(new_docs) + cost > self.budget:
                break
            if q_key is not None and q_key not in new_queries:
                new_queries.append(q_key)
            if d_key is not None and d_key not in new_docs:
                new_docs.append(d_key)
            kept.append(state)
        if self.one_at_a_time:
            self._one_by_one(new_queries, new_docs)
        elif new_queries:
            vectors = self.query.encode([self.query.edited(k) for k in new_queries])
            for start in range(0, len(vectors), SCORE_CHUNK):
                block = np.stack(vectors[start : start + SCORE_CHUNK]).astype(np.float64)
                scores = self.scorer.all_scores(block)
                for i in range(block.shape[0]):
                    self.queries[new_queries[start + i]] = (block[i], scores[i])
            if len(new_queries) == 1:
                self.alone.add(new_queries[0])
        if new_docs and not self.one_at_a_time:
            assert self.target is not None
            vectors = self.target.encode([self.target.edited(k) for k in new_docs])
            for key, vector in zip(new_docs, vectors, strict=True):
                self.docs[key] = vector.astype(np.float64)
            if len(new_docs) == 1:
                self.alone.add(new_docs[0])
        self.calls += len(new_queries) + len(new_docs)
        return [(state, self._placement(state)) for state in kept]

    def _one_by_one(self, new_queries: list, new_docs: list) -> None:
        """Each new input encoded alone, each edited query scored alone."""
        for key in new_queries:
            vector = self.query.encode([self.query.edited(key)])[0].astype(np.float64)
            self.queries[key] = (vector, self.scorer.all_scores(vector)[0])
            self.alone.add(key)
        for key in new_docs:
            assert self.target is not None
            self.docs[key] = self.target.encode([self.target.edited(key)])[0].astype(np.float64)
            self.alone.add(key)

    def forget(self, keep: list[State]) -> None:
        """Drop the kept scores of every query but the root's and those of ``keep``."""
        wanted = {frozenset(), *(s.deleted for s in keep)}
        for key in [k for k in self.queries if k not in wanted]:
            del self.queries[key]

    def verify(self, state: State) -> tuple[Placement, np.ndarray]:
        """``state``'s inputs encoded alone (re-encoded unless the search already encoded
        them alone) and its query ranked against every item afresh."""
        doc = tuple(sorted(state.inserted))
        if state.deleted in self.alone and state.deleted in self.queries:
            qv = self.queries[state.deleted][0]
        else:
            qv = self.query.encode([self.query.edited(state.deleted)])[0].astype(np.float64)
            self.calls += 1
        scores = self.scorer.all_scores(qv)[0]
        if not state.inserted:
            return place(scores, self.row), qv
        assert self.target is not None
        shown = self.target.edited(state.inserted)
        if doc in self.alone and doc in self.docs and self.target.edited(doc) == shown:
            dv = self.docs[doc]  # encoded alone from the very text shown
        else:
            dv = self.target.encode([shown])[0].astype(np.float64)
            self.calls += 1
        return place(scores, self.row, float(qv @ dv)), qv

    # ------------------------------------------------------------------ the search
    def run(self, singles: list[Edit], prior: Callable[[Edit], float], max_edits: int) -> Outcome:
        """Breadth first by number of edits (see the module docstring)."""
        if self.root.first:
            return Outcome(State(), self.root, True, True, 0, 0, self.queries[frozenset()][0])
        frontier: list[tuple[State, Placement]] = [(State(), self.root)]
        best: tuple[State, Placement] = (State(), self.root)
        notes: list[str] = []
        for level in range(1, max_edits + 1):
            candidates = self._children(frontier, singles, prior)
            if not candidates:
                notes.append("no further edit to try")
                break
            placed, tried = self._level(candidates, level < max_edits)
            if tried < len(candidates):
                notes.append(
                    f"the budget of model calls ran out at {level} edit(s): "
                    f"{tried} of {len(candidates)} candidates tried"
                )
            placed.sort(key=lambda sp: quality(sp[1]))
            if placed and quality(placed[0][1]) < quality(best[1]):
                best = placed[0]
            outcome = self._confirmed(placed, level, notes)
            if outcome is not None:
                return outcome
            frontier = placed[:BEAM]
            self.forget([s for s, _ in frontier])
            if not placed or self.calls >= self.budget:
                break
        return self._closest(best, notes)

    def _level(self, candidates: list[State], deeper: bool) -> tuple[list, int]:
        """One level's candidates placed, and how many the budget let be tried (screened
        ones count as tried). Screening: those predicted near success, most promising first
        (:func:`_chunks`) until one ranks the target first; with none and a level to go,
        also the :data:`BEAM` others predicted best, as the next parents."""
        if self.screen is None:
            placed = self.evaluate(candidates)
            return placed, len(placed)
        screen = self.screen
        margins = {s.key: screen.margin(s.deleted, s.inserted) for s in candidates}
        hopeful = [s for s in candidates if screen.may_rank_first(s.deleted, s.inserted)]
        hopeful.sort(key=lambda s: margins[s.key])
        placed: list[tuple[State, Placement]] = []
        for start, end in _chunks(len(hopeful)):
            chunk = hopeful[start:end]
            done = self.evaluate(chunk)
            placed += done
            if len(done) < len(chunk):
                return placed, len(placed)
            if any(p.first for _, p in done):
                self.screened += len(candidates) - len(placed)
                return placed, len(candidates)
        chosen = {s.key for s in hopeful}
        rest = sorted((s for s in candidates if s.key not in chosen), key=lambda s: margins[s.key])
        extra = self.evaluate(rest[:BEAM]) if deeper else []
        placed += extra
        self.screened += len(candidates) - len(placed)
        return placed, len(candidates)

    def _children(self, frontier, singles, prior) -> list[State]:
        """Every state one edit beyond the frontier, best predicted first."""
        scored: list[tuple[tuple, State]] = []
        for rank, (parent, _placed) in enumerate(frontier):
            for edit in singles:
                if edit.side == "query" and (
                    edit.position in parent.deleted
                    or len(parent.deleted) + 1 >= len(self.query.words)
                ):
                    continue
                if edit.side == "document" and edit.value in parent.inserted:
                    continue
                child = parent.plus(edit)
                if child.key in self.seen:
                    continue
                self.seen.add(child.key)
                scored.append(((rank, -prior(edit), len(scored)), child))
        scored.sort(key=lambda x: x[0])
        return [s for _, s in scored]

    def _confirmed(self, placed, level: int, notes: list[str]) -> Outcome | None:
        """The best success of a level, once re-encoded alone it still ranks first."""
        successes = [(s, p) for s, p in placed if p.first]
        successes.sort(key=lambda sp: sp[1].rival_score - sp[1].score)
        for state, _ in successes[:VERIFY_TRIES]:
            checked, qv = self.verify(state)
            if checked.first:
                return Outcome(state, checked, True, True, self.calls, level, qv, notes)
            notes.append("a success in a batch did not hold once re-encoded alone; skipped")
        return None

    def _closest(self, best: tuple[State, Placement], notes: list[str]) -> Outcome:
        """No success: the closest state, re-encoded alone (its rank is the model's; when
        alone it ranks the target first — a batch's padding moved the last bits — it is a
        verified fix)."""
        state, _ = best
        checked, qv = self.verify(state)
        return Outcome(state, checked, checked.first, True, self.calls, len(state.edits), qv, notes)


def _chunks(n: int) -> list[tuple[int, int]]:
    """Bounds of the screened batches: the most promising candidate alone (its encoding is
    then the one a user's would be), the others :data:`SCREEN_BATCH` at a time."""
    bounds = [(0, min(1, n))] if n else []
    bounds += [(s, min(s + SCREEN_BATCH, n)) for s in range(1, n, SCREEN_BATCH)]
    return bounds


def prior_of(
    query: TextQuery | ImageQuery,
    screen: EditScreen,
    provenance: list[set[int]],
    answer_terms: set[int],
    d0: np.ndarray,
) -> Callable[[Edit], float]:
    """How much each single edit is predicted to close the gap to the first rival: a
    deletion by removing the terms its word produced (``screen``'s prediction, linear in
    the scores), an insertion by the query weight of its word's terms the target lacks times
    their mean item weight; words behind the term-level answer first."""
    root_gap = screen.gap(frozenset())
    postings = screen.scorer.by_term
    q0 = screen.q0

    def mean_weight(term: int) -> float:  # over the items holding the term
        a, b = postings.indptr[term], postings.indptr[term + 1]
        return float(postings.data[a:b].mean()) if b > a else 0.0

    values: dict[tuple[str, int, str], float] = {}

    def value(edit: Edit) -> float:
        key = (edit.side, edit.position, edit.value)
        if key in values:
            return values[key]
        if edit.side == "query":
            terms = provenance[edit.position] if edit.position < len(provenance) else set()
            gap = root_gap - screen.gap(frozenset({edit.position})) if terms else 0.0
            bonus = float(len(terms & answer_terms))
        else:
            words = [j for j, w in enumerate(query.words) if word_key(w) == word_key(edit.value)]
            terms = set().union(*(provenance[j] for j in words if j < len(provenance)))
            lacking = [t for t in sorted(terms) if d0[t] == 0]
            gap = float(sum(q0[t] * mean_weight(t) for t in lacking))
            bonus = 0.0
        values[key] = gap + bonus * 1e6
        return values[key]

    return value
