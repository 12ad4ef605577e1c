"""Evaluating rankings of a labelled collection: MRR@1, MRR@10, NDCG@10 and AP@10, and whole
tables of exclusion pairs (A, B) or of queries with their relevant ids (``lexlens search
--eval``).

Evaluation: relevant items for (A, B) carry label A and not label B (as in the exclusion-queries paper of Prachi et al.). MRR@1,
MRR@10, NDCG@10 and AP@10 are computed by ir-measures (``RR@1``, ``RR@10``, ``nDCG@10``,
``AP@10``: trec_eval's definitions; AP@10 divides by *all* relevant items, not min(R, 10)).
Each ranking is handed over with strictly decreasing scores, so every backend sees the same
order (ir-measures' backends break ties differently).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lexlens.analysis.collections.store import StoredIndex, open_index
from lexlens.analysis.core.gating import DEFAULT_GATE_K, accepts_topk, check_gate_k
from lexlens.analysis.core.inputs import parse_labels, read_rows
from lexlens.analysis.core.results import Progress, Result, json_key
from lexlens.analysis.search.exclusion import METHODS, check_settings, rank_method, slq_for
from lexlens.analysis.search.queries import (
    QuerySpec,
    check_query_mode,
    check_vocabulary,
    default_query_encoder,
    text_query_needs,
)
from lexlens.models.base import Encoder, InputError
from lexlens.models.registry import as_encoder

METRICS = ("MRR@1", "MRR@10", "NDCG@10", "AP@10")


def _cached(target: Any, name: str, make: Any) -> Any:
    """A per-collection value computed once (labels and ids of a large index)."""
    cache = target.__dict__.setdefault("_search_cache", {})
    if name not in cache:
        cache[name] = make()
    return cache[name]


def labelled(target: Any) -> list[frozenset[str]] | None:
    """Each item's labels, casefolded (``None`` for a collection without labels)."""
    if not getattr(target, "has_labels", False):
        return None
    return _cached(
        target,
        "labels",
        lambda: [
            frozenset(str(x).casefold() for x in (lab or [])) for lab in target.column("labels")
        ],
    )


def item_ids(target: Any) -> list[str]:
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


def ir_metrics(ranked: dict[str, list[str]], relevant: dict[str, set[str]]) -> dict:
    """MRR@1, MRR@10, NDCG@10 and AP@10 (ir-measures) per query and their means.

    Rankings are given as ordered id lists and handed over with strictly decreasing scores
    (duplicates dropped), so every backend sees this order. Queries with no relevant item
    score 0 and count in the mean.
    """
    import ir_measures
    from ir_measures import AP, RR, nDCG

    measures = {"MRR@1": RR @ 1, "MRR@10": RR @ 10, "NDCG@10": nDCG @ 10, "AP@10": AP @ 10}
    qrels = {q: {d: 1 for d in rel} for q, rel in relevant.items() if rel}
    run = {}
    for q, ids in ranked.items():
        unique = list(dict.fromkeys(ids))
        if unique:
            run[q] = {d: float(len(unique) - i) for i, d in enumerate(unique)}
    per_query = {q: dict.fromkeys(measures, 0.0) for q in relevant}
    if qrels:
        names = {str(m): k for k, m in measures.items()}
        for metric in ir_measures.iter_calc(list(measures.values()), qrels, run):
            per_query[metric.query_id][names[str(metric.measure)]] = float(metric.value)
    n = max(1, len(relevant))
    mean = {k: sum(per_query[q][k] for q in relevant) / n for k in measures}
    return {"per_query": per_query, "mean": mean}


@dataclass(frozen=True)
class EvalResult(Result):
    """A table of (A, B) exclusion pairs or (query, relevant ids) rows, per method."""

    file_stem = "evaluation"

    collection: dict
    kind: str  # "pairs" | "queries"
    settings: dict
    methods: dict = json_key("metrics")  # method -> mean metrics
    rows: list[dict] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)


def read_eval_file(source: Any, name: str | None = None) -> tuple[str, list[dict]]:
    """Rows of a pairs file: columns ``a``, ``b`` (label pairs), or ``query``, ``relevant``
    (``|``-separated ids). Returns ("pairs" | "queries", rows)."""
    label = name or str(source)
    rows = read_rows(source, name)
    if not rows:
        raise InputError(f"{label}: holds no rows")
    columns = {k.strip().lower() for r in rows for k in r}
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


