"""A query searched on both sides of a collection comparison: both rankings, which hits
moved (rank in A → rank in B, entered or left the top N) and the terms that moved them (per
hit, every term's contribution ``q_t · d_t`` on each side — they sum to that side's score —
and the terms whose contribution changed most, also read as words). A query the collection
keeps comes with its judgements: every hit says its relevance, and each side's metrics are
measured against them; any other query that names a label of the items is measured against
the items carrying it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lexlens.analysis.collections.stored import StoredCollection
from lexlens.analysis.compare.vocabularies import SIDES
from lexlens.analysis.core.collection import Collection
from lexlens.analysis.core.metrics import is_relevant, measure, measure_rankings
from lexlens.analysis.core.words import item_words, merge_contributions, text_words
from lexlens.analysis.retrieval.scorer import scorer_for
from lexlens.analysis.search.table_evaluation import (
    CUTOFF,
    MEASURES,
    item_ids,
    labelled,
    match_label,
    relevant_ids,
)

#: A hit's rank is looked up this deep in each ranking (deeper: ``null``, "beyond").
RANK_DEPTH = 100
#: The order moved hits are listed in, by status.
STATUSES = {"entered": 0, "left": 1, "moved": 2, "same": 3}

#: One side's ranking: the ids, best first, and their scores.
Ranking = tuple[list[str], list[float]]


def contributions(target: Collection, row: int, q: np.ndarray) -> tuple[float, dict[str, float]]:
    """``(score, {token: q_t · d_t})`` of one item, every non-zero term, in float64."""
    cols, vals = target.row(row)
    vocab = target.vocab
    parts = q[cols].astype(np.float64) * vals.astype(np.float64)
    score = float(np.sum(parts))
    out: dict[str, float] = {}
    for c, p in zip(cols, parts, strict=True):
        if p != 0:
            out[vocab[int(c)]] = out.get(vocab[int(c)], 0.0) + float(p)
    return score, out


def _rankings(
    targets: tuple[StoredCollection, StoredCollection],
    queries: tuple[np.ndarray, np.ndarray],
    depth: int,
) -> list[Ranking]:
    """Each side's ranking, ``depth`` deep."""
    ranked = []
    for target, q in zip(targets, queries, strict=True):
        rows, scores = scorer_for(target).top(q, depth)
        ids = [str(m["id"]) for m in target.meta(rows, ["id"])]
        ranked.append((ids, [float(s) for s in scores]))
    return ranked


def _hits(
    target: StoredCollection,
    rows_of: dict[str, int],
    ranking: Ranking,
    top: int,
    judged: dict[str, int] | None,
) -> list[dict]:
    """One side's top ``top`` hits: rank, id, score, text and image (and, for a kept query,
    each hit's relevance: its judgement, 0 when not judged)."""
    ids, scores = ranking
    metas = target.meta([rows_of[i] for i in ids[:top]], ["id", "text", "image"])
    return [
        {
            "rank": r,
            "id": i,
            "score": sc,
            "text": m.get("text") or "",
            "image": m.get("image") or "",
        }
        | _relevance(judged, i)
        for r, (i, sc, m) in enumerate(zip(ids[:top], scores[:top], metas, strict=True), 1)
    ]


def _relevance(judged: dict[str, int] | None, item: str) -> dict:
    """``{"relevance": grade}`` of an item for a kept query (0: not judged); nothing else."""
    return {} if judged is None else {"relevance": int(judged.get(item, 0))}


def _status(rank_a: int | None, rank_b: int | None, top: int) -> str:
    """Whether a hit kept its rank, moved, entered B's top or left it."""
    in_a = rank_a is not None and rank_a <= top
    in_b = rank_b is not None and rank_b <= top
    if in_a and in_b:
        return "same" if rank_a == rank_b else "moved"
    return "left" if in_a else "entered"


def _changes(parts: list[dict[str, float]]) -> list[dict]:
    """Every term whose contribution differs between A and B, largest change first."""
    tokens = dict.fromkeys([*parts[0], *parts[1]])
    rows = (
        {
            "token": tok,
            "contribution_a": parts[0].get(tok, 0.0),
            "contribution_b": parts[1].get(tok, 0.0),
            "change": parts[1].get(tok, 0.0) - parts[0].get(tok, 0.0),
        }
        for tok in tokens
    )
    return sorted(
        (r for r in rows if r["change"] != 0), key=lambda r: (-abs(r["change"]), r["token"])
    )


def _by_contribution(parts: dict[str, float]) -> list[dict]:
    return [
        {"token": t, "contribution": c}
        for t, c in sorted(parts.items(), key=lambda x: (-x[1], x[0]))
    ]


@dataclass(frozen=True)
class _Sides:
    """Both sides of a search: the collections, the query vectors, the row of each item id,
    and what joins word pieces into words (both vocabularies' tokens, their known words)."""

    targets: tuple[StoredCollection, StoredCollection]
    queries: tuple[np.ndarray, np.ndarray]
    rows_of: tuple[dict[str, int], dict[str, int]]
    tokens: list[str] | set[str]
    known: frozenset[str]


