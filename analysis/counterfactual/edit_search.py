"""The text-level search: the shortest sequence of edits whose re-encoded inputs rank the
target first against the whole collection, within a budget of edits and model calls —
or, when none does, which of two things holds: *none exists in this edit space* (every
candidate up to the most edits was encoded and ranked) or *none found* (N of the space's
M candidates searched before the budget ran out).

The edit space (:class:`EditSpace`): delete a set of query words (occlude cells of an
image query; at least one kept) and insert a sequence of distinct words into the target's
text — every order of them a candidate of its own, an encoder reads order — with at most
``max_edits`` edits in all. A candidate needs two encodings, its edited query and its
edited document, each shared by many candidates: the space of ``Σ C(n,d)·P(v,i)``
candidates needs only ``Σ C(n,d) + Σ P(v,i)`` model calls, and when that fits the budget
the search enumerates it whole.

Level by level (one edit, two, …), every candidate of the level is ordered — by the
screen's prediction (:mod:`.screen`), or by the single edits' priors — and their inputs
are encoded in that order: the first alone (a user's encoding), the rest in batches; every
candidate whose two inputs are encoded is ranked at once (its query scored against every
item with the one exact scorer, :meth:`~lexlens.analysis.retrieval.scorer.Scorer.all_scores`;
an edited target's own score against the others' scores kept for its query). The first
candidate ranking the target first (or within :data:`NEAR` of it: a batch's padding moves
the last bits) is verified — its inputs encoded alone and its query ranked against every
item — and is the answer: the shortest, as every candidate of fewer edits was ranked
before. The screen orders candidates; it never decides a "none". A level too large to
order whole (beyond :data:`ENUMERATE`) is searched from the best states of the level
below (a beam), and its answer is then the shortest found, not proven shortest.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
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

#: States kept from one level to extend at the next, when a level is too large to order.
BEAM = 16
#: A level with more candidates than this is searched from the beam, not enumerated.
ENUMERATE = 20_000
#: A level with more candidates than this is ordered by the single edits' priors, not by
#: the screen's prediction of each candidate (which pools vectors over the vocabulary).
SCREEN_ORDER = 4_000
#: Edited queries scored against the whole collection in one product.
SCORE_CHUNK = 32
#: Inputs encoded at once after the first (which is encoded alone).
SCREEN_BATCH = 8
#: Successes of one level re-encoded alone before the level is given up on.
VERIFY_TRIES = 3
#: A candidate whose first rival leads by at most this share of the target's score is
#: verified alone too: a batch's padding may have moved it across.
NEAR = 1e-4
#: The best other items kept per edited query, to rank candidates without its full scores.
KEPT_RIVALS = 256

Sparse = tuple[np.ndarray, np.ndarray]


def _sparse(vector: np.ndarray) -> Sparse:
    cols = np.flatnonzero(vector)
    return cols, np.asarray(vector[cols], dtype=np.float64)


def dot(q: Sparse, d: Sparse) -> float:
    """``q · d`` of two sparse vectors, float64 (the search's and the verification's rule)."""
    _, i, j = np.intersect1d(q[0], d[0], assume_unique=True, return_indices=True)
    return float(q[1][i] @ d[1][j])


@dataclass(frozen=True)
class EditSpace:
    """The candidates of one search: deletions among ``deletable`` query units (at least
    one unit kept), ordered insertions of distinct ``words``, at most ``max_edits`` edits."""

    units: int
    deletable: bool
    words: tuple[str, ...]
    max_edits: int

    def most_deleted(self) -> int:
        return max(0, self.units - 1) if self.deletable else 0

    def level_size(self, level: int) -> int:
        """Candidates with exactly ``level`` edits."""
        return sum(
            math.comb(self.units, d) * math.perm(len(self.words), level - d)
            for d in range(0, min(level, self.most_deleted()) + 1)
            if level - d <= len(self.words)
        )

    @property
    def size(self) -> int:
        """Every candidate (M)."""
        return sum(self.level_size(k) for k in range(1, self.max_edits + 1))

    @property
    def encodings(self) -> int:
        """The model calls ranking every candidate takes: each edited query and each
        edited document once."""
        queries = sum(
            math.comb(self.units, d) for d in range(1, min(self.max_edits, self.most_deleted()) + 1)
        )
        docs = sum(
            math.perm(len(self.words), i)
            for i in range(1, min(self.max_edits, len(self.words)) + 1)
        )
        return queries + docs

    def level(self, level: int) -> Iterator[tuple[frozenset[int], tuple[str, ...]]]:
        """The candidates with ``level`` edits: (deleted units, inserted words in order)."""
        for d in range(0, min(level, self.most_deleted()) + 1):
            i = level - d
            if i > len(self.words):
                continue
            for deleted in itertools.combinations(range(self.units), d):
                for inserted in itertools.permutations(self.words, i):
                    yield frozenset(deleted), inserted


@dataclass(frozen=True)
class State:
    """Edits applied so far: the query's deleted words (cells) and the inserted words."""

    deleted: frozenset[int] = frozenset()
    inserted: tuple[str, ...] = ()

    @property
    def key(self) -> tuple:
        return (self.deleted, self.inserted)

    @property
    def size(self) -> int:
        return len(self.deleted) + len(self.inserted)


