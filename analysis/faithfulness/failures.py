"""Is a failure's explanation true? Delete from the query the words that produced its
decisive terms, run the model on the edited query, and measure how much of the score gap
closes — against deleting as many random query words.

A failure (:mod:`lexlens.analysis.evaluation.explain`) says: the non-relevant item ``n``
beats the relevant ``r`` because of its *decisive* terms, the fewest largest
``δ_t = q_t·n_t − q_t·r_t`` that make up the gap ``g = s(n) − s(r)``. That is exact in
vocabulary space, but a person edits words, and a learned sparse encoder expands: deleting
one word moves many terms. So, for each failure (every number from the model run on the
edited query, never from the decomposition):

- the **explanation's words**: for each decisive term, the input word whose unit won its
  max pool (provenance, :mod:`.text_edits`); deleted together, the query re-encoded, both
  items rescored: ``comprehensiveness = (g − g') / g``, the share of the gap that closes
  (1: the items tie; above 1: the pair flips), and ``flipped`` when ``r`` then scores
  strictly more than ``n`` (a tie is no flip: which comes first is the collection's order,
  not the explanation's doing). A deletion that removes every word of the query (both
  items then score 0) or leaves the two items tied is *degenerate*: ``degenerate`` names
  which, and the summary counts it apart (:data:`EMPTIED`, :data:`TIED`);
- the **random baseline**: as many query words drawn at random, the same measures, their
  mean over the seeded draws (:mod:`.curves`);
- the **deletion curve**: the query's words deleted one more at a time in the explanation's
  order — the decisive terms' words first, then the others by the summed ``δ`` of the terms
  each produced — for ``k = 0…K``, against random orders; AOPC of the gap
  (:func:`~lexlens.analysis.core.curves.aopc`), normalised by ``g``.

Only text queries of two or more words with both items in the collection and a positive gap
are measured (a gap of 0 is a tie the collection order breaks: there is no share of it to
close; a one-word query's explanation and every random draw delete the same word); the
others are counted by reason. A query left with no word is an empty query: its vector is
zero (:meth:`~lexlens.analysis.retrieval.queries.QuerySpec.encode_sparse`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from lexlens.analysis.core.curves import (
    MEASURED_BY,
    DeletionCurve,
    deletion_curve,
    permutations,
    rng_for,
    share,
)
from lexlens.analysis.core.results import Progress, Record
from lexlens.analysis.evaluation.explain import Failure
from lexlens.analysis.faithfulness.options import FaithfulnessOptions
from lexlens.analysis.lexical.word_units import (
    TextWords,
    source_words,
    term_columns,
    text_words,
)
from lexlens.analysis.retrieval.queries import QuerySpec
from lexlens.analysis.retrieval.scorer import scorer_for, scores_against
from lexlens.models.base import Encoder

#: Queries whose per-unit rows are kept at once (for provenance).
PROVENANCE_GROUP = 64


@dataclass(frozen=True)
class FailureFaithfulness(Record):
    """One failure's explanation, tested by deleting its words and re-encoding the query."""

    query_id: str
    query: str
    nonrelevant: str
    relevant: str
    gap: float  # s(n) − s(r) with the query as given (re-encoded)
    words: list[str]  # the explanation's words: those that produced the decisive terms
    sources: list[dict]  # each decisive term and the input word that produced it (or None)
    edited_query: str
    gap_after: float
    comprehensiveness: float  # (gap − gap_after) / gap
    flipped: bool
    random_comprehensiveness: float | None  # the mean over random draws of as many words
    random_flip_rate: float | None
    curve: DeletionCurve  # the gap after deleting k words, explanation's order vs random
    measured_by: str = MEASURED_BY
    #: "" or why the deletion measures nothing of the explanation (:data:`EMPTIED`, :data:`TIED`)
    degenerate: str = ""


#: A deletion that removes every word of the query: both items score 0, whatever was deleted.
EMPTIED = "the deletion empties the query"
#: A deletion after which both items score the same: neither ahead.
TIED = "the deletion leaves the two items tied"


