"""Why system B ranks a query's relevant item above (or below) system A: the exact ``q ⊙ d``
decompositions of both sides (:mod:`lexlens.analysis.evaluation.explain`).

For one query and a pair (A, B):

- the *relevant item* explained is the query's relevant item ranked best by either system
  (ties: the better system's, then id order); its rank (``None``: not retrieved) and exact
  score under each;
- under each Lexlens system, its ``q ⊙ d`` (words: word pieces joined, so each side's rows
  sum to its score) side by side, and the words whose contribution changed most;
- the *rival*: on a win of B, the highest non-relevant item A ranks above the relevant item
  that B ranks below it (it was overtaken); on a loss, the one B ranks above it that A ranked
  below (it overtook); with the *decisive* words on each side — the fewest, largest
  contribution differences that make up the score gap
  (:func:`~lexlens.analysis.evaluation.explain.gap_words`);
- BM25 computed by Lexlens (:mod:`lexlens.analysis.systems.bm25`) is explained by its own
  terms: each side's words are bm25s's term scores of the query's tokens (they sum to its
  score), the decisive words the largest differences of those, its rank exact at any depth;
- a system is explained by its own scores or not at all: another engine's run has no
  decomposition Lexlens can read, so its side shows ranks and the run's own scores only
  ("no decomposition: ranks only") — never another system's terms under its name; the items
  that moved into or out of the top 10 are listed with both ranks, and with the ``q ⊙ d``
  words of the Lexlens side where there is one.

The explained queries are encoded again, together: a batch's padding moves a weight by
float32 rounding, so an explained score may differ from the evaluated ranking's in about
the seventh digit (each side's words still sum exactly to the score shown).

Across the benchmark, :func:`blame_shift` lists the words that put non-relevant items above
relevant ones under A but not under B (they decide a failure of A's and not B's for the
same query), and the reverse, with the queries behind each.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from lexlens.analysis.collections.stored import StoredCollection
from lexlens.analysis.core.metrics import is_relevant
from lexlens.analysis.core.results import Record
from lexlens.analysis.core.words import item_words, merge_contributions, text_words
from lexlens.analysis.evaluation.explain import contribution_rows, gap_words, query_terms
from lexlens.analysis.retrieval.queries import QuerySpec, query_encoder_for
from lexlens.analysis.retrieval.scorer import Scorer, scorer_for
from lexlens.analysis.systems.bm25 import Bm25Options, Bm25Query, bm25_index
from lexlens.analysis.systems.systems import (
    BM25,
    LEXLENS,
    System,
    collection_key,
    system_collection,
)

#: Words listed as changed most, items listed as moved, blame-shift words kept.
CHANGED_WORDS = 10
MOVED_DEPTH = 10
SHIFT_WORDS = 20


@dataclass(frozen=True)
class ItemOnBoth(Record):
    """An item under both systems: its rank (``None``: not retrieved) and score on each side
    (an outside run's own score), its q ⊙ d words on each Lexlens side (a run's side has
    none: its scoring is not decomposed)."""

    id: str
    text: str
    relevant: bool
    rank_a: int | None
    rank_b: int | None
    score_a: float | None
    score_b: float | None
    words_a: list[dict] = field(default_factory=list)
    words_b: list[dict] = field(default_factory=list)


@dataclass(frozen=True)
class QueryWhy(Record):
    """Why one query's value differs between A and B (see the module docstring)."""

    query_id: str
    query: str
    system_a: str
    system_b: str
    measure: str
    value_a: float
    value_b: float
    relevant: ItemOnBoth | None
    changed: list[dict]  # word, contribution_a, contribution_b, change (B − A), largest |change|
    rival: ItemOnBoth | None
    decisive_a: list[dict]  # under A: the words that put the higher of the two items first
    decisive_b: list[dict]  # under B: the same
    moved: list[ItemOnBoth]
    note: str = ""


