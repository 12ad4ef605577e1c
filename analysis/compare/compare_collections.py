"""Compare two stored collections side by side: two indexes of the same source built by two
encoders, or one index seen at two gate k (:mod:`lexlens.analysis.compare.regate`).

A stored collection (two indexes built from the same source by two encoders, or one
index seen at two gate k): semantic deviation (Exact@k, Semantic@k), FLOPs and vocabulary
statistics side by side (:func:`lexlens.analysis.deviation.deviation_of_index` on each
side), and a query searched on both: both rankings, which hits moved (rank in A → rank in B,
entered or left the top N) and the terms that moved them (per hit, every term's contribution
``q_t · d_t`` on each side — they sum to that side's score — and the terms whose
contribution changed most).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lexlens.analysis.collections.store import StoredIndex, open_index
from lexlens.analysis.compare.compare import (
    COMPARE_INDEX_NEEDS,
    DEFAULT_HITS,
    check_top,
    default_gates,
    gate_pair,
    token_index,
)
from lexlens.analysis.compare.regate import RegatedIndex, check_regate, own_columns
from lexlens.analysis.compare.result import CompareResult
from lexlens.analysis.compare.vocabularies import SIDES, vocabulary_note, vocabulary_overlap
from lexlens.analysis.core.gating import gate
from lexlens.analysis.core.results import Progress
from lexlens.analysis.core.words import item_words, merge_contributions, text_words
from lexlens.analysis.deviation.deviation import deviation_of_index
from lexlens.analysis.deviation.options import DEFAULT_K, check_options
from lexlens.analysis.search.evaluation import ir_metrics, item_ids, labelled, relevant_ids
from lexlens.analysis.search.queries import check_vocabulary, default_query_encoder
from lexlens.analysis.search.ranking import top_items
from lexlens.models.base import Encoder, InputError
from lexlens.models.registry import as_encoder

#: A hit's rank is looked up this deep in each ranking (deeper: ``null``, "beyond").
RANK_DEPTH = 100
#: Terms listed per moved hit (largest change in contribution first).
CHANGED_TERMS = 8


def _open(index: str | Path | StoredIndex) -> StoredIndex:
    return index if isinstance(index, StoredIndex) else open_index(index)


def check_same_items(a: StoredIndex, b: StoredIndex) -> dict[str, int]:
    """Refuse two indexes that do not hold the same items of the same source; returns the
    row in ``b`` of each id."""
    fa = a.manifest["source"].get("fingerprint")
    fb = b.manifest["source"].get("fingerprint")
    if not fa or fa != fb:
        raise InputError(
            f"{a.path.name} and {b.path.name} were not built from the same source (source "
            f"fingerprints {str(fa)[:12] or 'none'} and {str(fb)[:12] or 'none'}): index one "
            "source with both encoders"
        )
    ids_a = [str(x) for x in a.column("id")]
    ids_b = [str(x) for x in b.column("id")]
    rows_b = {i: r for r, i in enumerate(ids_b)}
    missing_b = [i for i in ids_a if i not in rows_b]
    missing_a = sorted(set(ids_b) - set(ids_a))
    if missing_a or missing_b:
        example = (missing_b or missing_a)[0]
        raise InputError(
            f"{a.path.name} and {b.path.name} hold different items ({len(missing_b)} only in "
            f"the first, {len(missing_a)} only in the second, e.g. {example!r}; an item "
            "skipped by one encoder?): compare indexes of the same items"
        )
    return rows_b


def _set_summary(part: Any) -> dict | None:
    if part is None:
        return None
    return {
        "kind": part.kind,
        "n": part.n,
        "n_measured": part.n_measured,
        "exact_at_k": part.exact,
        "semantic_at_k": part.semantic,
        "by_denominator": part.by_denominator,
        "positive_terms": part.positive_terms,
        "flops": part.flops,
        "flops_with_self_pairs": part.flops_with_self_pairs,
        "mean_active_dims": part.mean_active_dims,
        "n_skipped": part.n_skipped,
    }


def _vocab_side_by_side(
    items: tuple[Any, Any], means: tuple[np.ndarray, np.ndarray], vocabs, top: int
) -> dict:
    """Top terms by mean weight of each side, with the other side's numbers for the same
    token; activation rates; lazy terms of each."""
    stats = [part.vocabulary for part in items]
    lookups = [token_index(v) for v in vocabs]
    rates = [part.counts / max(part.n, 1) for part in items]

    def numbers(s: int, token: str) -> tuple[float | None, float | None]:
        j = lookups[s].get(token)
        if j is None:
            return None, None
        return float(means[s][j]), float(rates[s][j])

    union: dict[str, None] = {}
    for st in stats:
        if st is not None:
            union.update(dict.fromkeys(t.token for t in st.top_terms[:top]))
    tops = [{t.token for t in st.top_terms[:top]} if st else set() for st in stats]
    rows = []
    for token in union:
        ma, ra = numbers(0, token)
        mb, rb = numbers(1, token)
        rows.append(
            {
                "token": token,
                "mean_weight_a": ma,
                "mean_weight_b": mb,
                "activation_rate_a": ra,
                "activation_rate_b": rb,
                "top_a": token in tops[0],
                "top_b": token in tops[1],
            }
        )
    rows.sort(
        key=lambda r: (-max(r["mean_weight_a"] or 0.0, r["mean_weight_b"] or 0.0), r["token"])
    )
    out: dict[str, Any] = {"top_terms": rows}
    for s, st in zip(SIDES, stats, strict=True):
        out[s] = (
            None
            if st is None
            else {
                "active_terms": st.active_terms,
                "mean_active_per_item": st.mean_active_per_item,
                "lazy_rate": st.lazy_rate,
                "lazy_terms": [t.token for t in st.lazy_terms],
                "top_terms": [t.token for t in st.top_terms[:top]],
            }
        )
    return out


def _contributions(ix: StoredIndex, row: int, q: np.ndarray, vocab: list[str]) -> tuple:
    """``(score, {token: q_t · d_t})`` of one item, every non-zero term, in float64."""
    cols, vals = ix.row(row)
    parts = q[cols].astype(np.float64) * vals.astype(np.float64)
    score = float(np.sum(parts))
    out: dict[str, float] = {}
    for c, p in zip(cols, parts, strict=True):
        if p != 0:
            out[vocab[int(c)]] = out.get(vocab[int(c)], 0.0) + float(p)
    return score, out


def _search_side_by_side(
    targets: tuple[StoredIndex, StoredIndex],
    queries: tuple[np.ndarray, np.ndarray],
    rows_of: tuple[dict[str, int], dict[str, int]],
    *,
    query: str,
    top: int,
    explain: int,
) -> dict:
    """Both rankings, the hits that moved and the terms that moved them."""
    depth = max(top, RANK_DEPTH)
    ranked = []
    for target, q in zip(targets, queries, strict=True):
        rows, scores = top_items(target, q, depth)
        ids = [str(m["id"]) for m in target.meta(rows, ["id"])]
        ranked.append((ids, [float(s) for s in scores]))
    rank = [{i: r for r, i in enumerate(ids, start=1)} for ids, _ in ranked]
    hits = {}
    for s, (ids, scores) in zip(SIDES, ranked, strict=True):
        metas = targets[SIDES.index(s)].meta(
            [rows_of[SIDES.index(s)][i] for i in ids[:top]], ["id", "text", "image"]
        )
        hits[s] = [
            {
                "rank": r,
                "id": i,
                "score": sc,
                "text": m.get("text") or "",
                "image": m.get("image") or "",
            }
            for r, (i, sc, m) in enumerate(zip(ids[:top], scores[:top], metas, strict=True), 1)
        ]
    union = list(dict.fromkeys([h["id"] for h in hits["a"]] + [h["id"] for h in hits["b"]]))
    moved = []
    for item in union:
        ra, rb = rank[0].get(item), rank[1].get(item)
        in_a = ra is not None and ra <= top
        in_b = rb is not None and rb <= top
        status = (
            ("same" if ra == rb else "moved") if in_a and in_b else ("left" if in_a else "entered")
        )
        side_scores, contributions = [], []
        for t, (target, q) in enumerate(zip(targets, queries, strict=True)):
            score, parts = _contributions(target, rows_of[t][item], q, target.vocab)
            side_scores.append(score)
            contributions.append(parts)
        tokens = list(dict.fromkeys([*contributions[0], *contributions[1]]))
        changes = sorted(
            (
                row
                for row in (
                    {
                        "token": tok,
                        "contribution_a": contributions[0].get(tok, 0.0),
                        "contribution_b": contributions[1].get(tok, 0.0),
                        "change": contributions[1].get(tok, 0.0) - contributions[0].get(tok, 0.0),
                    }
                    for tok in tokens
                )
                if row["change"] != 0
            ),
            key=lambda r: (-abs(r["change"]), r["token"]),
        )
        shown = changes[:explain]
        meta = targets[0].meta([rows_of[0][item]], ["id", "text", "image", "captions", "labels"])[0]
        words = item_words(meta) | text_words(query) | targets[0].known_words
        words |= targets[1].known_words
        in_words = merge_contributions(
            [{"token": r["token"], "contribution": r["change"]} for r in changes],
            set(targets[0].vocab) | set(targets[1].vocab), words,
        )  # fmt: skip
        in_words.sort(key=lambda r: (-abs(r["contribution"]), r["token"]))
        moved.append(
            {
                "id": item,
                "text": meta.get("text") or "",
                "image": meta.get("image") or "",
                "status": status,
                "rank_a": ra,
                "rank_b": rb,
                "score_a": side_scores[0],
                "score_b": side_scores[1],
                "contributions_a": [
                    {"token": t, "contribution": c}
                    for t, c in sorted(contributions[0].items(), key=lambda x: (-x[1], x[0]))
                ],
                "contributions_b": [
                    {"token": t, "contribution": c}
                    for t, c in sorted(contributions[1].items(), key=lambda x: (-x[1], x[0]))
                ],
                "changed_terms": shown,
                "other_change": float(sum(r["change"] for r in changes[explain:])),
                # the same changes read as words: a word's change is the sum of its pieces'
                "changed_words": [
                    {"word": r["token"], "change": r["contribution"]} for r in in_words[:explain]
                ],
            }
        )
    order = {"entered": 0, "left": 1, "moved": 2, "same": 3}
    moved.sort(key=lambda m: (order[m["status"]], min(m["rank_a"] or 10**9, m["rank_b"] or 10**9)))
    metrics = _metrics(targets, ranked, query)
    return {
        "query": query,
        "top": top,
        "rank_depth": depth,
        "hits_a": hits["a"],
        "hits_b": hits["b"],
        "hits": moved,
        "counts": {s: sum(m["status"] == s for m in moved) for s in order},
        "metrics": metrics,
    }


def _metrics(targets, ranked, query: str) -> dict | None:
    """MRR@10 … of both rankings when the query is one of the collection's labels."""
    labels = labelled(targets[0])
    if labels is None or query.casefold().strip() not in set().union(*labels):
        return None
    relevant = relevant_ids(labels, item_ids(targets[0]), query, None)
    return {
        s: ir_metrics({"q": ids_s[:10]}, {"q": relevant})["mean"]
        for s, (ids_s, _) in zip(SIDES, ranked, strict=True)
    } | {"relevant": len(relevant)}