def quality(placed: Placement) -> tuple[float, float]:
    """Lower is better: the rank (not retrieved last), then the gap to the first rival."""
    rank = math.inf if placed.rank is None else placed.rank
    return (rank, placed.rival_score - placed.score)


@dataclass
class Outcome:
    """What the search found: the answer (first and verified) or the closest state, and
    how much of the space was searched: ``status`` found, "none exists" (every candidate
    ranked) or "none found"; ``searched`` of ``space`` candidates; ``exhaustive`` the space
    fit the budget; ``shortest`` every candidate of fewer edits was ranked."""

    state: State
    edits: tuple[Edit, ...]
    placement: Placement
    found: bool
    verified: bool
    model_calls: int
    levels: int
    status: str = "none found"
    searched: int = 0
    space: int = 0
    exhaustive: bool = False
    shortest: bool = False
    notes: list[str] = field(default_factory=list)


@dataclass
class Ranked:
    """An edited query encoded: its sparse vector, the target's score under it and the
    best :data:`KEPT_RIVALS` other items (scores descending, ties by row)."""

    vector: Sparse
    own: float
    rival_scores: np.ndarray
    rival_rows: np.ndarray


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
        #: orders each level's candidates by its prediction (``None``: by the priors)
        self.screen = screen
        self.budget, self.calls = budget, 0
        root_scores = scorer.all_scores(q0)[0]
        self.queries: dict[frozenset[int], Ranked] = {
            frozenset(): self._ranked(q0.astype(np.float64), root_scores)
        }
        self.docs: dict[tuple[str, ...], Sparse] = {(): _sparse(d0.astype(np.float64))}
        #: the target before any edit: its rank is the evaluation's call (Scorer.rank_of)
        self.root = scorer.placement(q0, target_row, root_scores)
        #: inputs encoded alone (a batch of one), as a user would encode them: their vectors
        #: need no second encoding to be verified
        self.alone: set = {frozenset(), ()}
        self.words: tuple[str, ...] = ()  # the words that may be inserted (set by the caller)
        self.singles: list[Edit] = []
        self.prior: Callable[[Edit], float] = lambda edit: 0.0
        self.excluded: list[dict] = []  # words left out of the insertions, with why
        self.searched = 0
        self.max_edits = 0
        self.first_batch = True

    # ------------------------------------------------------------------ encoding, ranking
    def _ranked(self, vector: np.ndarray, scores: np.ndarray) -> Ranked:
        others = np.asarray(scores, dtype=np.float64).copy()
        others[self.row] = -np.inf
        keep = min(KEPT_RIVALS, others.size - 1)
        if keep <= 0:
            rows = np.zeros(0, np.int64)
        else:
            head = np.argpartition(-others, keep - 1)[:keep] if keep < others.size else None
            head = np.arange(others.size) if head is None else head
            rows = head[np.lexsort((head, -others[head]))]
        return Ranked(_sparse(vector), float(scores[self.row]), others[rows], rows)

    def _place(self, state: State) -> Placement:
        """The target's placement under ``state`` from the kept rivals (a rank beyond them
        reads as one past them; the answer shown is verified against every item)."""
        ranked = self.queries[state.deleted]
        own = ranked.own if not state.inserted else dot(ranked.vector, self.docs[state.inserted])
        scores, rows = ranked.rival_scores, ranked.rival_rows
        rival = int(rows[0]) if rows.size else None
        rival_score = float(scores[0]) if rows.size else float("-inf")
        if own <= 0:
            return Placement(None, own, rival, rival_score)
        above = int(np.count_nonzero(scores > own))
        above += int(np.count_nonzero((scores == own) & (rows < self.row)))
        return Placement(above + 1, own, rival, rival_score)

    def _encode(self, query_keys: list[frozenset[int]], doc_keys: list[tuple[str, ...]]) -> None:
        """Encode the edited queries and documents (in one batch each, or each alone) and
        rank each query against every item."""
        size = 1 if self.one_at_a_time else max(len(query_keys), len(doc_keys), 1)
        for start in range(0, len(query_keys), size):
            keys = query_keys[start : start + size]
            vectors = self.query.encode([self.query.edited(k) for k in keys])
            for s in range(0, len(vectors), SCORE_CHUNK):
                block = np.stack(vectors[s : s + SCORE_CHUNK]).astype(np.float64)
                scores = self.scorer.all_scores(block)
                for i in range(block.shape[0]):
                    self.queries[keys[s + i]] = self._ranked(block[i], scores[i])
            if len(keys) == 1:
                self.alone.add(keys[0])
        for start in range(0, len(doc_keys), size):
            assert self.target is not None
            keys = doc_keys[start : start + size]
            vectors = self.target.encode([self.target.edited(k) for k in keys])
            for key, vector in zip(keys, vectors, strict=True):
                self.docs[key] = _sparse(np.asarray(vector, dtype=np.float64))
            if len(keys) == 1:
                self.alone.add(keys[0])
        self.calls += len(query_keys) + len(doc_keys)

    def verify(self, state: State) -> Placement:
        """``state``'s inputs encoded alone (re-encoded unless the search already encoded
        them alone) and its query ranked against every item afresh."""
        if state.deleted in self.alone and state.deleted in self.queries:
            qv = self.queries[state.deleted].vector
        else:
            vector = self.query.encode([self.query.edited(state.deleted)])[0]
            qv = _sparse(np.asarray(vector, dtype=np.float64))
            self.calls += 1
        dense = np.zeros(len(self.scorer.collection.vocab))
        dense[qv[0]] = qv[1]
        scores = self.scorer.all_scores(dense)[0]
        if not state.inserted:
            return place(scores, self.row)
        assert self.target is not None
        if state.inserted in self.alone and state.inserted in self.docs:
            dv = self.docs[state.inserted]
        else:
            vector = self.target.encode([self.target.edited(state.inserted)])[0]
            dv = _sparse(np.asarray(vector, dtype=np.float64))
            self.calls += 1
        return place(scores, self.row, dot(qv, dv))

    # ------------------------------------------------------------------ the search
    def edits_of(self, state: State) -> tuple[Edit, ...]:
        """The state's edits as reported: deletions in query order, then the insertions."""
        at = "" if self.target is None else self.target.at
        deletions = tuple(
            Edit("occlude" if self.query.kind == "image" else "delete", "query", w, j)
            for j, w in enumerate(self.query.words)
            if j in state.deleted
        )
        return deletions + tuple(
            Edit("insert", "document", w, -1, at, k) for k, w in enumerate(state.inserted)
        )

    def run(self, space: EditSpace) -> Outcome:
        """Level by level over ``space`` (see the module docstring)."""
        exhaustive = space.encodings <= self.budget - self.calls  # the probes' calls spent
        self.max_edits = space.max_edits
        if self.root.first:
            return Outcome(
                State(), (), self.root, True, True, 0, 0, "found", 0, space.size, exhaustive, True
            )
        best: tuple[State, Placement] = (State(), self.root)
        notes: list[str] = []
        frontier: list[tuple[State, Placement]] = [best]
        complete = True  # every level so far ranked whole
        for level in range(1, space.max_edits + 1):
            size = space.level_size(level)
            if size == 0:
                break
            if size > ENUMERATE:
                candidates = self._children(frontier, space)
                complete = False
                notes.append(
                    f"{size:,} candidates of {level} edits: those extending the best "
                    f"{len(frontier)} of {level - 1} searched first"
                )
            else:
                candidates = [State(d, i) for d, i in space.level(level)]
            placed, success, whole = self._level(self._ordered(candidates), notes)
            if success is not None:
                state, checked = success
                return Outcome(
                    state,
                    self.edits_of(state),
                    checked,
                    True,
                    True,
                    self.calls,
                    level,
                    "found",
                    self.searched,
                    space.size,
                    exhaustive,
                    complete,
                    notes,
                )
            placed.sort(key=lambda sp: quality(sp[1]))
            if placed and quality(placed[0][1]) < quality(best[1]):
                best = placed[0]
            frontier = placed[:BEAM]
            if not whole:
                complete = False
                notes.append(
                    f"the budget of {self.budget} model calls ran out at {level} edit(s): "
                    f"{self.searched:,} of {space.size:,} candidates searched"
                )
                break
        return self._closest(best, space, complete, exhaustive, notes)

    def _ordered(self, candidates: list[State]) -> list[State]:
        """Most promising first: the screen's predicted margin, or the priors' sum."""
        if self.screen is not None and len(candidates) <= SCREEN_ORDER:
            screen = self.screen
            return sorted(candidates, key=lambda s: screen.margin(s.deleted, s.inserted))
        singles = {(e.side, e.position if e.side == "query" else e.value): e for e in self.singles}

        def promise(state: State) -> float:
            total = sum(self.prior(singles[("query", j)]) for j in state.deleted)
            return -(total + sum(self.prior(singles[("document", w)]) for w in state.inserted))

        return sorted(candidates, key=promise)

    def _children(self, frontier: list[tuple[State, Placement]], space: EditSpace) -> list[State]:
        """Every state one edit beyond the frontier's (a deletion, or a word appended)."""
        out: dict[tuple, State] = {}
        for parent, _ in frontier:
            if space.deletable and len(parent.deleted) < space.most_deleted():
                for j in range(space.units):
                    if j not in parent.deleted:
                        child = State(parent.deleted | {j}, parent.inserted)
                        out.setdefault(child.key, child)
            for word in space.words:
                if word not in parent.inserted:
                    child = State(parent.deleted, (*parent.inserted, word))
                    out.setdefault(child.key, child)
        return list(out.values())

    def _level(
        self, ordered: list[State], notes: list[str]
    ) -> tuple[list[tuple[State, Placement]], tuple[State, Placement] | None, bool]:
        """Encode the level's inputs in the candidates' order, ranking each candidate once
        both its inputs are encoded; stop at the first verified success. Returns the
        placed candidates, the success (or ``None``) and whether every candidate was
        ranked."""
        waiting: dict[object, list[int]] = {}
        missing = [0] * len(ordered)
        placed: list[tuple[State, Placement]] = []
        ready: list[int] = []
        for n, state in enumerate(ordered):
            for key in self._missing(state):
                waiting.setdefault(key, []).append(n)
                missing[n] += 1
            if missing[n] == 0:
                ready.append(n)
        cursor = 0
        while True:
            success = self._rank(ready, ordered, placed, notes)
            if success is not None:
                return placed, success, False
            ready = []
            while cursor < len(ordered) and missing[cursor] == 0:
                cursor += 1
            if cursor == len(ordered):
                return placed, None, True
            want = 1 if (self.first_batch or self.one_at_a_time) else SCREEN_BATCH
            keys: list = []
            for n in range(cursor, len(ordered)):
                if missing[n]:
                    keys += [k for k in self._missing(ordered[n]) if k not in keys]
                if len(keys) >= want:
                    break
            room = self.budget - self.calls
            if room <= 0:
                return placed, None, False
            keys = keys[:room]
            self.first_batch = False
            self._encode([k[1] for k in keys if k[0] == "q"], [k[1] for k in keys if k[0] == "d"])
            for key in keys:
                for n in waiting.pop(key, []):
                    missing[n] -= 1
                    if missing[n] == 0:
                        ready.append(n)

    def _missing(self, state: State) -> list[tuple[str, object]]:
        out: list[tuple[str, object]] = []
        if state.deleted not in self.queries:
            out.append(("q", state.deleted))
        if state.inserted not in self.docs:
            out.append(("d", state.inserted))
        return out

    def _rank(self, ready, ordered, placed, notes) -> tuple[State, Placement] | None:
        """Rank the candidates now encoded; the first success verified alone."""
        hopeful = []
        for n in ready:
            state = ordered[n]
            placement = self._place(state)
            placed.append((state, placement))
            self.searched += 1
            if placement.first or (
                placement.rank is not None
                and placement.rival_score - placement.score <= NEAR * abs(placement.score)
            ):
                hopeful.append((state, placement))
        hopeful.sort(key=lambda sp: sp[1].rival_score - sp[1].score)
        for state, placement in hopeful[:VERIFY_TRIES]:
            checked = self.verify(state)
            if checked.first:
                return state, checked
            if placement.first:
                notes.append("a success in a batch did not hold once re-encoded alone; skipped")
        return None

    def _closest(
        self,
        best: tuple[State, Placement],
        space: EditSpace,
        complete: bool,
        exhaustive: bool,
        notes: list[str],
    ) -> Outcome:
        """No success: the closest state, re-encoded alone (its rank is the model's)."""
        state, _ = best
        checked = self.verify(state)
        none = "none exists" if complete and self.searched == space.size else "none found"
        status = "found" if checked.first else none
        return Outcome(
            state,
            self.edits_of(state),
            checked,
            checked.first,
            True,
            self.calls,
            state.size,
            status,
            self.searched,
            space.size,
            exhaustive,
            complete,
            notes,
        )


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