@dataclass
class Side:
    """One system on one query: its collection, the query vector that explains it, its
    ranking as evaluated, and (a Lexlens system) the exact ranking at any depth."""

    system: System
    index: StoredCollection
    vector: np.ndarray
    ranking: list[tuple[str, float]]
    scorer: Scorer
    ids: list[str]
    row_of: dict[str, int]
    _full: object = None
    #: a BM25 system's query: its own scores, ranks and terms
    own: Bm25Query | None = None

    @property
    def exact(self) -> bool:
        return self.system.kind == LEXLENS

    @property
    def decomposed(self) -> bool:
        """Whether this side's scores are decomposed into its own terms."""
        return self.exact or self.own is not None

    def words(self, item: str, evidence: set[str]) -> list[dict]:
        """The item's words under this side's own scoring (none for a run)."""
        if self.own is not None:
            return self.own.terms(self.row_of[item]) if item in self.row_of else []
        return _words(self, self.raw(item), evidence) if self.exact else []

    def rank(self, item: str) -> int | None:
        """The item's 1-based rank: its place in the ranking evaluated, else (a Lexlens
        system) its exact rank at any depth; ``None``: not retrieved."""
        for i, (d, _) in enumerate(self.ranking):
            if d == item:
                return i + 1
        if self.own is not None and item in self.row_of:
            return self.own.rank(self.row_of[item])
        if not self.exact or item not in self.row_of:
            return None
        if self._full is None:
            self._full = next(iter(self.scorer.rank([self.vector], max(1, len(self.ranking)))))
        return self.scorer.rank_of(self.vector, self.row_of[item], self._full)[0]

    def score(self, item: str) -> float | None:
        """The exact score (a Lexlens system, BM25) or the run's own score (``None``: not
        listed)."""
        if self.own is not None:
            return self.own.score(self.row_of[item]) if item in self.row_of else None
        if self.exact:
            return (
                self.scorer.score_of(self.row_of[item], self.vector)
                if item in self.row_of
                else None
            )
        return next((s for d, s in self.ranking if d == item), None)

    def raw(self, item: str) -> list[dict]:
        """The item's q ⊙ d rows (tokens) under this side's query vector."""
        if item not in self.row_of:
            return []
        cols, vals = self.index.row(self.row_of[item])
        return contribution_rows(self.vector, cols, vals, self.index.vocab)


class Explaining:
    """Opened collections, their scorers and loaded query encoders, shared while explaining
    many queries."""

    def __init__(
        self,
        device: str | None,
        query_mode: str,
        opened: Mapping[str, StoredCollection | None] | None = None,
    ) -> None:
        self.device, self.query_mode = device, query_mode
        self._opened = {path: ix for path, ix in (opened or {}).items() if ix is not None}
        self._indexes: dict[str, tuple[StoredCollection, Scorer, list[str], dict]] = {}
        self._encoders: dict[tuple[str, str | None], object] = {}

    def collection(self, system: System) -> tuple[StoredCollection, Scorer, list[str], dict]:
        """The collection ``system`` ranks (re-gated at its document gate), its scorer, ids
        and rows, opened once."""
        path = collection_key(system)
        if path not in self._indexes:
            ix = system_collection(system, self._opened)
            ids = [str(i) for i in ix.column("id")]
            self._indexes[path] = (ix, scorer_for(ix), ids, {d: r for r, d in enumerate(ids)})
        return self._indexes[path]

    def vectors(self, system: System, texts: list[str]) -> list[np.ndarray]:
        """The query vectors of ``texts`` as ``system`` encodes them (a run: the collection's
        own query encoder, at the run's gate)."""
        ix = self.collection(system)[0]
        key = (system.index, system.query_encoder)
        if key not in self._encoders:
            self._encoders[key] = query_encoder_for(ix, system.query_encoder, self.device)
        encoder = self._encoders[key]
        return QuerySpec(encoder, self.query_mode, int(system.gate_k)).vectors(texts)

    def side(self, system: System, vector: np.ndarray, ranking: list, text: str = "") -> Side:
        """``system`` on one query (``text``: the query, which a BM25 system scores)."""
        ix, scorer, ids, row_of = self.collection(system)
        own = None
        if system.kind == BM25:
            own = Bm25Query(bm25_index(ix, Bm25Options.from_parameters(system.bm25)), text)
        return Side(system, ix, vector, list(ranking), scorer, ids, row_of, own=own)


