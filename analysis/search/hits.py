"""A search's hits and the terms that make each score: every contribution of a hit sums
exactly to the score it shows (both are the same float64 sum), as tokens and as words (the
pieces of a word the item or the query spells joined, their contributions added)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from lexlens.analysis.core.collection import Collection
from lexlens.analysis.core.counts import counted
from lexlens.analysis.core.results import Record, internal
from lexlens.analysis.core.words import WordReader, entry_label, item_words, merge_contributions


@dataclass(frozen=True)
class Hit(Record):
    """One result: the item, its score and the terms that make it (summing to the score).

    ``top_contributions`` are vocabulary tokens; ``top_words`` the same contributions read
    as words (the pieces of a word the item or the query spells joined, their contributions
    added), so both lists, with the rest, sum to the score. A row of ``top_words`` that is
    no whole word of the item's or the query's text is marked ``piece`` (with ``piece_of``,
    the word it belongs to, when one is).
    """

    rank: int
    row: int = internal()
    id: str = ""
    score: float = 0.0
    kind: str = "text"
    text: str = ""
    image: str = ""
    labels: list[str] = field(default_factory=list)
    top_contributions: list[dict] = field(default_factory=list)
    other_terms: int = 0
    other_contribution: float = 0.0
    relevant: bool | None = None
    top_words: list[dict] = field(default_factory=list)
    other_words: int = 0


class Scoring(NamedTuple):
    """How hits are scored: the query's weights per dimension, and for SR's magnitudes
    (``on_dimensions``: ``weights`` are 1 on D, no query's weights) whether weights are
    squared (``l2``) and divided by the item's norm."""

    weights: np.ndarray
    square: bool = False
    normalize: bool = False
    on_dimensions: bool = False


class _Explained(NamedTuple):
    """One item's score and its contributions: the top ones as tokens, how many more and
    what they add, the top ones as words and how many more."""

    score: float
    tokens: list[dict]
    other_terms: int
    other_contribution: float
    words: list[dict]
    other_words: int


def _explain(
    target: Collection,
    row: int,
    scoring: Scoring,
    denominator: float,
    explain: int,
    words: set[str],
) -> _Explained:
    """Score of ``row`` and its contributions: ``c_t = weights_t · f(w_t) / denominator``
    (for ``square``, ``c_t = w_t² / (denominator · s)`` so that they sum to ``s = √(...)``);
    the top ``explain`` as tokens and as ``words`` (pieces joined, contributions added).

    A token row holds ``doc_weight`` (``w_t``) and the ``contribution``; for a query's
    weights also ``query_weight`` (``q_t``, ``c_t = q_t · w_t``); for SR's magnitude on D,
    which has no query weights, ``doc_norm_inverse`` (``1/‖d‖₂`` when items are normalised,
    else 1): ``c_t = w_t · doc_norm_inverse`` (``sum``), ``(w_t · doc_norm_inverse)² / s``
    (``l2``)."""
    vocab = target.vocab
    cols, vals = target.row(row)
    w = vals.astype(np.float64)
    q = scoring.weights[cols].astype(np.float64)
    if scoring.square:
        parts = q * w * w / denominator
        total = float(np.sum(parts))
        score = math.sqrt(max(total, 0.0))
        parts = parts / score if score > 0 else parts * 0
    else:
        parts = q * w / denominator
    nonzero = np.flatnonzero(parts)
    order = nonzero[np.argsort(-parts[nonzero], kind="stable")]
    score = float(np.sum(parts[order]))
    if scoring.on_dimensions:
        inverse = 1.0 / math.sqrt(denominator) if scoring.square else 1.0 / denominator
        factor = {"doc_norm_inverse": float(inverse)}
    rows = [
        {
            "token": vocab[int(cols[i])],
            "index": int(cols[i]),
            **(factor if scoring.on_dimensions else {"query_weight": float(q[i])}),
            "doc_weight": float(vals[i]),
            "contribution": float(parts[i]),
        }
        for i in order
    ]
    rest = float(np.sum(parts[order[explain:]])) if order.size > explain else 0.0
    merged = WordReader(words, vocab).mark(
        [
            {"word": r["token"], "contribution": r["contribution"]}
            | ({"pieces": r["pieces"]} if "pieces" in r else {})
            for r in merge_contributions(rows, vocab, words)
        ],
        "word",
    )
    return _Explained(
        score,
        rows[:explain],
        max(0, len(rows) - explain),
        rest,
        merged[:explain],
        max(0, len(merged) - explain),
    )


#: The metadata a hit shows and reads its words from (the others are not read).
HIT_COLUMNS = ("id", "kind", "image", "text", "captions", "labels")


def explained_hits(
    target: Collection,
    rows: np.ndarray,
    scoring: Scoring,
    *,
    explain: int = 5,
    relevant: set[str] | None = None,
    query_words: set[str] = frozenset(),
) -> list[Hit]:
    """The items at ``rows`` as hits, ranked in that order, each with its top ``explain``
    contributions; ``relevant`` (ids) marks each hit relevant or not."""
    out = []
    metas = target.meta(rows, list(HIT_COLUMNS))
    for rank, (row, meta) in enumerate(zip(rows, metas, strict=True), start=1):
        nu = 1.0
        if scoring.normalize:
            norm = float(target.norms[int(row)])
            nu = norm if norm > 0 else 1.0
        words = set(query_words) | item_words(meta)
        # sum: c_t = q_t w_t / ν; l2: c_t = w_t² / (ν² s) with s = √(Σ_D w_t²) / ν.
        denominator = nu * nu if scoring.square else nu
        made = _explain(target, int(row), scoring, denominator, explain, words)
        out.append(
            Hit(
                rank,
                int(row),
                str(meta["id"]),
                made.score,
                str(meta.get("kind", "text")),
                str(meta.get("text") or ""),
                str(meta.get("image") or ""),
                list(meta.get("labels") or []),
                made.tokens,
                made.other_terms,
                made.other_contribution,
                None if relevant is None else str(meta["id"]) in relevant,
                made.words,
                made.other_words,
            )
        )
    return out


def hit_summary(hit: Hit) -> str:
    """A hit's score as the words that make it: ``cat 0.512 + kitten 0.301 + 12 more terms
    0.044`` (the parts sum to the score)."""
    parts = [f"{entry_label(w)} {w['contribution']:.3f}" for w in hit.top_words]
    rest = hit.score - sum(w["contribution"] for w in hit.top_words)
    if hit.other_words:
        parts.append(f"{counted(hit.other_words, 'more term')} {rest:.3f}")
    return " + ".join(parts)
