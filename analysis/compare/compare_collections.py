"""Compare two stored collections side by side: two indexes of the same source built by two
encoders, or one index seen at two gate k (:mod:`lexlens.analysis.compare.regate`).

Semantic deviation (Exact@k, Semantic@k), FLOPs and vocabulary statistics side by side
(:func:`lexlens.analysis.deviation.deviation.deviation_of_index` on each side), and a query searched
on both (:mod:`lexlens.analysis.compare.collection_search`): both rankings, which hits
moved and the terms that moved them. The settings are
:class:`~lexlens.analysis.compare.options.CompareIndexOptions`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from lexlens.analysis.collections.arguments import index_argument
from lexlens.analysis.collections.stored import StoredCollection
from lexlens.analysis.compare.collection_search import search_side_by_side
from lexlens.analysis.compare.kept_queries import kept_query
from lexlens.analysis.compare.options import CompareIndexOptions, default_gates
from lexlens.analysis.compare.regate import check_regate
from lexlens.analysis.compare.result import CompareResult
from lexlens.analysis.compare.side_cache import SIDE_CACHE, GatedSide, SideStatistics
from lexlens.analysis.compare.sides import COMPARE_INDEX_NEEDS, token_index
from lexlens.analysis.compare.vocabularies import SIDES, vocabulary_note, vocabulary_overlap
from lexlens.analysis.core.arguments import device_argument, progress_argument
from lexlens.analysis.core.results import Progress, progress_part
from lexlens.analysis.deviation.sets import SetDeviation
from lexlens.analysis.retrieval.queries import QuerySpec, query_encoder_for
from lexlens.models.base import Encoder, InputError

#: Each side's index, its gate k and its text encoder.
IndexSide = tuple[StoredCollection, int, Encoder]


def check_same_items(
    a: StoredCollection, b: StoredCollection, rows_a: dict[str, int], rows_b: dict[str, int]
) -> None:
    """Refuse two indexes that do not hold the same items of the same source (``rows_a``,
    ``rows_b``: the row of each item id in each)."""
    fa = a.manifest.source.fingerprint
    fb = b.manifest.source.fingerprint
    if not fa or fa != fb:
        raise InputError(
            f"{a.path.name} and {b.path.name} were not built from the same source (source "
            f"fingerprints {str(fa)[:12] or 'none'} and {str(fb)[:12] or 'none'}): index one "
            "source with both encoders"
        )
    missing_b = [i for i in rows_a if i not in rows_b]
    missing_a = sorted(set(rows_b) - set(rows_a))
    if missing_a or missing_b:
        example = (missing_b or missing_a)[0]
        raise InputError(
            f"{a.path.name} and {b.path.name} hold different items ({len(missing_b)} only in "
            f"the first, {len(missing_a)} only in the second, e.g. {example!r}; an item "
            "skipped by one encoder?): compare indexes of the same items"
        )


def _set_summary(part: SetDeviation | None) -> dict | None:
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
    items: tuple[SetDeviation, SetDeviation],
    means: tuple[np.ndarray, np.ndarray],
    vocabs: tuple[list[str], list[str]],
    top: int,
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


def _encoders(
    indexes: tuple[StoredCollection, StoredCollection],
    encoder_a: Encoder | str | None,
    encoder_b: Encoder | str | None,
    device: str | None,
) -> tuple[Encoder, Encoder]:
    """The text encoder of each side, as search picks a query encoder
    (:func:`query_encoder_for`: given, else its index's own, in its vocabulary); B takes
    A's when only A is given."""
    ix_a, ix_b = indexes
    chosen_a = query_encoder_for(
        ix_a, encoder_a, device, needs=COMPARE_INDEX_NEEDS, argument="encoder_a"
    )
    if encoder_b is None and encoder_a is not None:
        encoder_b = chosen_a
    chosen_b = query_encoder_for(
        ix_b, encoder_b, device, needs=COMPARE_INDEX_NEEDS, argument="encoder_b"
    )
    return chosen_a, chosen_b


def _sides(
    sides: tuple[IndexSide, IndexSide], k: int, progress: Progress | None
) -> tuple[list[GatedSide], list[SideStatistics], list[str]]:
    """Each side's index at its gate k (re-gated from its stored vectors when smaller) and
    its statistics, both made once per index state and reused (:data:`SIDE_CACHE`); a note
    per re-gated side saying how. Progress: each side's share of the whole."""
    gated, statistics, notes = [], [], []
    for s, (ix, kk, encoder) in enumerate(sides):
        label = f"{SIDES[s].upper()}: "
        regate = progress_part(progress, 0.45 * s, 0.45 * s + 0.1, label)
        side = SIDE_CACHE.side(ix, kk, encoder, regate)
        part = progress_part(progress, 0.45 * s + 0.1, 0.45 * (s + 1), label)
        statistics.append(SIDE_CACHE.statistics(side, encoder, k, part))
        gated.append(side)
        if kk != ix.gate_k:
            how = (
                "the k largest stored weights plus each text's own tokens (the token ids "
                "the index keeps, or its text split again by the tokenizer)"
                if ix.modality == "text"
                else "the k largest stored weights (images have no own tokens)"
            )
            notes.append(
                f"{SIDES[s].upper()}: {ix.path.name} is stored at gate k = {ix.gate_k} and "
                f"re-gated at k = {kk}: {how}"
            )
    return gated, statistics, notes


def _collection(
    statistics: list[SideStatistics], targets: list[StoredCollection], k: int, top: int
) -> dict[str, Any]:
    """Deviation and vocabulary statistics of both sides (the search is added after)."""
    deviations = [s.deviation for s in statistics]
    items = tuple(d.images if d.images is not None else d.captions for d in deviations)
    return {
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
            items,
            (statistics[0].mean_weights, statistics[1].mean_weights),
            (targets[0].vocab, targets[1].vocab),
            top,
        ),
        "search": None,
    }