def _words(side: Side, raw: list[dict], evidence: set[str]) -> list[dict]:
    rows = merge_contributions(raw, side.index.vocab, evidence)
    return [{"word": r["token"], "contribution": float(r["contribution"])} for r in rows]


def _evidence(side: Side, text: str, items: Sequence[str]) -> set[str]:
    rows = [side.row_of[i] for i in items if i in side.row_of]
    words = text_words(text)
    for meta in side.index.meta(rows) if rows else []:
        words |= item_words(meta)
    return words


def _item(a: Side, b: Side, item: str, relevant: bool, evidence: tuple[set, set]) -> ItemOnBoth:
    meta_side = a if item in a.row_of else b
    meta = meta_side.index.meta([meta_side.row_of[item]])[0] if item in meta_side.row_of else {}
    words_a = a.words(item, evidence[0])
    words_b = b.words(item, evidence[1])
    return ItemOnBoth(
        id=item,
        text=str(meta.get("text") or ""),
        relevant=relevant,
        rank_a=a.rank(item),
        rank_b=b.rank(item),
        score_a=a.score(item),
        score_b=b.score(item),
        words_a=words_a,
        words_b=words_b,
    )


def _best_relevant(a: Side, b: Side, relevant: set[str], b_better: bool) -> str | None:
    """The relevant item either system ranks best (the better system's first, then ids)."""
    inf = float("inf")
    ranked = []
    for item in sorted(relevant):
        ra, rb = a.rank(item), b.rank(item)
        best = min(ra or inf, rb or inf)
        first = (rb if b_better else ra) or inf
        ranked.append((best, first, item))
    held = [r for r in ranked if r[2] in a.row_of or r[2] in b.row_of]
    return min(held)[2] if held else None


def _rival(a: Side, b: Side, item: str, relevant: set[str], b_better: bool) -> str | None:
    """The non-relevant item the worse side ranks above ``item`` and the better side below."""
    worse, better = (a, b) if b_better else (b, a)
    inf = float("inf")
    at = worse.rank(item) or inf
    for d, _ in worse.ranking:
        if d in relevant:
            continue
        if (worse.rank(d) or inf) >= at:
            break
        if (better.rank(d) or inf) > (better.rank(item) or inf):
            return d
    return None


def _changed(relevant: ItemOnBoth) -> list[dict]:
    a = {w["word"]: w["contribution"] for w in relevant.words_a}
    b = {w["word"]: w["contribution"] for w in relevant.words_b}
    rows = [
        {
            "word": w,
            "contribution_a": a.get(w, 0.0),
            "contribution_b": b.get(w, 0.0),
            "change": b.get(w, 0.0) - a.get(w, 0.0),
        }
        for w in set(a) | set(b)
    ]
    return sorted(rows, key=lambda r: (-abs(r["change"]), r["word"]))[:CHANGED_WORDS]


def _decisive(side: Side, item: str, rival: str, text: str, evidence: set[str]) -> list[dict]:
    """The words that put the higher of the two items above the other under ``side``: the
    fewest largest contribution differences that make up the gap
    (:func:`~lexlens.analysis.evaluation.explain.gap_words`); none for a run (its scoring
    is not decomposed); under BM25, the same rule on its own terms."""
    if not side.decomposed:
        return []
    first, second = (item, rival)
    if (side.score(rival) or 0.0) > (side.score(item) or 0.0):
        first, second = rival, item
    if side.own is not None:
        return _own_decisive(side, first, second)
    own = query_terms(text, side.index.vocab)
    gap = gap_words(side.raw(first), side.raw(second), side.index.vocab, evidence, own)
    return [{**d, "above": first} for d in gap.decisive]


def _own_decisive(side: Side, first: str, second: str) -> list[dict]:
    """Under BM25: the fewest query tokens whose largest contribution differences (first −
    second) make up the gap between the two items' scores."""
    above = {w["word"]: w["contribution"] for w in side.words(first, set())}
    below = {w["word"]: w["contribution"] for w in side.words(second, set())}
    rows = [
        {
            "word": w,
            "delta": above.get(w, 0.0) - below.get(w, 0.0),
            "nonrelevant": above.get(w, 0.0),
            "relevant": below.get(w, 0.0),
            "query_term": True,
        }
        for w in sorted(set(above) | set(below))
    ]
    gap = (side.score(first) or 0.0) - (side.score(second) or 0.0)
    decisive, total = [], 0.0
    for row in sorted(rows, key=lambda r: (-r["delta"], r["word"])):
        if total >= gap or row["delta"] <= 0:
            break
        decisive.append({**row, "above": first})
        total += row["delta"]
    return decisive


