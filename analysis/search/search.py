"""Search a collection: plain search and exclusion "A but not B" (after the exclusion-queries paper of Prachi et al.).

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
from lexlens.analysis.core.gating import DEFAULT_GATE_K, accepts_topk, check_gate_k
from lexlens.analysis.core.inputs import read_texts
from lexlens.analysis.core.outputs import json_bytes, records_csv_bytes
from lexlens.analysis.core.results import Record, Result, internal, json_key
from lexlens.analysis.core.words import item_words, merge_contributions, text_words, words_of_tokens
from lexlens.analysis.lexical.contrib import partner_for
from lexlens.analysis.search.evaluation import (
    ir_metrics,
    item_ids,
    labelled,
    match_label,
    relevant_ids,
)
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
class Hit(Record):
    """One result: the item, its score and the terms that make it (summing to the score).

    ``top_contributions`` are vocabulary tokens; ``top_words`` the same contributions read
    as words (the pieces of a word the item or the query spells joined, their contributions
    added), so both lists, with the rest, sum to the score.
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


def _explain(
    target: Any,
    vocab: list[str],
    row: int,
    weights: np.ndarray,
    square: bool,
    denominator: float,
    explain: int,
    words: set[str],
) -> tuple[float, list[dict], int, float, list[dict], int]:
    """Score of ``row`` and its contributions: ``c_t = weights_t · f(w_t) / denominator``
    (for ``square``, ``c_t = w_t² / (denominator · s)`` so that they sum to ``s = √(...)``);
    the top ``explain`` as tokens and as ``words`` (pieces joined, contributions added)."""
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
    merged = [
        {"word": r["token"], "contribution": r["contribution"]}
        | ({"pieces": r["pieces"]} if "pieces" in r else {})
        for r in merge_contributions(rows, vocab, words)
    ]
    return (
        score, shown, max(0, len(rows) - explain), rest, merged[:explain],
        max(0, len(merged) - explain),
    )  # fmt: skip


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
    query_words: set[str] = frozenset(),
) -> list[Hit]:
    metas = target.meta(rows)
    out = []
    for rank, (row, meta) in enumerate(zip(rows, metas, strict=True), start=1):
        nu = 1.0
        if normalize:
            norm = float(target.norms[int(row)])
            nu = norm if norm > 0 else 1.0
        words = set(query_words) | item_words(meta)
        # sum: c_t = q_t w_t / ν; l2: c_t = w_t² / (ν² s) with s = √(Σ_D w_t²) / ν.
        score, shown, others, rest, merged, other_words = _explain(
            target, vocab, int(row), weights, square, nu * nu if square else nu, explain, words
        )
        out.append(
            Hit(
                rank, int(row), str(meta["id"]), score, str(meta.get("kind", "text")),
                str(meta.get("text") or ""), str(meta.get("image") or ""),
                list(meta.get("labels") or []), shown, others, rest,
                None if relevant is None else str(meta["id"]) in relevant, merged, other_words,
            )
        )  # fmt: skip
    return out


def hit_summary(hit: Hit) -> str:
    """A hit's score as the words that make it: ``cat 0.512 + kitten 0.301 + 12 more terms
    0.044`` (the parts sum to the score)."""
    parts = [f"{w['word']} {w['contribution']:.3f}" for w in hit.top_words]
    rest = hit.score - sum(w["contribution"] for w in hit.top_words)
    if hit.other_words:
        parts.append(f"{hit.other_words} more terms {rest:.3f}")
    return " + ".join(parts)


