"""Evaluating a collection on a table of exclusion pairs (A, B) or of text queries with their
relevant ids (``lexlens search --eval``): RR@1, RR@10, nDCG@10 and AP@10 per method.

Relevant items for a pair (A, B) carry label A and not label B (Prachi, Bhatia and Bedathur,
"Answering Multimodal Exclusion Queries with Lightweight Sparse Disentangled
Representations", ICTIR 2025); each exclusion method (:mod:`.exclusion`) ranks the
collection's top 10 for the pair. For a query, the relevant items are the ids its row
lists, and search ranks the top 10. The measures come from the one metrics layer
(:func:`lexlens.analysis.core.metrics.measure_rankings`: ir-measures, trec_eval's
definitions; AP@10 divides by *all* relevant items, not min(R, 10)); each ranking is handed
over in the order shown. A row whose relevant items are not there is skipped and listed
with its reason.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lexlens.analysis.collections.arguments import index_argument
from lexlens.analysis.collections.stored import StoredCollection
from lexlens.analysis.core.arguments import (
    device_argument,
    loaded_encoder,
    path_argument,
    progress_argument,
)
from lexlens.analysis.core.collection import Collection
from lexlens.analysis.core.inputs import parse_labels, read_rows
from lexlens.analysis.core.metrics import EvaluationResult, measure_rankings
from lexlens.analysis.core.results import Progress
from lexlens.analysis.retrieval.queries import (
    QuerySpec,
    check_vocabulary,
    query_encoder_for,
    text_query_needs,
)
from lexlens.analysis.search.exclusion import ExclusionSettings, rank_method
from lexlens.analysis.search.inputs import checked_collection
from lexlens.analysis.search.options import TableEvaluationOptions
from lexlens.models.base import Encoder, InputError

#: The measures of a table (ir-measures names), each at the depth ranked.
MEASURES = ("RR@1", "RR@10", "nDCG@10", "AP@10")
#: Items ranked per pair or query.
CUTOFF = 10

#: Per-collection values computed once (labels and ids of a large index), dropped with it.
_CACHE: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


def _cached(target: Collection, name: str, make: Callable[[], Any]) -> Any:
    """``make()`` for ``target``, computed once while ``target`` lives."""
    values = _CACHE.setdefault(target, {})
    if name not in values:
        values[name] = make()
    return values[name]


def labelled(target: Collection) -> list[frozenset[str]] | None:
    """Each item's labels, casefolded (``None`` for a collection without labels)."""
    if not target.has_labels:
        return None
    return _cached(
        target,
        "labels",
        lambda: [
            frozenset(str(x).casefold() for x in (lab or [])) for lab in target.column("labels")
        ],
    )


def item_ids(target: Collection) -> list[str]:
    """Every item's id, in row order."""
    return _cached(target, "ids", lambda: [str(x) for x in target.column("id")])


#: Articles a query may start with that a label does not ("an animal" is the label animal).
ARTICLES = ("a ", "an ", "the ")


def match_label(text: str | None, known: set[str]) -> str | None:
    """The collection's label a query names: itself lower-cased, else without a leading
    article (``"An animal"`` → ``"animal"``); ``None`` when it names none."""
    if not text:
        return None
    wanted = " ".join(text.casefold().split())
    if wanted in known:
        return wanted
    for article in ARTICLES:
        if wanted.startswith(article) and wanted[len(article) :] in known:
            return wanted[len(article) :]
    return None


def relevant_ids(labels: list[frozenset[str]], ids: list[str], a: str, b: str | None) -> set[str]:
    """Items labelled A and not B (casefolded labels)."""
    a, b = a.casefold().strip(), (b or "").casefold().strip()
    return {i for i, lab in zip(ids, labels, strict=True) if a in lab and not (b and b in lab)}


# ------------------------------------------------------------------------------- result
@dataclass(frozen=True)
class TableEvaluationResult(EvaluationResult):
    """A table of exclusion pairs (A, B) or of queries with their relevant ids, evaluated:
    ``metrics["aggregate"]`` holds each method's means (``search`` for queries),
    ``metrics["per_query"]`` one row per pair or query evaluated."""

    kind: str  # "pairs" | "queries"
    skipped: list[dict] = field(default_factory=list)


