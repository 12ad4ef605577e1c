"""Search a collection: plain search and exclusion "A but not B" (Prachi, Bhatia and
Bedathur, "Answering Multimodal Exclusion Queries with Lightweight Sparse Disentangled
Representations", ICTIR 2025).

A *collection* is anything that answers :class:`~lexlens.analysis.core.collection.Collection`:
a stored index (:mod:`lexlens.analysis.collections.store`) or a small
:class:`~lexlens.analysis.collections.memory.MemoryCollection`. Plain search ranks items
by the inner product ``E_q · E_d`` (:meth:`lexlens.analysis.retrieval.scorer.Scorer.top`);
exclusion ranks by SR's dimension sets or a baseline (:mod:`lexlens.analysis.search.exclusion`).
Each hit lists the terms that make its score, and all of a hit's contributions sum exactly to
the score it shows (:mod:`lexlens.analysis.search.hits`). With labels, the metrics of every
method come from :mod:`lexlens.analysis.search.table_evaluation`. The settings are one
:class:`~lexlens.analysis.search.options.SearchOptions`; the inputs are checked before any
model loads (:mod:`lexlens.analysis.search.inputs`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lexlens.analysis.collections.arguments import index_argument
from lexlens.analysis.collections.memory import encode_collection
from lexlens.analysis.collections.stored import StoredCollection
from lexlens.analysis.core.arguments import device_argument, encoder_argument
from lexlens.analysis.core.collection import Collection
from lexlens.analysis.core.inputs import read_texts
from lexlens.analysis.core.metrics import measure_rankings
from lexlens.analysis.core.outputs import json_bytes, records_csv_bytes
from lexlens.analysis.core.results import Result
from lexlens.analysis.core.words import text_words
from lexlens.analysis.retrieval.queries import (
    IMAGE_QUERY_NEEDS,
    QuerySpec,
    check_vocabulary,
    query_encoder_for,
    text_query_needs,
)
from lexlens.analysis.retrieval.scorer import scorer_for
from lexlens.analysis.search.exclusion import ExclusionSettings, rank_method, with_set_words
from lexlens.analysis.search.hits import Hit, Scoring, explained_hits, hit_summary
from lexlens.analysis.search.inputs import (
    SearchQuery,
    checked_collection,
    checked_file,
    checked_query,
)
from lexlens.analysis.search.options import METHODS, SearchOptions
from lexlens.analysis.search.table_evaluation import (
    CUTOFF,
    MEASURES,
    item_ids,
    labelled,
    match_label,
    relevant_ids,
)
from lexlens.models.base import Capability, Encoder, ModalityError
from lexlens.models.registry import partner_for


@dataclass(frozen=True)
class SearchResult(Result):
    """The result of one search or exclusion query on a collection: its hits
    (``results``), SR's dimension sets, the metrics of every method when the collection's
    labels name the query, and notes on how to read it."""

    file_stem = "search"

    collection: dict
    query: dict
    method: str
    settings: dict
    results: list[Hit] = field(default_factory=list)
    dimensions: dict | None = None
    metrics: dict | None = None
    relevant_count: int | None = None
    notes: list[str] = field(default_factory=list)

    def files(self) -> dict[str, bytes]:
        """search.json and search.csv (a row per hit, its words summing to its score)."""
        rows = [
            {
                "rank": h.rank,
                "id": h.id,
                "score": h.score,
                "text": h.text,
                "image": h.image,
                "contributions": hit_summary(h),
            }
            for h in self.results
        ]
        return {"search.json": json_bytes(self), "search.csv": records_csv_bytes(rows)}


def search(
    collection: Collection,
    encoder: Encoder | str,
    query: str | None = None,
    *,
    query_image: Any = None,
    image_name: str | None = None,
    exclude: str | None = None,
    options: SearchOptions | None = None,
    **given: Any,
) -> SearchResult:
    """Search ``collection`` (a stored index or a :class:`MemoryCollection`) with queries
    made by ``encoder`` (loaded, or a registry name).

    A text ``query`` (or a ``query_image``: a path, bytes or a PIL image) ranks items by
    inner product; with ``exclude`` (text queries only), ``options.method`` picks SR, the
    average-embedding or the single-line baseline (module docstring). With labels in the
    collection and a query that is one of them, ``metrics`` holds RR@1, RR@10, nDCG@10
    and AP@10 for every method (relevant = labelled A and not B). The settings are
    ``options`` (:class:`SearchOptions`) or its fields as keywords; every input and setting
    is checked before any model runs.
    """
    options = SearchOptions.of(options, **given)
    target = checked_collection(collection)
    asked = checked_query(options, query, query_image, image_name, exclude)
    return _search(target, encoder_argument(encoder), asked, options)


def _search(
    target: Collection, encoder: Encoder, asked: SearchQuery, options: SearchOptions
) -> SearchResult:
    """The search of checked inputs: the query encoder checked against the collection, then
    an image query or a text query (with or without an exclusion)."""
    spec = QuerySpec(encoder, options.query_mode, options.gate_k)
    _check_query_encoder(spec, asked)
    check_vocabulary(target, encoder)
    settings = ExclusionSettings.of(target, options)
    if asked.image is not None:
        scoring = Scoring(QuerySpec(encoder, "parametric", options.gate_k).image(asked.image))
        rows, _ = scorer_for(target).top(scoring.weights, options.top)
        hits = explained_hits(target, rows, scoring, explain=options.explain)
        record = _settings(options, encoder, asked, settings)
        return SearchResult(target.describe(), {"image": asked.image_name}, "search", record, hits)
    return _text_search(target, spec, asked, options, settings)


def _check_query_encoder(spec: QuerySpec, asked: SearchQuery) -> None:
    """Refuse an encoder that cannot make this query, naming one that can."""
    need = IMAGE_QUERY_NEEDS if asked.image is not None else text_query_needs(spec.mode)
    try:
        need.check(spec.encoder)
    except ModalityError as exc:
        kind = "image" if asked.image is not None else "text"
        partner = partner_for(spec.encoder.name, kind)
        hint = f": use {partner!r} (same vocabulary)" if partner else ""
        if kind == "text" and spec.encoder.can(Capability.FEATURE_LEXICAL):
            hint = ": a head over dense features has no text tower; use --query-mode bow"
        raise ModalityError(f"{exc}{hint}") from None


def _settings(
    options: SearchOptions, encoder: Encoder, asked: SearchQuery, settings: ExclusionSettings
) -> dict:
    """The settings a result records: those of its query, and of its exclusion method."""
    record: dict[str, Any] = {
        "top": options.top,
        "query_mode": options.query_mode,
        "gate_k": options.gate_k,
        "query_encoder": encoder.name,
    }
    if asked.exclude and options.method == "sr":
        record |= {
            "k_items": settings.k_items,
            "coverage": settings.coverage,
            "magnitude": settings.magnitude,
            "normalize": settings.normalize,
        }
    if asked.exclude and options.method == "text":
        record["slq_template"] = settings.slq
    return record


def _text_search(
    target: Collection,
    spec: QuerySpec,
    asked: SearchQuery,
    options: SearchOptions,
    settings: ExclusionSettings,
) -> SearchResult:
    """A text query A (but not B), its hits in words, and its metrics when labels name it."""
    query, exclude = asked.text or "", asked.exclude
    labels = labelled(target) if options.evaluate else None
    relevant, notes = _relevant(target, labels, query, exclude)
    used = options.method if exclude else "search"
    rows, _, weights, dims, method_notes = rank_method(
        target, spec, used, query, exclude, n=options.top, settings=settings
    )
    notes.extend(method_notes)
    sr = exclude is not None and options.method == "sr"
    scoring = Scoring(weights, sr and settings.magnitude == "l2", sr and settings.normalize, sr)
    query_words = text_words(f"{query} {exclude or ''}") | target.known_words
    hits = explained_hits(
        target, rows, scoring, explain=options.explain, relevant=relevant, query_words=query_words
    )
    if dims is not None:  # the dimension sets read as words, too
        dims = with_set_words(target, spec, dims, query, exclude, settings, query_words, rows)
    metrics = None
    if relevant is not None:
        metrics = _metrics(target, spec, asked, options, settings, hits, relevant, notes)
    notes.extend(cut.note() for cut in spec.truncations())
    query_info: dict = {"text": query} | ({"exclude": exclude} if exclude else {})
    return SearchResult(
        target.describe(),
        query_info,
        used,
        _settings(options, spec.encoder, asked, settings),
        hits,
        dims,
        metrics,
        None if relevant is None else len(relevant),
        notes,
    )


def _relevant(
    target: Collection, labels: list[frozenset[str]] | None, query: str, exclude: str | None
) -> tuple[set[str] | None, list[str]]:
    """The ids labelled A and not B when the collection's labels name the query (``None``
    otherwise), and notes saying which label a query was read as, or why there are no
    metrics."""
    notes: list[str] = []
    if labels is None:
        return None, notes
    known = set().union(*labels) if labels else set()
    a_label = match_label(query, known)
    b_label = match_label(exclude, known) if exclude else None
    for given, label in ((query, a_label), (exclude, b_label)):
        if given and label is not None and label != given.casefold().strip():
            notes.append(f"{given!r} is evaluated as the collection's label {label!r}")
    if a_label is not None and (not exclude or b_label is not None):
        return relevant_ids(labels, item_ids(target), a_label, b_label), notes
    if exclude:
        missing = query if a_label is None else exclude
        notes.append(f"{missing!r} is not one of the collection's labels: no metrics")
    return None, notes


def _metrics(
    target: Collection,
    spec: QuerySpec,
    asked: SearchQuery,
    options: SearchOptions,
    settings: ExclusionSettings,
    hits: list[Hit],
    relevant: set[str],
    notes: list[str],
) -> dict:
    """RR@1, RR@10, nDCG@10 and AP@10 of this ranking and, for an exclusion, of every other
    method's top 10 (ir-measures, through the one metrics layer); adds notes on how to read
    them."""
    used = options.method if asked.exclude else "search"
    runs = {used: [h.id for h in hits]}
    if asked.exclude:
        for other in METHODS:
            if other != options.method:
                r, *_ = rank_method(
                    target,
                    spec,
                    other,
                    asked.text or "",
                    asked.exclude,
                    n=CUTOFF,
                    settings=settings,
                )
                runs[other] = [str(m["id"]) for m in target.meta(r)]
    metrics = {
        name: measure_rankings({"q": ranked[:CUTOFF]}, {"q": relevant}, MEASURES)[0]
        for name, ranked in runs.items()
    }
    if options.top < CUTOFF:
        notes.append(
            f"metrics of {used!r} are computed on its top {options.top} only (--top < {CUTOFF})"
        )
    if not relevant:
        notes.append("no item is labelled A and not B: every metric is 0")
    return metrics


def search_index(
    index: str | Path | StoredCollection,
    query_encoder: str | Path | Encoder | None = None,
    *,
    query: str | None = None,
    query_image: Any = None,
    image_name: str | None = None,
    exclude: str | None = None,
    device: str | None = None,
    options: SearchOptions | None = None,
    **given: Any,
) -> SearchResult:
    """Search a stored index (``lexlens search --index``): the index opens and every input
    and setting is checked before the query encoder loads (by default the index's own
    encoder, or its partner in the same vocabulary: ``splade-tiny`` for an
    ``efficientnet-lite0-lexical`` image index). Settings as :func:`search`."""
    options = SearchOptions.of(options, **given)
    target = index_argument(index)
    asked = checked_query(options, query, query_image, image_name, exclude)
    device_argument(device)
    modality = "image" if asked.image is not None else "text"
    encoder = query_encoder_for(target, query_encoder, device, modality)
    return _search(target, encoder, asked, options)


def search_file(
    collection: str | Path,
    encoder: str | Path | Encoder,
    *,
    query: str | None = None,
    query_image: Any = None,
    image_name: str | None = None,
    exclude: str | None = None,
    device: str | None = None,
    options: SearchOptions | None = None,
    **given: Any,
) -> SearchResult:
    """Search a small .txt/.csv/.jsonl collection encoded in memory (``--collection``) with
    ``encoder`` (its documents and the queries). Settings as :func:`search`."""
    options = SearchOptions.of(options, **given)
    path = checked_file(collection)
    asked = checked_query(options, query, query_image, image_name, exclude)
    device_argument(device)
    table = read_texts(path, what="text")  # a bad file fails before the model loads
    model = encoder_argument(encoder, device=device)
    target = encode_collection(
        model,
        table.texts,
        ids=table.ids,
        labels=table.labels or None,
        gate_k=options.gate_k,
        name=Path(str(path)).name,
    )
    return _search(target, model, asked, options)
