"""Why a query's first relevant item is not first: the two items' ``q ⊙ d`` and the terms
that decide between them, and across a benchmark, which terms are to blame.

For a query ``q``, the highest-ranked non-relevant item ``n`` and the highest-ranked
relevant item ``r``, each term's contribution ``q_t·n_t`` and ``q_t·r_t`` sums to each
item's score; their differences ``δ_t = q_t·n_t − q_t·r_t`` sum to the score gap
``s(n) − s(r)``. Both sides are kept: the words with ``δ > 0`` favour the wrong item, those
with ``δ < 0`` the relevant one, and the two sides' sums add up to the gap exactly (the
:class:`GapSide` of each lists its largest words and sums the rest). The *decisive* words
are the fewest, largest ``δ > 0`` whose sum reaches the gap: without them ``r`` would not be
below ``n`` (they usually outweigh the gap, since the other side pulls back). Words, not word
pieces: pieces of a word that the query or either item spells are joined (their
contributions add up, so the rows still sum to the scores); a row that is still no whole word
of those texts is marked ``piece`` (``piece_of``: its word, when one is), never shown as a word.

A term is the *query's own* when it is a word piece of a word the query spells (its
WordPiece split); every other term is an *expansion* term. ``query_delta`` and
``expansion_delta`` split the gap between them.

A relevant item that the ranking does not hold (it scores 0 or less, or the run omits it) is
*not retrieved*: its rank is ``None`` and ``retrieved`` is false, never a place after every
other item; its ``q ⊙ d`` is still shown (empty when it shares no term with the query).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from lexlens.analysis.core.results import Record, internal
from lexlens.analysis.core.vocabulary import token_positions
from lexlens.analysis.core.words import WordReader, item_words, merge_contributions, text_words
from lexlens.analysis.lexical.highlight import Span, content_words, highlight_spans
from lexlens.models.wordpiece import wordpiece_split

#: Contribution rows kept per item in a failure (the JSON says how many more and their sum).
SHOWN_CONTRIBUTIONS = 30
#: Words listed on each side of a failure's gap (the JSON says how many more and their sum).
SHOWN_GAP_WORDS = 20
#: A decisive word's fields, in order.
DECISIVE_KEYS = ("word", "pieces", "piece", "piece_of", "nonrelevant", "relevant", "delta")


@dataclass(frozen=True)
class ItemExplanation(Record):
    """One item of a failure: where it ranks (``None``: not retrieved), its score and the
    terms that make it."""

    id: str
    row: int
    rank: int | None
    score: float
    relevant: bool
    text: str
    image: str
    contributions: list[dict]  # words (pieces joined), largest first, summing to the score
    other_terms: int = 0  # rows left out of ``contributions``
    other_contribution: float = 0.0  # and their sum
    retrieved: bool = True  # False: the ranking does not hold it (rank None)


@dataclass(frozen=True)
class GapSide(Record):
    """The words of a failure whose contribution difference ``δ`` favours one item
    (``favours``: ``"nonrelevant"``, ``δ > 0``, or ``"relevant"``, ``δ < 0``): the largest
    ``|δ|`` first, each with both contributions; ``total`` is the sum over every such word,
    the listed ones and the ``other_words`` summed in ``other_delta``."""

    favours: str
    words: list[dict]  # word, delta, nonrelevant, relevant, query_term (pieces when joined)
    total: float
    other_words: int = 0
    other_delta: float = 0.0


@dataclass(frozen=True)
class Failure(Record):
    """A query whose first relevant item is not first, explained."""

    query_id: str
    query: str
    first_relevant_rank: int | None
    nonrelevant: ItemExplanation | None
    relevant: ItemExplanation | None
    gap: float | None  # s(nonrelevant) − s(relevant)
    decisive: list[dict] = field(default_factory=list)  # word, delta, both contributions
    note: str = ""
    #: Where the best relevant item is (retrieved, beyond the top, not retrieved, not in the
    #: collection): see :mod:`lexlens.analysis.evaluation.evaluate`.
    relevant_status: str = ""
    favour_nonrelevant: GapSide | None = None  # the words with δ > 0
    favour_relevant: GapSide | None = None  # the words with δ < 0; both totals sum to the gap
    query_delta: float | None = None  # Σ δ over the query's own terms
    expansion_delta: float | None = None  # Σ δ over the other terms (gap − query_delta)
    #: Why it fails (:mod:`lexlens.analysis.evaluation.failures`: ``CAUSES``; several may hold)
    causes: list[str] = field(default_factory=list)
    query_length: int = 0  # the words the query spells (runs of letters and digits)
    missing_words: list[str] = field(default_factory=list)  # query content words r lacks
    #: every word with δ > 0 (favouring the non-relevant item), not only the listed ones: what
    #: a successful query is tested on for the blame words' base rate
    pushing_words: list[str] = internal(default_factory=list)


def contribution_rows(q: np.ndarray, cols: np.ndarray, vals: np.ndarray, vocab: Sequence[str]):
    """Every non-zero ``q_t · d_t`` of one item as rows (token, index, both weights)."""
    qw = q[cols].astype(np.float64)
    parts = qw * vals.astype(np.float64)
    keep = np.flatnonzero(parts)
    return [
        {
            "token": vocab[int(cols[i])],
            "index": int(cols[i]),
            "query_weight": float(qw[i]),
            "doc_weight": float(vals[i]),
            "contribution": float(parts[i]),
        }
        for i in keep
    ]


def explain_item(
    q: np.ndarray,
    row: int,
    rank: int | None,
    relevant: bool,
    index,
    words: set[str],
    meta: Mapping,
) -> tuple[ItemExplanation, list[dict]]:
    """The explanation of one item (``rank`` ``None``: not retrieved), and its raw (token)
    contribution rows."""
    cols, vals = index.row(row)
    raw = contribution_rows(q, cols, vals, index.vocab)
    evidence = words | item_words(meta)
    rows = WordReader(evidence, index.vocab).mark(
        merge_contributions(raw, index.vocab, evidence), "token"
    )
    score = float(sum(r["contribution"] for r in raw))
    shown, rest = rows[:SHOWN_CONTRIBUTIONS], rows[SHOWN_CONTRIBUTIONS:]
    return (
        ItemExplanation(
            id=str(meta["id"]),
            row=int(row),
            rank=None if rank is None else int(rank),
            score=score,
            relevant=relevant,
            text=str(meta.get("text") or ""),
            image=str(meta.get("image") or ""),
            contributions=shown,
            other_terms=len(rest),
            other_contribution=float(sum(r["contribution"] for r in rest)),
            retrieved=rank is not None,
        ),
        raw,
    )


@dataclass(frozen=True)
class Gap:
    """A failure's score gap by word: the decisive words, both sides, and the gap split
    between the query's own terms and expansion terms."""

    decisive: list[dict]
    favour_nonrelevant: GapSide
    favour_relevant: GapSide
    query_delta: float
    expansion_delta: float
    #: every word with δ > 0 (favouring the non-relevant item), largest first
    pushing: list[str] = field(default_factory=list)