# -------------------------------------------------------------------------------- table
def table_rows(rows: Sequence[Mapping], label: str) -> tuple[str, list[dict]]:
    """``("pairs", rows)`` from rows with columns ``a`` and ``b`` (label pairs), or
    ``("queries", rows)`` from ``query`` and ``relevant`` (ids, ``|``-separated or a list);
    a row missing one is refused naming its number."""
    if (
        not isinstance(rows, Sequence)
        or isinstance(rows, (str, bytes))
        or not all(isinstance(r, Mapping) for r in rows)
    ):
        raise InputError(f"{label}: expected rows of a table (mappings of column to value)")
    if not rows:
        raise InputError(f"{label}: holds no rows")
    columns = {str(k).strip().lower() for r in rows for k in r}
    lowered = [{str(k).strip().lower(): v for k, v in r.items()} for r in rows]
    if {"a", "b"} <= columns:
        out = [
            {"a": str(r.get("a") or "").strip(), "b": str(r.get("b") or "").strip()}
            for r in lowered
        ]
        bad = next((i for i, r in enumerate(out) if not r["a"] or not r["b"]), None)
        if bad is not None:
            raise InputError(f"{label}: row {bad + 1} needs both a label A and a label B")
        return "pairs", out
    if {"query", "relevant"} <= columns:
        out = [
            {
                "query": str(r.get("query") or "").strip(),
                "relevant": sorted(parse_labels(r.get("relevant"))),
            }
            for r in lowered
        ]
        bad = next((i for i, r in enumerate(out) if not r["query"] or not r["relevant"]), None)
        if bad is not None:
            raise InputError(f"{label}: row {bad + 1} needs a query and at least one relevant id")
        return "queries", out
    raise InputError(
        f"{label}: needs columns 'a' and 'b' (label pairs) or 'query' and 'relevant' "
        f"(columns: {', '.join(sorted(columns))})"
    )


def read_eval_file(source: Any, name: str | None = None) -> tuple[str, list[dict]]:
    """Rows of a pairs file: columns ``a``, ``b`` (label pairs), or ``query``, ``relevant``
    (``|``-separated ids). Returns ("pairs" | "queries", rows)."""
    return table_rows(read_rows(source, name), name or str(source))


# ----------------------------------------------------------------------------- use case
@dataclass(frozen=True)
class _Run:
    """What every row's ranking needs: the collection, the queries, the exclusion settings."""

    target: Collection
    spec: QuerySpec
    ids: list[str]
    settings: ExclusionSettings
    progress: Progress | None

    def ranked(self, method: str, a: str, b: str | None) -> list[str]:
        """The top :data:`CUTOFF` ids of one method for A (but not B)."""
        rows, *_ = rank_method(
            self.target, self.spec, method, a, b, n=CUTOFF, settings=self.settings
        )
        return [self.ids[int(i)] for i in rows]

    def step(self, done: int, total: int, what: str) -> None:
        if self.progress:
            self.progress(done / total, f"{done}/{total} {what}")


def _queries(run: _Run, rows: list[dict]) -> tuple[dict, list[dict], list[dict]]:
    """(aggregate, per-query rows, skipped rows) of a table of queries."""
    known = set(run.ids)
    ranked, relevant, kept, skipped = {}, {}, {}, []
    for n, row in enumerate(rows):
        missing = [r for r in row["relevant"] if r not in known]
        if missing:
            skipped.append({"query": row["query"], "reason": f"unknown ids: {', '.join(missing)}"})
        else:
            q = f"q{n}"
            ranked[q] = run.ranked("search", row["query"], None)
            relevant[q], kept[q] = set(row["relevant"]), row
        run.step(n + 1, len(rows), "queries ranked")
    if not relevant:
        first = f"; first: {skipped[0]['query']}: {skipped[0]['reason']}"
        raise InputError("no usable query: every query was skipped (see the reasons)" + first)
    mean, values = measure_rankings(ranked, relevant, MEASURES)
    table = [
        {"query": row["query"], "relevant": row["relevant"], "top": ranked[q][:3], **values[q]}
        for q, row in kept.items()
    ]
    return {"search": mean}, table, skipped


def _pair_counts(labels: list[frozenset[str]], a: str, b: str) -> dict[str, int]:
    """Items labelled A, B, both, and A but not B."""
    la, lb = a.casefold(), b.casefold()
    counts = {
        "A": sum(la in x for x in labels),
        "B": sum(lb in x for x in labels),
        "A_and_B": sum(la in x and lb in x for x in labels),
    }
    counts["A_not_B"] = counts["A"] - counts["A_and_B"]
    return counts