def _moved_hit(
    item: str,
    sides: _Sides,
    ranks: tuple[int | None, int | None],
    query: str,
    top: int,
    explain: int,
    judged: dict[str, int] | None,
) -> dict:
    """One hit of either top: its ranks and scores, every term's contribution on each side
    and the terms (and words) whose contribution changed most."""
    targets, rows_of = sides.targets, sides.rows_of
    scores, parts = [], []
    for t, (target, q) in enumerate(zip(targets, sides.queries, strict=True)):
        score, contribution = contributions(target, rows_of[t][item], q)
        scores.append(score)
        parts.append(contribution)
    changes = _changes(parts)
    meta = targets[0].meta([rows_of[0][item]], ["id", "text", "image", "captions", "labels"])[0]
    in_words = merge_contributions(
        [{"token": r["token"], "contribution": r["change"]} for r in changes],
        sides.tokens,
        item_words(meta) | text_words(query) | sides.known,
    )
    in_words.sort(key=lambda r: (-abs(r["contribution"]), r["token"]))
    return {
        "id": item,
        "text": meta.get("text") or "",
        "image": meta.get("image") or "",
        **_relevance(judged, item),
        "status": _status(*ranks, top),
        "rank_a": ranks[0],
        "rank_b": ranks[1],
        "score_a": scores[0],
        "score_b": scores[1],
        "contributions_a": _by_contribution(parts[0]),
        "contributions_b": _by_contribution(parts[1]),
        "changed_terms": changes[:explain],
        "other_change": float(sum(r["change"] for r in changes[explain:])),
        # the same changes read as words: a word's change is the sum of its pieces'
        "changed_words": [
            {"word": r["token"], "change": r["contribution"]} for r in in_words[:explain]
        ],
    }


def search_side_by_side(
    targets: tuple[StoredCollection, StoredCollection],
    queries: tuple[np.ndarray, np.ndarray],
    rows_of: tuple[dict[str, int], dict[str, int]],
    *,
    query: str,
    top: int,
    explain: int,
    judged: dict[str, int] | None = None,
) -> dict:
    """Both rankings, the hits that moved and the terms that moved them; ``judged`` (a
    kept query's judgements) marks each hit's relevance and gives the metrics."""
    depth = max(top, RANK_DEPTH)
    ranked = _rankings(targets, queries, depth)
    rank = [{i: r for r, i in enumerate(ids, start=1)} for ids, _ in ranked]
    hits = {s: _hits(targets[t], rows_of[t], ranked[t], top, judged) for t, s in enumerate(SIDES)}
    union = list(dict.fromkeys([h["id"] for h in hits["a"]] + [h["id"] for h in hits["b"]]))
    vocab_a, vocab_b = targets[0].vocab, targets[1].vocab
    sides = _Sides(
        targets,
        queries,
        rows_of,
        vocab_a if vocab_a is vocab_b or vocab_a == vocab_b else set(vocab_a) | set(vocab_b),
        targets[0].known_words | targets[1].known_words,
    )
    moved = [
        _moved_hit(item, sides, (rank[0].get(item), rank[1].get(item)), query, top, explain, judged)
        for item in union
    ]
    moved.sort(
        key=lambda m: (STATUSES[m["status"]], min(m["rank_a"] or 10**9, m["rank_b"] or 10**9))
    )
    return {
        "query": query,
        "top": top,
        "rank_depth": depth,
        "hits_a": hits["a"],
        "hits_b": hits["b"],
        "hits": moved,
        "counts": {s: sum(m["status"] == s for m in moved) for s in STATUSES},
        "metrics": _metrics(targets[0], ranked, query)
        if judged is None
        else _judged_metrics(ranked, judged),
    }


def _metrics(target: Collection, ranked: list[Ranking], query: str) -> dict | None:
    """RR@1, RR@10, nDCG@10 and AP@10 (ir-measures names, the one metrics layer) of each
    side's top :data:`~lexlens.analysis.search.table_evaluation.CUTOFF` when the query names one
    of the collection's labels as search reads it (:func:`match_label`: "An animal" is the
    label animal); its items carrying that label are the relevant ones."""
    labels = labelled(target)
    label = match_label(query, set().union(*labels)) if labels else None
    if label is None:
        return None
    relevant = relevant_ids(labels, item_ids(target), label, None)
    return {
        s: measure_rankings({"q": ids_s[:CUTOFF]}, {"q": relevant}, MEASURES)[0]
        for s, (ids_s, _) in zip(SIDES, ranked, strict=True)
    } | {"relevant": len(relevant)}


def _judged_metrics(ranked: list[Ranking], judged: dict[str, int]) -> dict:
    """RR@1, RR@10, nDCG@10 (graded) and AP@10 of each side's top
    :data:`~lexlens.analysis.search.table_evaluation.CUTOFF` against a kept query's judgements."""
    relevant = sum(1 for r in judged.values() if is_relevant(r))
    return {
        s: measure({"q": [(i, 0.0) for i in ids_s[:CUTOFF]]}, {"q": judged}, MEASURES)[0]
        for s, (ids_s, _) in zip(SIDES, ranked, strict=True)
    } | {"relevant": relevant, "judged": "kept"}
