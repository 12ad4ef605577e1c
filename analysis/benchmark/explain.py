"""Why a query's first relevant item is not first: the two items' ``q ⊙ d`` and the terms
that decide between them, and across a benchmark, which terms are to blame.

For a query ``q``, the highest-ranked non-relevant item ``n`` and the highest-ranked
relevant item ``r``, each term's contribution ``q_t·n_t`` and ``q_t·r_t`` sums to each
item's score; their differences ``δ_t = q_t·n_t − q_t·r_t`` sum to the score gap
``s(n) − s(r)``. The *decisive* terms are the fewest, largest ``δ_t`` whose sum reaches the
gap: without them ``r`` would not be below ``n``. Words, not word pieces: pieces of a word
that the query or either item spells are joined (their contributions add up, so the rows
still sum to the scores).

A relevant item that the ranking does not hold (it scores 0 or less, or the run omits it) is
*not retrieved*: its rank is ``None`` and ``retrieved`` is false, never a place after every
other item; its ``q ⊙ d`` is still shown (empty when it shares no term with the query).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from lexlens.analysis.core.results import Record
from lexlens.analysis.core.words import item_words, merge_contributions

#: Contribution rows kept per item in a failure (the JSON says how many more and their sum).
SHOWN_CONTRIBUTIONS = 30


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
    #: collection): see :mod:`lexlens.analysis.benchmark.evaluate`.
    relevant_status: str = ""


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
    q: np.ndarray, row: int, rank: int | None, relevant: bool, index, words: set[str],
    meta: Mapping,
) -> tuple[ItemExplanation, list[dict]]:  # fmt: skip
    """The explanation of one item (``rank`` ``None``: not retrieved), and its raw (token)
    contribution rows."""
    cols, vals = index.row(row)
    raw = contribution_rows(q, cols, vals, index.vocab)
    rows = merge_contributions(raw, index.vocab, words | item_words(meta))
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
        ),  # fmt: skip
        raw,
    )


def decisive_terms(
    nonrelevant: list[dict], relevant: list[dict], vocab: Sequence[str], words: set[str]
) -> list[dict]:
    """The fewest largest contribution differences (words) that make up the score gap."""
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
    merged = merge_contributions(deltas, vocab, words)
    pieces_of = {d["token"]: d for d in deltas}
    for row in merged:  # a word's contributions on each side: the sums over its pieces
        members = row.get("pieces") or [row["token"]]
        row["nonrelevant"] = float(sum(pieces_of[p]["n"] for p in members))
        row["relevant"] = float(sum(pieces_of[p]["r"] for p in members))
        row["delta"] = row.pop("contribution")
        row.pop("n", None), row.pop("r", None), row.pop("index", None)
    gap = float(sum(d["contribution"] for d in deltas))
    out, total = [], 0.0
    for row in sorted(merged, key=lambda r: -r["delta"]):
        if total >= gap or row["delta"] <= 0:
            break
        out.append({"word": row.pop("token"), **row})
        total += out[-1]["delta"]
    return out


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


def blame(failures: Iterable[Failure], mismatches: Mapping[str, list[str]]) -> list[BlamedTerm]:
    """Per word, over every failure and every query's mismatched top terms; worst first."""
    pushed: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for f in failures:
        for d in f.decisive:
            pushed[d["word"]].append((f.query_id, d["delta"]))
    missed: dict[str, list[str]] = defaultdict(list)
    for query_id, words in mismatches.items():
        for w in words:
            missed[w].append(query_id)
    out = [
        BlamedTerm(
            w,
            len(pushed.get(w, [])),
            float(sum(a for _, a in pushed.get(w, []))),
            [q for q, _ in pushed.get(w, [])],
            len(missed.get(w, [])),
            list(missed.get(w, [])),
        )  # fmt: skip
        for w in set(pushed) | set(missed)
    ]
    return sorted(out, key=lambda b: (-b.amount, -b.pushed, -b.mismatch, b.word))