def _pairs(
    run: _Run, rows: list[dict], options: TableEvaluationOptions
) -> tuple[dict, list[dict], list[dict]]:
    """(aggregate per method, per-pair rows, skipped rows) of a table of pairs."""
    labels = labelled(run.target)
    if labels is None:
        raise InputError("the collection has no labels: exclusion pairs need labelled items")
    least = options.min_relevant
    ranked: dict[str, dict[str, list[str]]] = {m: {} for m in options.methods}
    relevant, info, skipped = {}, {}, []
    for n, row in enumerate(rows):
        a, b = row["a"], row["b"]
        counts = _pair_counts(labels, a, b)
        if a.casefold() == b.casefold():
            skipped.append({"a": a, "b": b, "reason": "A and B are the same label", **counts})
        elif counts["A_not_B"] < least:
            reason = f"fewer than {least} item(s) labelled A and not B"
            skipped.append({"a": a, "b": b, "reason": reason, **counts})
        else:
            q = f"p{n}"
            relevant[q] = relevant_ids(labels, run.ids, a, b)
            info[q] = {"a": a, "b": b, **counts}
            for method in options.methods:
                ranked[method][q] = run.ranked(method, a, b)
        run.step(n + 1, len(rows), "pairs ranked")
    if not relevant:
        first = f"; first: {skipped[0]['a']} / {skipped[0]['b']}: {skipped[0]['reason']}"
        raise InputError("no usable pair: every pair was skipped (see the reasons)" + first)
    measured = {m: measure_rankings(ranked[m], relevant, MEASURES) for m in options.methods}
    aggregate = {m: mean for m, (mean, _) in measured.items()}
    table = [row | {m: values[q] for m, (_, values) in measured.items()} for q, row in info.items()]
    return aggregate, table, skipped


def evaluate(
    target: Collection,
    encoder: Encoder,
    rows: Sequence[Mapping],
    *,
    options: TableEvaluationOptions | None = None,
    progress: Progress | None = None,
    **given: Any,
) -> TableEvaluationResult:
    """A table of exclusion pairs (A, B) per method — Table 1 of the exclusion-queries
    paper — or of text queries with their relevant ids (plain search), on ``target`` with
    the query ``encoder`` (see the module docstring)."""
    options = TableEvaluationOptions.of(options, **given)
    target = checked_collection(target)
    encoder = loaded_encoder(encoder)
    progress = progress_argument(progress)
    kind, rows = table_rows(rows, "rows")
    check_vocabulary(target, encoder)
    text_query_needs(options.query_mode).check(encoder)
    settings = ExclusionSettings.of(target, options)
    spec = QuerySpec(encoder, options.query_mode, options.gate_k)
    run = _Run(target, spec, item_ids(target), settings, progress)
    shown = {
        "query_mode": options.query_mode,
        "gate_k": options.gate_k,
        "query_encoder": encoder.name,
        "cutoff": CUTOFF,
    }
    if kind == "queries":
        aggregate, table, skipped = _queries(run, rows)
    else:
        aggregate, table, skipped = _pairs(run, rows, options)
        shown |= {
            "k_items": settings.k_items,
            "coverage": settings.coverage,
            "magnitude": settings.magnitude,
            "normalize": settings.normalize,
            "slq_template": settings.slq,
            "min_relevant": options.min_relevant,
        }
    return TableEvaluationResult(
        index=target.describe(),
        encoder=encoder.name,
        settings=shown,
        metrics={"aggregate": aggregate, "per_query": table},
        notes=[],
        kind=kind,
        skipped=skipped,
    )


def evaluate_index(
    index: str | Path | StoredCollection,
    eval_file: str | Path,
    query_encoder: str | Encoder | None = None,
    *,
    device: str | None = None,
    progress: Progress | None = None,
    options: TableEvaluationOptions | None = None,
    **given: Any,
) -> TableEvaluationResult:
    """``lexlens search --index DIR --eval FILE``: a table of pairs or queries (see
    :func:`evaluate`); the file and options are checked before the encoder loads."""
    options = TableEvaluationOptions.of(options, **given)
    target = index_argument(index)
    path_argument(eval_file, "eval_file", "a .csv or .jsonl file's path")
    kind, rows = read_eval_file(eval_file)
    if kind == "pairs" and not target.has_labels:
        raise InputError(f"{target.label}: the collection has no labels: pairs need labelled items")
    device_argument(device)
    progress = progress_argument(progress)
    needs = text_query_needs(options.query_mode)
    encoder = query_encoder_for(target, query_encoder, device, needs=needs)
    return evaluate(target, encoder, rows, options=options, progress=progress)