def query_terms(query: str, vocab: Sequence[str]) -> set[str]:
    """The query's own terms: the WordPiece pieces of every word the query spells."""
    known = token_positions(vocab) if isinstance(vocab, list) else set(vocab)
    out: set[str] = set()
    for word in text_words(query):
        out.update(wordpiece_split(word, known) or [])
    return out


def _side(rows: list[dict], favours: str) -> GapSide:
    """One side's words, largest ``|δ|`` first, the first :data:`SHOWN_GAP_WORDS` listed."""
    ordered = sorted(rows, key=lambda r: (-abs(r["delta"]), r["word"]))
    shown, rest = ordered[:SHOWN_GAP_WORDS], ordered[SHOWN_GAP_WORDS:]
    return GapSide(
        favours=favours,
        words=shown,
        total=float(math.fsum(r["delta"] for r in ordered)),
        other_words=len(rest),
        other_delta=float(math.fsum(r["delta"] for r in rest)),
    )


def gap_words(
    nonrelevant: list[dict],
    relevant: list[dict],
    vocab: Sequence[str],
    words: set[str],
    own: set[str],
) -> Gap:
    """The two items' raw contribution rows compared word by word (``own``: the query's own
    terms): the decisive words, the words favouring each item and the gap's split."""
    by_token: dict[str, dict] = {}
    for sign, rows in ((1.0, nonrelevant), (-1.0, relevant)):
        for r in rows:
            entry = by_token.setdefault(
                r["token"], {"token": r["token"], "index": r["index"], "n": 0.0, "r": 0.0}
            )
            entry["n" if sign > 0 else "r"] += r["contribution"]
    deltas = [
        {"token": t, "index": e["index"], "contribution": e["n"] - e["r"], "n": e["n"], "r": e["r"]}
        for t, e in by_token.items()
    ]
    pieces_of = {d["token"]: d for d in deltas}
    reader = WordReader(words, vocab)
    rows = []
    for row in merge_contributions(deltas, vocab, words):  # pieces joined: sums per side
        members = row.get("pieces") or [row["token"]]
        rows.append(
            {
                "word": row["token"],
                "delta": float(row["contribution"]),
                "nonrelevant": float(math.fsum(pieces_of[p]["n"] for p in members)),
                "relevant": float(math.fsum(pieces_of[p]["r"] for p in members)),
                "query_term": all(p in own for p in members),
                **({"pieces": row["pieces"]} if row.get("pieces") else {}),
            }
        )
    rows = reader.mark(rows, "word")
    gap = math.fsum(d["contribution"] for d in deltas)
    decisive, total = [], 0.0
    for row in sorted(rows, key=lambda r: -r["delta"]):
        if total >= gap or row["delta"] <= 0:
            break
        decisive.append({k: row[k] for k in DECISIVE_KEYS if k in row})
        total += row["delta"]
    query_delta = math.fsum(d["contribution"] for d in deltas if d["token"] in own)
    return Gap(
        decisive=decisive,
        favour_nonrelevant=_side([r for r in rows if r["delta"] > 0], "nonrelevant"),
        favour_relevant=_side([r for r in rows if r["delta"] < 0], "relevant"),
        query_delta=float(query_delta),
        expansion_delta=float(gap - query_delta),
        pushing=[r["word"] for r in sorted(rows, key=lambda r: -r["delta"]) if r["delta"] > 0],
    )