def compare_indexes(
    index_a: str | Path | StoredIndex,
    index_b: str | Path | StoredIndex | None = None,
    *,
    encoder_a: Encoder | str | None = None,
    encoder_b: Encoder | str | None = None,
    gate_k: Sequence[int] | int | None = None,
    query: str | None = None,
    top: int | None = None,
    k: int = DEFAULT_K,
    explain: int = CHANGED_TERMS,
    progress: Progress | None = None,
    device: str | None = None,
) -> CompareResult:
    """Compare two stored indexes of the same source (two encoders), or one index at two
    gate k (each ≤ the index's own). ``encoder_a``/``encoder_b`` are the text encoders in
    each index's vocabulary (queries, caption tokens and Semantic@k's static embeddings),
    objects or names loaded on ``device``; by default each index's own query encoder, and B
    takes A's when only A is given. ``gate_k``: one value for both sides or (A's, B's);
    default :func:`~lexlens.analysis.compare.compare.default_gates`. ``k``: Exact@k /
    Semantic@k. ``query`` adds the search comparison.

    Indexes, options and encoders are checked before anything is encoded.
    """
    top = check_top(DEFAULT_HITS if top is None else top)
    check_options(k=k)
    if not isinstance(explain, int) or explain < 0:
        raise InputError("the number of changed terms shown must be 0 or more")
    if query is not None and not query.strip():
        raise InputError("the query is empty: type some words")
    ix_a = _open(index_a)
    ix_b = ix_a if index_b is None else _open(index_b)
    one = ix_b is ix_a or ix_b.path.resolve() == ix_a.path.resolve()
    if one:
        ix_b = ix_a
    gate_pair(gate_k, (0, 0))  # the values, before anything loads
    rows_a = {str(i): r for r, i in enumerate(ix_a.column("id"))}
    rows_b = rows_a if one else check_same_items(ix_a, ix_b)
    if encoder_b is None:
        encoder_b = default_query_encoder(ix_b, "text") if encoder_a is None else encoder_a
    if encoder_a is None:
        encoder_a = default_query_encoder(ix_a, "text")
    encoder_a = as_encoder(encoder_a, device, COMPARE_INDEX_NEEDS, "encoder_a")
    encoder_b = as_encoder(encoder_b, device, COMPARE_INDEX_NEEDS, "encoder_b")
    stored = (ix_a.gate_k, ix_b.gate_k)
    same = one and encoder_a is encoder_b
    mean_active = ix_a.nnz / max(len(ix_a), 1)
    ka, kb = gate_pair(gate_k, default_gates("index", same, stored, mean_active))
    check_regate(ix_a, ka)
    check_regate(ix_b, kb)
    for encoder, ix in ((encoder_a, ix_a), (encoder_b, ix_b)):
        COMPARE_INDEX_NEEDS.check(encoder)
        check_vocabulary(ix, encoder)
    if one and encoder_a is encoder_b and ka == kb:
        raise InputError(
            f"A and B are the same index ({ix_a.path.name}) at the same gate k ({ka}) with the "
            "same encoder: give a second index or a second gate k"
        )
    notes: list[str] = []
    targets = []
    for s, (ix, kk, encoder) in enumerate(((ix_a, ka, encoder_a), (ix_b, kb, encoder_b))):
        if kk == ix.gate_k:
            targets.append(ix)
            continue
        if progress:
            progress(0.02 + 0.08 * s, f"Re-gating {ix.path.name} at k = {kk}…")
        own = own_columns(ix, encoder) if ix.modality == "text" else None
        targets.append(RegatedIndex(ix, kk, own))
        how = (
            "the k largest stored weights plus each text's own tokens (re-tokenised by "
            f"{encoder.name})"
            if own is not None
            else "the k largest stored weights (images have no own tokens)"
        )
        notes.append(
            f"{SIDES[s].upper()}: {ix.path.name} is stored at gate k = {ix.manifest['gate_k']}"
            f" and re-gated at k = {kk}: {how}"
        )
    vocab = vocabulary_overlap(ix_a.vocab, ix_b.vocab)
    if note := vocabulary_note(vocab):
        notes.append(note)
    deviations = []
    for s, (target, encoder) in enumerate(zip(targets, (encoder_a, encoder_b), strict=True)):
        base = 0.1 + 0.4 * s

        def step(f: float, msg: str, base: float = base, s: int = s) -> None:
            if progress:
                progress(base + 0.4 * f, f"{SIDES[s].upper()}: {msg}")

        deviations.append(deviation_of_index(target, encoder, k=k, max_rows=0, progress=step))
    items = tuple(d.images if d.images is not None else d.captions for d in deviations)
    collection: dict[str, Any] = {
        "k": k,
        "deviation": {
            s: {
                "gate_k": d.gate_k,
                "f_enc": d.f_enc,
                "sets": {p.kind: _set_summary(p) for p in d.sets},
                "flops_captions_images": d.flops_captions_images,
                "notes": d.notes,
            }
            for s, d in zip(SIDES, deviations, strict=True)
        },
        "vocabulary": _vocab_side_by_side(
            items, tuple(t.mean_weights() for t in targets), (ix_a.vocab, ix_b.vocab), top
        ),
        "search": None,
    }
    if query is not None:
        if progress:
            progress(0.92, "Searching both…")
        # One encoding per encoder (as ``lexlens search`` encodes a query), gated per side.
        enc_a = encoder_a.encode_texts([query], side="query")[0]
        enc_b = enc_a if encoder_b is encoder_a else encoder_b.encode_texts([query])[0]
        queries = (gate(enc_a, encoder_a.vocab, ka), gate(enc_b, encoder_b.vocab, kb))
        collection["search"] = _search_side_by_side(
            tuple(targets), queries, (rows_a, rows_b), query=query, top=top, explain=explain
        )
    if progress:
        progress(1.0, "Done")

    def side(ix: StoredIndex, kk: int, encoder: Encoder) -> dict:
        return {
            "index": ix.path.name,
            "items": len(ix),
            "modality": ix.modality,
            "index_encoder": ix.encoder_name,
            "stored_gate_k": ix.gate_k,
            "gate_k": kk,
            "regated": kk != ix.gate_k,
            "encoder": encoder.name,
            "vocab_size": ix.vocab_size,
        }

    return CompareResult(
        kind="index",
        a=side(ix_a, ka, encoder_a),
        b=side(ix_b, kb, encoder_b),
        input={
            "index_a": ix_a.path.name,
            "index_b": ix_b.path.name,
            "query": query,
            "items": len(ix_a),
        },
        vocabulary=vocab,
        collection=collection,
        notes=notes,
    )