@dataclass(frozen=True)
class SearchResult(Result):
    """The result of one search or exclusion query on a collection."""

    file_stem = "search"

    collection: dict
    query: dict
    method: str
    settings: dict
    hits: list[Hit] = json_key("results")
    dimensions: dict | None = None
    metrics: dict | None = None
    relevant_count: int | None = None
    notes: list[str] = json_key("messages", default_factory=list)

    def files(self) -> dict[str, bytes]:
        """search.json and search.csv (a row per hit, its words summing to its score)."""
        rows = [
            {"rank": h.rank, "id": h.id, "score": h.score, "text": h.text, "image": h.image,
             "contributions": hit_summary(h)}
            for h in self.hits
        ]  # fmt: skip
        return {"search.json": json_bytes(self), "search.csv": records_csv_bytes(rows)}


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
    check_gate_k(spec.gate_k)
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
        "top": top, "query_mode": spec.mode, "topk": spec.gate_k, "query_encoder": spec.encoder.name,
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
    notes: list[str] = []
    if image is not None:
        q = QuerySpec(spec.encoder, "parametric", spec.gate_k).image(image)
        rows, scores = top_items(target, q, top)
        hits = _hits(target, target.vocab, rows, q, explain=explain)
        return SearchResult(target.describe(), query_info, "search", settings, hits)
    ids = item_ids(target) if labels is not None else None
    if labels is not None:
        known = set().union(*labels) if labels else set()
        a_label = match_label(query, known)
        b_label = match_label(exclude, known) if exclude else None
        for given, label in ((query, a_label), (exclude, b_label)):
            if given and label is not None and label != given.casefold().strip():
                notes.append(f"{given!r} is evaluated as the collection's label {label!r}")
        if a_label is not None and (not exclude or b_label is not None):
            relevant = relevant_ids(labels, ids, a_label, b_label)
        elif exclude:
            missing = query if a_label is None else exclude
            notes.append(f"{missing!r} is not one of the collection's labels: no metrics")
    used = method if exclude else "search"
    common = dict(n=top, k_items=k_items, coverage=coverage, magnitude=magnitude,
                  normalize=normalize, slq=slq)  # fmt: skip
    rows, _, weights, dims, method_notes = rank_method(target, spec, used, query, exclude, **common)
    notes.extend(method_notes)
    sr = exclude is not None and method == "sr"
    query_words = text_words(f"{query} {exclude or ''}") | getattr(target, "known_words", set())
    hits = _hits(
        target, target.vocab, rows, weights, square=sr and magnitude == "l2",
        normalize=sr and normalize, explain=explain, relevant=relevant, query_words=query_words,
    )  # fmt: skip
    if dims is not None:  # the dimension sets read as words, too
        evidence = query_words.union(*(item_words(m) for m in target.meta(rows)))
        for kind in ("include", "exclude", "kept"):
            dims[f"{kind}_words"] = words_of_tokens(dims[f"{kind}_terms"], target.vocab, evidence)
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
            notes.append(f"metrics of {used!r} are computed on its top {top} only (--top < 10)")
        if not relevant:
            notes.append("no item is labelled A and not B: every metric is 0")
    return SearchResult(
        target.describe(), query_info, used, settings, hits, dims, metrics,
        None if relevant is None else len(relevant), notes,
    )  # fmt: skip


def _precheck(options: dict) -> None:
    """Validate what can be validated before an encoder loads (a bad option costs nothing)."""
    exclude = (options.get("exclude") or "").strip() or None
    check_settings(
        options.get("method", "sr"), exclude, options.get("k_items"), options.get("coverage"),
        options.get("top", 10), options.get("magnitude", "sum"), options.get("explain", 5),
    )  # fmt: skip
    query, image = options.get("query"), options.get("query_image")
    if query is not None and not isinstance(query, str):
        raise InputError(f"the query must be a string, not {type(query).__name__}")
    if (query is None) == (image is None):
        raise InputError("give a text query (--query) or a query image (--query-image)")
    if query is not None and not query.strip():
        raise InputError("the query is empty: type some words")
    if image is not None and exclude:
        raise InputError("exclusion (--exclude) needs a text query A")
    if image is not None and options.get("mode", "parametric") == "bow":
        raise InputError("the bag-of-words query mode needs a text query (an image has no words)")
    check_gate_k(options.get("gate_k", DEFAULT_GATE_K))
    if image is not None and not hasattr(image, "size"):
        from lexlens.models.images import load_image

        options["query_image"] = load_image(image, name=options.get("image_name") or str(image))
        options.setdefault("image_name", str(image))


@accepts_topk
def search_index(
    index: str | Path | StoredIndex,
    query_encoder: str | Encoder | None = None,
    *,
    device: str | None = None,
    mode: str = "parametric",
    gate_k: int = DEFAULT_GATE_K,
    **options: Any,
) -> SearchResult:
    """Search a stored index (``lexlens search --index``): the index opens and every option
    is checked before the query encoder loads (by default the index's own encoder, or its
    partner in the same vocabulary: ``splade-tiny`` for an ``efficientnet-lite0-lexical``
    image index)."""
    target = index if isinstance(index, StoredIndex) else open_index(index)
    options = dict(options, mode=mode, gate_k=gate_k)
    _precheck(options)
    options.pop("mode")
    options.pop("gate_k")
    modality = "image" if options.get("query_image") is not None else "text"
    encoder = as_encoder(query_encoder or default_query_encoder(target, modality), device)
    return search(target, QuerySpec(encoder, mode, gate_k), **options)


@accepts_topk
def search_file(
    collection: str | Path,
    encoder: str | Encoder,
    *,
    device: str | None = None,
    mode: str = "parametric",
    gate_k: int = DEFAULT_GATE_K,
    **options: Any,
) -> SearchResult:
    """Search a small .txt/.csv/.jsonl collection encoded in memory (``--collection``)."""
    options = dict(options, mode=mode, gate_k=gate_k)
    _precheck(options)
    options.pop("mode")
    options.pop("gate_k")
    table = read_texts(collection, what="text")  # a bad file fails before the model loads
    model = as_encoder(encoder, device)
    target = encode_collection(
        model, table.texts, ids=table.ids, labels=table.labels or None, gate_k=gate_k,
        name=Path(str(collection)).name,
    )  # fmt: skip
    return search(target, QuerySpec(model, mode, gate_k), **options)