@dataclass
class _Plan:
    """The edits of one failure: its words, items, the explanation's words and order, and
    the random orders."""

    failure: Failure
    words: TextWords
    rows: tuple[int, int]  # (nonrelevant row, relevant row)
    explained: list[int]
    sources: list[dict]
    order: list[int]
    random_orders: list[list[int]]
    k: int
    texts: dict[tuple[int, ...], str] = field(default_factory=dict)

    def edit(self, drop: Sequence[int]) -> str:
        key = tuple(sorted(drop))
        if key not in self.texts:
            self.texts[key] = self.words.without(key) if key else self.words.text
        return self.texts[key]


def measurable(failure: Failure) -> str:
    """Why a failure cannot be measured ("" when it can)."""
    if failure.nonrelevant is None or failure.relevant is None or failure.gap is None:
        return "no relevant item in the collection" if failure.relevant is None else "no rival"
    if not failure.query.strip():
        return "empty query"
    if failure.gap <= 0:
        return "tied with the item ranked first (no gap to close)"
    return ""


#: Why a one-word query is not measured.
ONE_WORD = "a one-word query (deleting its word leaves nothing to encode)"


def _word_order(
    plan_words: TextWords, enc, q: np.ndarray, items: np.ndarray, explained: list[int]
) -> list[int]:
    """The explanation's order of the deletable words: the decisive terms' words first,
    then the others by the summed ``δ`` of the terms each produced (ties by position)."""
    cols = np.flatnonzero(q)
    delta = q[cols].astype(np.float64) * (items[0, cols] - items[1, cols]).astype(np.float64)
    score = dict.fromkeys(plan_words.deletable, 0.0)
    for w, d in zip(source_words(enc, plan_words, [[c] for c in cols]), delta, strict=True):
        if w is not None:
            score[w] += float(d)
    rest = sorted((w for w in score if w not in explained), key=lambda w: (-score[w], w))
    return list(explained) + rest


def _plan(
    failure: Failure,
    q: np.ndarray,
    enc,
    encoder: Encoder,
    index,
    row_of,
    options: FaithfulnessOptions,
) -> _Plan:
    """What to delete for one failure (its query vector ``q``; its encoding kept per-unit
    rows)."""
    words = text_words(encoder, failure.query, enc.units)
    rows = (row_of[failure.nonrelevant.id], row_of[failure.relevant.id])
    items = scorer_for(index).dense_rows(rows)
    columns = [term_columns(d, encoder.vocab) for d in failure.decisive]
    found = source_words(enc, words, columns)
    explained = list(dict.fromkeys(w for w in found if w is not None))
    sources = [
        {"term": d["word"], "delta": d["delta"], "word": None if w is None else words.words[w]}
        for d, w in zip(failure.decisive, found, strict=True)
    ]
    order = _word_order(words, enc, q, items, explained)
    rng = rng_for(options.seed, failure.query_id, failure.query)
    deletable = words.deletable
    random_orders = [
        [deletable[i] for i in p] for p in permutations(len(deletable), options.draws, rng)
    ]
    k = min(options.curve_k, len(deletable))
    return _Plan(failure, words, rows, explained, sources, order, random_orders, k)


def _edits(plan: _Plan) -> list[str]:
    """Every edited query of a plan (the query itself first)."""
    texts = [plan.edit([]), plan.edit(plan.explained)]
    texts += [plan.edit(r[: len(plan.explained)]) for r in plan.random_orders]
    texts += [plan.edit(plan.order[:k]) for k in range(1, plan.k + 1)]
    texts += [plan.edit(r[:k]) for r in plan.random_orders for k in range(1, plan.k + 1)]
    return texts


def _flipped(gap: float) -> bool:
    """The relevant item strictly ahead of the non-relevant one (a tie is no flip)."""
    return gap < 0