def _side_terms(side: GapSide | None) -> set[str]:
    """A side's listed words and their pieces."""
    if side is None:
        return set()
    return {t for row in side.words for t in [row["word"], *row.get("pieces", [])]}


def failure_spans(failure: Failure, vocab: Sequence[str] | None = None) -> dict[str, list[Span]]:
    """The words to mark in each item's text of a failure (``"nonrelevant"``,
    ``"relevant"``): the query's content words, and the gap's words by the side they favour
    (``vocab``: also a word one of whose pieces is such a term)."""
    query = content_words(failure.query)
    sides = {
        "nonrelevant": _side_terms(failure.favour_nonrelevant),
        "relevant": _side_terms(failure.favour_relevant),
    }
    return {
        name: highlight_spans(item.text, query, sides, vocab)
        for name, item in (("nonrelevant", failure.nonrelevant), ("relevant", failure.relevant))
        if item is not None
    }


@dataclass(frozen=True)
class BlamedTerm(Record):
    """A word across the benchmark: how often and how much it put a non-relevant item above
    a relevant one, and for how many queries it was a top query term missing from the
    relevant item (lexical mismatch); the queries behind each number."""

    word: str
    pushed: int
    amount: float
    pushed_queries: list[str]
    mismatch: int
    mismatch_queries: list[str]
    piece: bool = False  # a piece ("##ome") wherever it was decisive or missing, never a word


def blame(failures: Iterable[Failure], mismatches: Mapping[str, list[str]]) -> list[BlamedTerm]:
    """Per word, over every failure and every query's mismatched top terms; worst first."""
    pushed: dict[str, list[tuple[str, float]]] = defaultdict(list)
    as_word: set[str] = set()
    for f in failures:
        for d in f.decisive:
            pushed[d["word"]].append((f.query_id, d["delta"]))
            if not d.get("piece"):
                as_word.add(d["word"])
    missed: dict[str, list[str]] = defaultdict(list)
    for query_id, words in mismatches.items():
        for w in words:
            missed[w].append(query_id)
            if not w.startswith("##"):  # a query's top word; a continuation stays a piece
                as_word.add(w)
    out = [
        BlamedTerm(
            w,
            len(pushed.get(w, [])),
            float(sum(a for _, a in pushed.get(w, []))),
            [q for q, _ in pushed.get(w, [])],
            len(missed.get(w, [])),
            list(missed.get(w, [])),
            w not in as_word,
        )
        for w in set(pushed) | set(missed)
    ]
    return sorted(out, key=lambda b: (-b.amount, -b.pushed, -b.mismatch, b.word))