def evaluate(
    target: Any,
    spec: QuerySpec,
    kind: str,
    rows: list[dict],
    *,
    methods: tuple[str, ...] = METHODS,
    k_items: int | None = None,
    coverage: float | None = None,
    magnitude: str = "sum",
    normalize: bool = True,
    slq_template: str | None = None,
    min_relevant: int = 1,
    progress: Progress | None = None,
) -> EvalResult:
    """Run a table of exclusion pairs (A, B) per method — the exclusion-queries paper's Table 1 — or of text
    queries with their relevant ids (plain search). Metrics by ir-measures."""
    k_items, coverage = check_settings("sr", "b", k_items, coverage, 10, magnitude, 0)
    check_gate_k(spec.gate_k)
    check_vocabulary(target, spec.encoder)
    text_query_needs(spec.mode).check(spec.encoder)
    slq = slq_for(target, slq_template)
    ids = item_ids(target)
    settings = {"query_mode": spec.mode, "topk": spec.gate_k, "query_encoder": spec.encoder.name,
                "cutoff": 10}  # fmt: skip
    common = dict(n=10, k_items=k_items, coverage=coverage, magnitude=magnitude,
                  normalize=normalize, slq=slq)  # fmt: skip
    out_rows: list[dict] = []
    skipped: list[dict] = []
    if kind == "queries":
        known = set(ids)
        ranked, relevant = {}, {}
        for n, row in enumerate(rows):
            missing = [r for r in row["relevant"] if r not in known]
            if missing:
                skipped.append(
                    {"query": row["query"], "reason": f"unknown ids: {', '.join(missing)}"}
                )
                continue
            q = f"q{n}"
            r, *_ = rank_method(target, spec, "search", row["query"], None, **common)
            ranked[q] = [ids[int(i)] for i in r]
            relevant[q] = set(row["relevant"])
            if progress:
                progress(n + 1, len(rows))
        result = ir_metrics(ranked, relevant)
        for n, row in enumerate(rows):
            q = f"q{n}"
            if q in ranked:
                out_rows.append(
                    {"query": row["query"], "relevant": row["relevant"], "top": ranked[q][:3],
                     **result["per_query"][q]}
                )  # fmt: skip
        return EvalResult(
            target.describe(), kind, settings, {"search": result["mean"]}, out_rows, skipped
        )
    labels = labelled(target)
    if labels is None:
        raise InputError("the collection has no labels: exclusion pairs need labelled items")
    settings |= {"k_items": k_items, "coverage": coverage, "magnitude": magnitude,
                 "normalize": normalize, "slq_template": slq, "min_relevant": min_relevant}  # fmt: skip
    ranked = {m: {} for m in methods}
    relevant = {}
    pair_info = {}
    for n, row in enumerate(rows):
        a, b = row["a"], row["b"]
        la, lb = a.casefold(), b.casefold()
        counts = {
            "A": sum(la in x for x in labels),
            "B": sum(lb in x for x in labels),
            "A_and_B": sum(la in x and lb in x for x in labels),
        }
        counts["A_not_B"] = counts["A"] - counts["A_and_B"]
        if la == lb:
            skipped.append({"a": a, "b": b, "reason": "A and B are the same label", **counts})
            continue
        if counts["A_not_B"] < min_relevant:
            skipped.append(
                {
                    "a": a,
                    "b": b,
                    "reason": f"fewer than {min_relevant} item(s) labelled A and not B",
                    **counts,
                }
            )
            continue
        q = f"p{n}"
        relevant[q] = relevant_ids(labels, ids, a, b)
        pair_info[q] = {"a": a, "b": b, **counts}
        for m in methods:
            r, *_ = rank_method(target, spec, m, a, b, **common)
            ranked[m][q] = [ids[int(i)] for i in r]
        if progress:
            progress(n + 1, len(rows))
    if not relevant:
        raise InputError(
            "no usable pair: every pair was skipped (see the reasons)"
            + (
                f"; first: {skipped[0]['a']} / {skipped[0]['b']}: {skipped[0]['reason']}"
                if skipped
                else ""
            )
        )
    means = {}
    per = {}
    for m in methods:
        result = ir_metrics(ranked[m], relevant)
        means[m] = result["mean"]
        per[m] = result["per_query"]
    for q, info in pair_info.items():
        out_rows.append(info | {m: per[m][q] for m in methods})
    return EvalResult(target.describe(), kind, settings, means, out_rows, skipped)


@accepts_topk
def evaluate_index(
    index: str | Path | StoredIndex,
    eval_file: str | Path,
    query_encoder: str | Encoder | None = None,
    *,
    device: str | None = None,
    mode: str = "parametric",
    gate_k: int = DEFAULT_GATE_K,
    **options: Any,
) -> EvalResult:
    """``lexlens search --index DIR --eval FILE``: a table of pairs or queries (see
    :func:`evaluate`); the file and options are checked before the encoder loads."""
    target = index if isinstance(index, StoredIndex) else open_index(index)
    kind, rows = read_eval_file(eval_file)
    check_settings(
        "sr", "b", options.get("k_items"), options.get("coverage"), 10,
        options.get("magnitude", "sum"), 0,
    )  # fmt: skip
    if kind == "pairs" and not target.has_labels:
        raise InputError(f"{target.label}: the collection has no labels: pairs need labelled items")
    check_query_mode(mode)
    check_gate_k(gate_k)
    encoder = as_encoder(query_encoder or default_query_encoder(target, "text"), device)
    return evaluate(target, QuerySpec(encoder, mode, gate_k), kind, rows, **options)