def _degenerate(plan: _Plan, after: float) -> str:
    """Why deleting the explanation's words measures nothing of it ("" when it does)."""
    if len(set(plan.explained)) >= len(plan.words.deletable):
        return EMPTIED
    return TIED if after == 0 else ""


def _measure(plan: _Plan, spec: QuerySpec, index) -> FailureFaithfulness:
    """One failure's measures from its edited queries' scores."""
    items = scorer_for(index).dense_rows(plan.rows)

    def gap_of(drop: Sequence[int]) -> float:
        s = scores_against([spec.sparse(plan.edit(drop))], items)[0]
        return float(s[0] - s[1])

    gap = gap_of([])
    after = gap_of(plan.explained)
    n = len(plan.explained)
    rand = [gap_of(r[:n]) for r in plan.random_orders] if n else []
    curve = [gap_of(plan.order[:k]) for k in range(plan.k + 1)]
    random_curves = [[gap_of(r[:k]) for k in range(plan.k + 1)] for r in plan.random_orders]
    f = plan.failure
    return FailureFaithfulness(
        query_id=f.query_id,
        query=f.query,
        nonrelevant=f.nonrelevant.id,
        relevant=f.relevant.id,
        gap=gap,
        words=[plan.words.words[w] for w in plan.explained],
        sources=plan.sources,
        edited_query=plan.edit(plan.explained),
        gap_after=after,
        comprehensiveness=share(gap - after, gap) or 0.0,
        flipped=_flipped(after),
        random_comprehensiveness=float(np.mean([(gap - g) / gap for g in rand])) if rand else None,
        random_flip_rate=float(np.mean([_flipped(g) for g in rand])) if rand else None,
        curve=deletion_curve(
            [plan.words.words[w] for w in plan.order[: plan.k]], curve, random_curves
        ),
        degenerate=_degenerate(plan, after),
    )


def measure_failures(
    index,
    encoder: Encoder,
    failures: Sequence[Failure],
    *,
    query_mode: str,
    gate_k: int,
    options: FaithfulnessOptions,
    progress: Progress | None = None,
) -> tuple[list[FailureFaithfulness], dict[str, int], int]:
    """Every measurable failure's faithfulness, the others counted by reason, and the model
    calls (distinct edited queries encoded, in batches)."""
    row_of = index_rows(index)
    skipped: dict[str, int] = {}
    todo = []
    for f in failures:
        why = measurable(f)
        if not why and (f.nonrelevant.id not in row_of or f.relevant.id not in row_of):
            why = "an item not in the collection"
        if why:
            skipped[why] = skipped.get(why, 0) + 1
        else:
            todo.append(f)
    spec = QuerySpec(encoder, query_mode, gate_k)
    plans: list[_Plan] = []
    for start in range(0, len(todo), PROVENANCE_GROUP):
        group = todo[start : start + PROVENANCE_GROUP]
        # the model's own per-unit rows (provenance); a head without a text tower has none
        encodings = encoder.encode_texts([f.query for f in group], side="query")
        made = [
            _plan(f, spec.of(e), e, encoder, index, row_of, options)
            for f, e in zip(group, encodings, strict=True)
        ]
        plans += [p for p in made if _keep(p, skipped)]
        if progress:
            progress(0.2 * (start + len(group)) / max(1, len(todo)), "provenance of the queries")
    spec.encode_sparse([t for p in plans for t in _edits(p)])
    if progress:
        progress(0.9, f"{spec.calls} edited queries re-encoded")
    out = [_measure(p, spec, index) for p in plans]
    return out, skipped, spec.calls


def _keep(plan: _Plan, skipped: dict[str, int]) -> bool:
    """Whether a planned failure is measured (a one-word query is counted, not measured:
    the explanation and every random draw would delete the same word)."""
    if len(plan.words.deletable) >= 2:
        return True
    skipped[ONE_WORD] = skipped.get(ONE_WORD, 0) + 1
    return False


def index_rows(index) -> dict[str, int]:
    """Each item id's row in the collection."""
    return {str(item): r for r, item in enumerate(index.column("id"))}