def _query_vectors(
    sides: tuple[IndexSide, IndexSide], query: str, mode: str
) -> tuple[np.ndarray, np.ndarray]:
    """Each side's query as ``lexlens search`` makes it (:class:`QuerySpec`: gated at that
    side's k, or the bag of its tokens in mode bow); one encoder on both sides runs once."""
    specs = [QuerySpec(e, mode, kk) for _, kk, e in sides]
    if sides[0][2] is not sides[1][2]:
        return specs[0].vector(query), specs[1].vector(query)
    if mode == "bow":  # no gate: the same vector on both sides
        vector = specs[0].vector(query)
        return vector, vector
    _, encoding = specs[0].encode_with_units(query)
    return specs[0].of(encoding), specs[1].of(encoding)


def _describe(ix: StoredCollection, kk: int, encoder: Encoder) -> dict:
    """One side as the result describes it: its index, its gate k, its text encoder."""
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


def _checked_sides(
    ix_a: StoredCollection,
    ix_b: StoredCollection,
    encoders: tuple[Encoder, Encoder],
    options: CompareIndexOptions,
) -> tuple[IndexSide, IndexSide]:
    """Both sides with their gate k (given, else :func:`default_gates`), checked: each k
    re-gates its index exactly, A differs from B (each encoder was checked against its
    index's vocabulary when chosen)."""
    one = ix_b is ix_a
    same = one and encoders[0] is encoders[1]
    mean_active = ix_a.nnz / max(len(ix_a), 1)
    ka, kb = options.gate_k or default_gates("index", same, (ix_a.gate_k, ix_b.gate_k), mean_active)
    check_regate(ix_a, ka)
    check_regate(ix_b, kb)
    if same and ka == kb:
        raise InputError(
            f"A and B are the same index ({ix_a.path.name}) at the same gate k ({ka}) with the "
            "same encoder: give a second index or a second gate k"
        )
    return (ix_a, ka, encoders[0]), (ix_b, kb, encoders[1])


def compare_indexes(
    index_a: str | Path | StoredCollection,
    index_b: str | Path | StoredCollection | None = None,
    *,
    encoder_a: Encoder | str | None = None,
    encoder_b: Encoder | str | None = None,
    progress: Progress | None = None,
    device: str | None = None,
    options: CompareIndexOptions | None = None,
    **given: Any,
) -> CompareResult:
    """Compare two stored indexes of the same source (two encoders), or one index at two
    gate k (each ≤ the index's own). ``encoder_a``/``encoder_b`` are the text encoders in
    each index's vocabulary (queries, caption tokens and Semantic@k's static embeddings),
    objects or names loaded on ``device``; by default each index's own query encoder, and B
    takes A's when only A is given. Options: :class:`CompareIndexOptions` (or its fields as
    keywords): ``gate_k`` one value for both sides or (A's, B's), default
    :func:`~lexlens.analysis.compare.options.default_gates`; ``k`` of Exact@k / Semantic@k;
    ``query`` (in ``query_mode``) adds the search comparison, ``top`` hits per side.

    Indexes, options and encoders are checked before anything is encoded.
    """
    options = CompareIndexOptions.of(options, **given)
    progress = progress_argument(progress)
    device_argument(device)
    ix_a = index_argument(index_a, "index_a")
    ix_b = ix_a if index_b is None else index_argument(index_b, "index_b")
    if ix_b is not ix_a and ix_b.path.resolve() == ix_a.path.resolve():
        ix_b = ix_a
    rows = (SIDE_CACHE.item_rows(ix_a), SIDE_CACHE.item_rows(ix_b))
    if ix_b is not ix_a:
        check_same_items(ix_a, ix_b, *rows)
    query, judged = options.query, None
    if options.query_id is not None:
        query, judged = kept_query((ix_a, ix_b), options.query_id)
    encoders = _encoders((ix_a, ix_b), encoder_a, encoder_b, device)
    sides = _checked_sides(ix_a, ix_b, encoders, options)
    gated, statistics, notes = _sides(sides, options.k, progress)
    targets = [side.target for side in gated]
    vocab = vocabulary_overlap(ix_a.vocab, ix_b.vocab)
    if note := vocabulary_note(vocab):
        notes.append(note)
    collection = _collection(statistics, targets, options.k, options.top)
    if query is not None:
        if progress:
            progress(0.92, "Searching both…")
        queries = _query_vectors(sides, query, options.query_mode)
        if options.query_mode == "bow":
            notes.append(
                "the query is searched as the bag of its own tokens on both sides (query mode "
                "bow, VDR's nonparametric query): no gate applies to it"
            )
        collection["search"] = search_side_by_side(
            (targets[0], targets[1]),
            queries,
            rows,
            query=query,
            top=options.top,
            explain=options.explain,
            judged=judged,
        )
    if progress:
        progress(1.0, "Done")
    return CompareResult(
        kind="index",
        a=_describe(*sides[0]),
        b=_describe(*sides[1]),
        input={
            "index_a": ix_a.path.name,
            "index_b": ix_b.path.name,
            "query": query,
            "items": len(ix_a),
        }
        | ({} if options.query_id is None else {"query_id": options.query_id}),
        vocabulary=vocab,
        collection=collection,
        notes=notes,
    )
