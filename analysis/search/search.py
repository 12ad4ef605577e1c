"""Search a collection: plain search and exclusion "A but not B" (SPEC.md §3, seed 003).

A *collection* is a stored index (:class:`lexlens.analysis.collections.store.StoredIndex`) or a small
:class:`~lexlens.analysis.search.memory_collection.MemoryCollection`. Plain search ranks items by
the inner product ``E_q · E_d`` (:func:`lexlens.analysis.search.ranking.top_items`); exclusion
ranks by SR's dimension sets or a baseline (:mod:`lexlens.analysis.search.exclusion`). Each hit
lists the terms that make its score, and all of a hit's contributions sum exactly to the
score it shows (both are the same float64 sum). With labels, the metrics of every method
come from :mod:`lexlens.analysis.search.evaluation`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lexlens.analysis.collections.store import StoredIndex, open_index
from lexlens.analysis.core.gating import check_gate_k
from lexlens.analysis.core.inputs import read_texts
from lexlens.analysis.lexical.contrib import partner_for
from lexlens.analysis.search.evaluation import ir_metrics, item_ids, labelled, relevant_ids
from lexlens.analysis.search.exclusion import METHODS, check_settings, rank_method, slq_for
from lexlens.analysis.search.memory_collection import encode_collection
from lexlens.analysis.search.queries import (
    IMAGE_QUERY_NEEDS,
    QuerySpec,
    check_query_mode,
    check_vocabulary,
    default_query_encoder,
    text_query_needs,
)
from lexlens.analysis.search.ranking import top_items
from lexlens.models.base import Capability, Encoder, InputError, ModalityError
from lexlens.models.registry import as_encoder


@dataclass(frozen=True)
class Hit:
    """One result: the item, its score and the terms that make it (summing to the score)."""

    rank: int
    row: int
    id: str
    score: float
    kind: str
    text: str
    image: str
    labels: list[str]
    top_contributions: list[dict]
    other_terms: int
    other_contribution: float
    relevant: bool | None = None

    def to_dict(self) -> dict:
        return {
            "rank": self.rank,
            "id": self.id,
            "score": self.score,
            "kind": self.kind,
            "text": self.text,
            "image": self.image,
            "labels": self.labels,
            "top_contributions": self.top_contributions,
            "other_terms": self.other_terms,
            "other_contribution": self.other_contribution,
            "relevant": self.relevant,
        }


def _explain(
    target: Any,
    vocab: list[str],
    row: int,
    weights: np.ndarray,
    square: bool,
    denominator: float,
    explain: int,
) -> tuple[float, list[dict], int, float]:
    """Score of ``row`` and its contributions: ``c_t = weights_t · f(w_t) / denominator``
    (for ``square``, ``c_t = w_t² / (denominator · s)`` so that they sum to ``s = √(...)``)."""
    cols, vals = target.row(row)
    w = vals.astype(np.float64)
    q = weights[cols].astype(np.float64)
    if square:
        parts = q * w * w / denominator
        total = float(np.sum(parts))
        score = math.sqrt(max(total, 0.0))
        parts = parts / score if score > 0 else parts * 0
    else:
        parts = q * w / denominator
    nonzero = np.flatnonzero(parts)
    order = nonzero[np.argsort(-parts[nonzero], kind="stable")]
    score = float(np.sum(parts[order]))
    rows = [
        {
            "token": vocab[int(cols[i])],
            "index": int(cols[i]),
            "query_weight": float(parts[i] / w[i]) if w[i] else 0.0,
            "doc_weight": float(vals[i]),
            "contribution": float(parts[i]),
        }
        for i in order
    ]
    shown = rows[:explain]
    rest = float(np.sum(parts[order[explain:]])) if order.size > explain else 0.0
    return score, shown, max(0, len(rows) - explain), rest


def _hits(
    target: Any,
    vocab: list[str],
    rows: np.ndarray,
    weights: np.ndarray,
    *,
    square: bool = False,
    normalize: bool = False,
    explain: int = 5,
    relevant: set[str] | None = None,
) -> list[Hit]:
    metas = target.meta(rows)
    out = []
    for rank, (row, meta) in enumerate(zip(rows, metas, strict=True), start=1):
        nu = 1.0
        if normalize:
            norm = float(target.norms[int(row)])
            nu = norm if norm > 0 else 1.0
        # sum: c_t = q_t w_t / ν; l2: c_t = w_t² / (ν² s) with s = √(Σ_D w_t²) / ν.
        score, shown, others, rest = _explain(
            target, vocab, int(row), weights, square, nu * nu if square else nu, explain
        )
        out.append(
            Hit(
                rank, int(row), str(meta["id"]), score, str(meta.get("kind", "text")),
                str(meta.get("text") or ""), str(meta.get("image") or ""),
                list(meta.get("labels") or []), shown, others, rest,
                None if relevant is None else str(meta["id"]) in relevant,
            )
        )  # fmt: skip
    return out


@dataclass(frozen=True)
class SearchResult:
    """The result of one search or exclusion query on a collection."""

    collection: dict
    query: dict
    method: str
    settings: dict
    hits: list[Hit]
    dimensions: dict | None = None
    metrics: dict | None = None
    relevant_count: int | None = None
    messages: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "collection": self.collection,
            "query": self.query,
            "method": self.method,
            "settings": self.settings,
            "results": [h.to_dict() for h in self.hits],
            "dimensions": self.dimensions,
            "metrics": self.metrics,
            "relevant_count": self.relevant_count,
            "messages": self.messages,
        }


def search(
    target: Any,
    spec: QuerySpec,
    *,
    query: str | None = None,
    query_image: Any = None,
    image_name: str | None = None,
    exclude: str | None = None,
    method: str = "sr",
    top: int = 10,
    k_items: int | None = None,
    coverage: float | None = None,
    magnitude: str = "sum",
    normalize: bool = True,
    slq_template: str | None = None,
    explain: int = 5,
    evaluate: bool = True,
) -> SearchResult:
    """Search ``target`` (a stored index or a :class:`MemoryCollection`).

    A text ``query`` (or a ``query_image``) ranks items by inner product; with ``exclude``
    (text queries only), ``method`` picks SR, the average-embedding or the single-line
    baseline (module docstring). With labels in the collection and a query that is one of
    them, ``metrics`` holds MRR@1, MRR@10, NDCG@10 and AP@10 for every method (relevant =
    labelled A and not B). Inputs and settings are checked before any model runs.
    """
    exclude = (exclude or "").strip() or None
    k_items, coverage = check_settings(method, exclude, k_items, coverage, top, magnitude, explain)
    if (query is None) == (query_image is None):
        raise InputError("give a text query or a query image (one of them)")
    if query is not None and not query.strip():
        raise InputError("the query is empty: type some words")
    check_query_mode(spec.mode)
    check_gate_k(spec.topk)
    slq = slq_for(target, slq_template)
    image = None
    if query_image is not None:
        if exclude:
            raise InputError("exclusion (--exclude) needs a text query A")
        if spec.mode == "bow":
            raise InputError(
                "the bag-of-words query mode needs a text query (an image has no words)"
            )
        from PIL import Image

        from lexlens.models.images import load_image

        image = (
            query_image
            if isinstance(query_image, Image.Image)
            else load_image(
                query_image,
                name=image_name
                or (str(query_image) if isinstance(query_image, (str, Path)) else "query image"),
            )
        )
        need = IMAGE_QUERY_NEEDS
    else:
        need = text_query_needs(spec.mode)
    try:
        need.check(spec.encoder)
    except ModalityError as exc:
        kind = "image" if image is not None else "text"
        partner = partner_for(spec.encoder.name, kind)
        hint = f": use {partner!r} (same vocabulary)" if partner else ""
        if kind == "text" and spec.encoder.can(Capability.FEATURE_LEXICAL):
            hint = ": a head over dense features has no text tower; use --query-mode bow"
        raise ModalityError(f"{exc}{hint}") from None
    check_vocabulary(target, spec.encoder)
    settings = {
        "top": top, "query_mode": spec.mode, "topk": spec.topk, "query_encoder": spec.encoder.name,
    }  # fmt: skip
    if exclude and method == "sr":
        settings |= {"k_items": k_items, "coverage": coverage, "magnitude": magnitude,
                     "normalize": normalize}  # fmt: skip
    if exclude and method == "text":
        settings["slq_template"] = slq
    query_info: dict = (
        {"text": query} if query is not None else {"image": image_name or "query image"}
    )
    if exclude:
        query_info["exclude"] = exclude
    labels = labelled(target) if evaluate and query is not None else None
    relevant = None
    metrics = None
    messages: list[str] = []
    if image is not None:
        q = QuerySpec(spec.encoder, "parametric", spec.topk).image(image)
        rows, scores = top_items(target, q, top)
        hits = _hits(target, target.vocab, rows, q, explain=explain)
        return SearchResult(target.describe(), query_info, "search", settings, hits)
    ids = item_ids(target) if labels is not None else None
    if labels is not None:
        known = set().union(*labels) if labels else set()
        a_label, b_label = query.casefold().strip(), (exclude or "").casefold().strip()
        if a_label in known and (not exclude or b_label in known):
            relevant = relevant_ids(labels, ids, query, exclude)
        elif exclude:
            missing = a_label if a_label not in known else b_label
            messages.append(f"{missing!r} is not one of the collection's labels: no metrics")
    used = method if exclude else "search"
    common = dict(n=top, k_items=k_items, coverage=coverage, magnitude=magnitude,
                  normalize=normalize, slq=slq)  # fmt: skip
    rows, _, weights, dims, notes = rank_method(target, spec, used, query, exclude, **common)
    messages.extend(notes)
    sr = exclude is not None and method == "sr"
    hits = _hits(
        target, target.vocab, rows, weights, square=sr and magnitude == "l2",
        normalize=sr and normalize, explain=explain, relevant=relevant,
    )  # fmt: skip
    if relevant is not None:
        runs = {used: [h.id for h in hits]}
        if exclude:
            for other in METHODS:
                if other != method:
                    r, *_ = rank_method(target, spec, other, query, exclude, **(common | {"n": 10}))
                    runs[other] = [str(m["id"]) for m in target.meta(r)]
        metrics = {
            name: ir_metrics({"q": ranked[:10]}, {"q": relevant})["mean"]
            for name, ranked in runs.items()
        }
        if top < 10:
            messages.append(f"metrics of {used!r} are computed on its top {top} only (--top < 10)")
        if not relevant:
            messages.append("no item is labelled A and not B: every metric is 0")
    return SearchResult(
        target.describe(), query_info, used, settings, hits, dims, metrics,
        None if relevant is None else len(relevant), messages,
    )  # fmt: skip


def _precheck(options: dict) -> None:
    """Validate what can be validated before an encoder loads (a bad option costs nothing)."""
    exclude = (options.get("exclude") or "").strip() or None
    check_settings(
        options.get("method", "sr"), exclude, options.get("k_items"), options.get("coverage"),
        options.get("top", 10), options.get("magnitude", "sum"), options.get("explain", 5),
    )  # fmt: skip
    query, image = options.get("query"), options.get("query_image")
    if (query is None) == (image is None):
        raise InputError("give a text query (--query) or a query image (--query-image)")
    if query is not None and not query.strip():
        raise InputError("the query is empty: type some words")
    if image is not None and exclude:
        raise InputError("exclusion (--exclude) needs a text query A")
    if image is not None and options.get("mode", "parametric") == "bow":
        raise InputError("the bag-of-words query mode needs a text query (an image has no words)")
    check_gate_k(options.get("topk", 768))
    if image is not None and not hasattr(image, "size"):
        from lexlens.models.images import load_image

        options["query_image"] = load_image(image, name=options.get("image_name") or str(image))
        options.setdefault("image_name", str(image))


def search_index(
    index: str | Path | StoredIndex,
    query_encoder: str | Encoder | None = None,
    *,
    device: str | None = None,
    mode: str = "parametric",
    topk: int = 768,
    **options: Any,
) -> SearchResult:
    """Search a stored index (``lexlens search --index``): the index opens and every option
    is checked before the query encoder loads (by default the index's own encoder, or its
    partner in the same vocabulary: ``splade-tiny`` for an ``efficientnet-lite0-lexical``
    image index)."""
    target = index if isinstance(index, StoredIndex) else open_index(index)
    options = dict(options, mode=mode, topk=topk)
    _precheck(options)
    options.pop("mode")
    options.pop("topk")
    modality = "image" if options.get("query_image") is not None else "text"
    encoder = as_encoder(query_encoder or default_query_encoder(target, modality), device)
    return search(target, QuerySpec(encoder, mode, topk), **options)


def search_file(
    collection: str | Path,
    encoder: str | Encoder,
    *,
    device: str | None = None,
    mode: str = "parametric",
    topk: int = 768,
    **options: Any,
) -> SearchResult:
    """Search a small .txt/.csv/.jsonl collection encoded in memory (``--collection``)."""
    options = dict(options, mode=mode, topk=topk)
    _precheck(options)
    options.pop("mode")
    options.pop("topk")
    table = read_texts(collection, what="text")  # a bad file fails before the model loads
    model = as_encoder(encoder, device)
    target = encode_collection(
        model, table.texts, ids=table.ids, labels=table.labels or None, k=topk,
        name=Path(str(collection)).name,
    )  # fmt: skip
    return search(target, QuerySpec(model, mode, topk), **options)