def _moved(a: Side, b: Side, evidence: tuple[set, set], relevant: set[str]) -> list[ItemOnBoth]:
    top_a = [d for d, _ in a.ranking[:MOVED_DEPTH]]
    top_b = [d for d, _ in b.ranking[:MOVED_DEPTH]]
    moved = [d for d in top_a if d not in top_b] + [d for d in top_b if d not in top_a]
    return [_item(a, b, d, d in relevant, evidence) for d in moved]


def explain_query(
    a: Side,
    b: Side,
    query_id: str,
    text: str,
    judged: Mapping[str, int],
    values: tuple[float, float],
    measure: str,
) -> QueryWhy:
    """Why ``query_id``'s ``measure`` is ``values`` (A, B) under the two sides."""
    relevant = {d for d, r in judged.items() if is_relevant(r)}
    b_better = values[1] >= values[0]
    item = _best_relevant(a, b, relevant, b_better)
    shown = [d for d in (item,) if d]
    rival = _rival(a, b, item, relevant, b_better) if item else None
    shown += [rival] if rival else []
    evidence = (_evidence(a, text, shown), _evidence(b, text, shown))
    both_exact = a.exact and b.exact
    both_decomposed = a.decomposed and b.decomposed
    rel = _item(a, b, item, True, evidence) if item else None
    riv = _item(a, b, rival, False, evidence) if rival else None
    notes = []
    if not both_decomposed:
        runs = " and ".join(s.system.name for s in (a, b) if not s.decomposed)
        notes.append(
            f"no decomposition: ranks only for {runs} (another engine's run: its ranks and "
            "its own scores are shown, never another system's terms)"
        )
    notes += [
        f"{s.system.name}: bm25s's own term scores of the query's tokens" for s in (a, b) if s.own
    ]
    note = "; ".join(notes)
    if item is None:
        note = (note + "; " if note else "") + "no relevant item of this query is in the collection"
    return QueryWhy(
        query_id=query_id,
        query=text,
        system_a=a.system.name,
        system_b=b.system.name,
        measure=measure,
        value_a=values[0],
        value_b=values[1],
        relevant=rel,
        changed=_changed(rel) if rel and both_exact else [],
        rival=riv,
        decisive_a=_decisive(a, item, rival, text, evidence[0]) if rival else [],
        decisive_b=_decisive(b, item, rival, text, evidence[1]) if rival else [],
        moved=[] if both_exact else _moved(a, b, evidence, relevant),
        note=note,
    )


def blame_shift(failures_a: Sequence, failures_b: Sequence) -> tuple[list[dict], list[dict]]:
    """(words deciding failures under A but not B, the reverse): per word, the queries where
    it is decisive for a failure of one system and not for the same query's failure (if any)
    of the other, with the summed score gap it accounts for; most queries first."""

    def decisive(failures: Sequence) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = defaultdict(dict)
        for f in failures:
            for d in f.decisive:
                out[f.query_id][d["word"]] = float(d["delta"])
        return out

    under_a, under_b = decisive(failures_a), decisive(failures_b)

    def shifted(one: Mapping, other: Mapping) -> list[dict]:
        words: dict[str, list[tuple[str, float]]] = defaultdict(list)
        for q, deltas in one.items():
            for word, delta in deltas.items():
                if word not in other.get(q, {}):
                    words[word].append((q, delta))
        rows = [
            {
                "word": w,
                "queries": len(qs),
                "amount": float(sum(d for _, d in qs)),
                "query_ids": [q for q, _ in qs],
            }
            for w, qs in words.items()
        ]
        return sorted(rows, key=lambda r: (-r["queries"], -r["amount"], r["word"]))[:SHIFT_WORDS]

    return shifted(under_a, under_b), shifted(under_b, under_a)
