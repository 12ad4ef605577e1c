"""What an approximate engine lost against the exact ranking, and why: each item of the
exact top k that an engine's run misses, its reason found by replaying the engine's
declared pruning exactly on the collection's stored vectors.

The engines and what is replayed (:data:`ENGINES`):

- ``seismic`` (Bruch et al., "Efficient Inverted Indexes for Approximate Retrieval over
  Learned Sparse Representations", SIGIR 2024; ``pyseismic-lsr``): the query keeps its
  ``query_cut`` largest terms (ties by vocabulary id), and each term's posting list keeps
  its ``n_postings`` largest weights (the static cut: the ``n_postings``-th largest weight
  of the term's list; a list no longer than that is kept whole);
- ``threshold`` (OpenSearch neural sparse's ``max_ratio`` pruning): the query keeps the
  terms whose weight is at least ``prune_ratio`` × its largest weight;
- ``pisa`` (PISA's quantised impacts): query and item weights are rounded to integers at
  ``scale`` (``round(w · scale)``, as ``lexlens export --format anserini`` writes them).

A lost item's reason, the first that holds, each with its numbers:

1. *query terms cut*: the item's score on the kept query terms (the full stored item
   against the pruned query, as Seismic scores a candidate from its forward index) is
   below the k-th score of the exact ranking of the kept terms over the whole collection
   (or is 0): the pruned query cannot rank it in its top k;
2. *posting list pruned*: on every kept query term the item holds, its weight is below
   that term's static cut, so no posting list the engine keeps leads to it;
3. *quantised*: its integer-impact score is below the k-th integer-impact score over the
   whole collection;
4. *not decomposed*: none of the above (the engine's dynamic skipping, such as Seismic's
   block summaries and heap factor, or a tie at the cut).

Per query: accuracy@k (the share of the exact top k the run holds, Seismic's own accuracy
measure), the items lost and gained; summed per reason: the queries, the items and the
share of the lost relevant items.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from lexlens.analysis.core.options import Options, option
from lexlens.analysis.core.outputs import csv_bytes
from lexlens.analysis.systems.systems import LEXLENS, RUN
from lexlens.analysis.systems.why import Explaining
from lexlens.models.base import InputError

SEISMIC, PISA, THRESHOLD = "seismic", "pisa", "threshold"
#: The engines whose pruning is replayed.
ENGINES = (SEISMIC, PISA, THRESHOLD)
QUERY_CUT, POSTINGS, QUANTISED, UNEXPLAINED = (
    "query terms cut",
    "posting list pruned",
    "quantised",
    "not decomposed",
)
#: The reasons, in the order they are tried.
REASONS = (QUERY_CUT, POSTINGS, QUANTISED, UNEXPLAINED)
#: Which parameter each engine declares (a parameter of another engine is refused).
PARAMETERS = {
    SEISMIC: ("query_cut", "n_postings"),
    THRESHOLD: ("prune_ratio",),
    PISA: ("scale",),
}
#: engine_losses.csv's columns: one row per lost item.
LOSS_COLUMNS = (
    "run",
    "query_id",
    "item",
    "exact_rank",
    "exact_score",
    "relevant",
    "reason",
    "kth_score",
    "kept_score",
    "kept_kth_score",
    "pruned_terms",
    "impact_score",
    "impact_kth_score",
)


@dataclass(frozen=True)
class EngineOptions(Options):
    """Which engine made a run and its declared pruning (``lexlens evaluate --engine``)."""

    what = "evaluate"

    engine: str | None = option(
        None,
        "with --run and --with-exact: the engine that made the run; each item it lost from "
        "the exact top 10 gets its reason, replayed from the stored vectors",
        choices=ENGINES,
        label="Engine",
        widget="select",
    )
    query_cut: int | None = option(
        None,
        "seismic: the query's largest terms kept (its query_cut)",
        low=1,
        high=100_000,
        label="Query cut",
        widget="number",
    )
    n_postings: int | None = option(
        None,
        "seismic: the largest weights each term's posting list keeps (its n_postings)",
        low=1,
        high=1_000_000_000,
        label="Postings per term",
        widget="number",
    )
    prune_ratio: float | None = option(
        None,
        "threshold: query terms below this share of the largest weight are dropped "
        "(OpenSearch's max_ratio prune_ratio)",
        low=1e-9,
        high=1.0,
        label="Prune ratio",
        widget="number",
    )
    scale: float | None = option(
        None,
        "pisa: the factor weights were quantised with (round(w · scale))",
        low=1e-9,
        high=1e9,
        label="Impact scale",
        widget="number",
    )


def check_engine(options: EngineOptions) -> None:
    """Refuse a parameter given without an engine, or one another engine declares."""
    if not isinstance(options, EngineOptions):
        raise InputError(f"engine must be EngineOptions, not {type(options).__name__}")
    given = [n for ns in PARAMETERS.values() for n in ns if getattr(options, n) is not None]
    if options.engine is None:
        if given:
            raise InputError(f"--{given[0].replace('_', '-')} applies with --engine")
        return
    foreign = [n for n in given if n not in PARAMETERS[options.engine]]
    if foreign:
        flag = "--" + foreign[0].replace("_", "-")
        owner = next(e for e, ns in PARAMETERS.items() if foreign[0] in ns)
        raise InputError(f"{flag} is {owner}'s parameter, not {options.engine}'s")
    if options.engine == PISA and options.scale is None:
        raise InputError("--engine pisa needs --scale (the factor its impacts were quantised with)")
    if options.engine == THRESHOLD and options.prune_ratio is None:
        raise InputError("--engine threshold needs --prune-ratio")


def check_engine_systems(options: EngineOptions, systems: Sequence[Any]) -> None:
    """Refuse an engine named without a run beside its collection's exact ranking."""
    if options.engine is None:
        return
    exact = {s.index for s in systems if s.kind == LEXLENS}
    if not any(s.kind == RUN and s.index in exact for s in systems):
        raise InputError(
            f"--engine {options.engine}: give the engine's run (--run) and --with-exact, on "
            "the collection it searched"
        )


def kept_terms(vector: np.ndarray, options: EngineOptions) -> np.ndarray:
    """The query terms (vocabulary ids, ascending) the engine keeps of ``vector``."""
    terms = np.flatnonzero(vector)
    if options.engine == SEISMIC and options.query_cut is not None:
        order = np.lexsort((terms, -vector[terms]))  # largest weight first, ties by id
        return np.sort(terms[order[: options.query_cut]])
    if options.engine == THRESHOLD and terms.size:
        return terms[vector[terms] >= options.prune_ratio * vector[terms].max()]
    return terms


def _kth(scores: np.ndarray, k: int) -> float:
    """The k-th largest of ``scores`` (0 when fewer than k are above 0: all of them rank)."""
    positive = scores[scores > 0]
    if positive.size < k:
        return 0.0
    return float(np.partition(positive, positive.size - k)[positive.size - k])


class _Replay:
    """One collection's columns, static cuts and scores under one engine's pruning."""

    def __init__(self, scorer: Any, options: EngineOptions, depth: int) -> None:
        self.scorer, self.options, self.depth = scorer, options, depth
        self._cuts: dict[int, float | None] = {}

    def cut(self, term: int) -> float | None:
        """The static cut of ``term``: its n_postings-th largest weight (``None``: kept whole)."""
        if term not in self._cuts:
            n = self.options.n_postings
            weights = self.scorer.term_columns(np.array([term])).data
            self._cuts[term] = (
                None
                if n is None or weights.size <= n
                else float(np.partition(weights, weights.size - n)[weights.size - n])
            )
        return self._cuts[term]

    def kth_of(self, q: np.ndarray) -> float:
        """The k-th score of the exact ranking of ``q`` over the collection (0 when fewer
        than k items score above 0: all of them rank)."""
        _, scores = self.scorer.top(q, self.depth)
        positive = scores[scores > 0]
        return float(positive[self.depth - 1]) if positive.size >= self.depth else 0.0

    def impact_scores(self, q: np.ndarray) -> np.ndarray:
        """Every item's integer-impact score ``Σ round(S·q_t)·round(S·w_t)`` (float64)."""
        terms = np.flatnonzero(q)
        if terms.size == 0:
            return np.zeros(self.scorer.size)
        columns = self.scorer.term_columns(terms).copy()
        scale = self.options.scale
        columns.data = np.rint(columns.data * scale)
        return np.asarray(columns.T @ np.rint(q[terms].astype(np.float64) * scale)).ravel()

    def reason(self, q: np.ndarray, row: int, kth: float, state: dict) -> dict:
        """The reason ``row`` is lost for query ``q`` and its numbers (``state``: what the
        query's other lost items share, filled on first use)."""
        found: dict[str, Any] = {"kth_score": kth}
        if "kept" not in state:
            state["kept"] = kept_terms(q, self.options)
        kept = state["kept"]
        if kept.size < np.count_nonzero(q):
            if "kept_kth" not in state:
                state["pruned"] = np.zeros_like(q)
                state["pruned"][kept] = q[kept]
                state["kept_kth"] = self.kth_of(state["pruned"])
            score = self.scorer.score_of(row, state["pruned"])
            found |= {"kept_score": score, "kept_kth_score": state["kept_kth"]}
            if score <= 0 or score < state["kept_kth"]:
                return {"reason": QUERY_CUT, **found}
        if self.options.n_postings is not None:
            cols, vals = self.scorer.collection.row(row)
            held = dict(zip(np.asarray(cols).tolist(), np.asarray(vals).tolist(), strict=True))
            pruned = []
            for t in kept.tolist():
                if held.get(t, 0) > 0:
                    cut = self.cut(t)
                    pruned.append({"term": t, "weight": float(held[t]), "cut": cut})
            found["pruned_terms"] = pruned
            if pruned and all(p["cut"] is not None and p["weight"] < p["cut"] for p in pruned):
                return {"reason": POSTINGS, **found}
        if self.options.scale is not None:
            if "impacts" not in state:
                state["impacts"] = self.impact_scores(q)
                state["impact_kth"] = _kth(state["impacts"], self.depth)
            score = float(state["impacts"][row])
            found |= {"impact_score": score, "impact_kth_score": state["impact_kth"]}
            if score <= 0 or score < state["impact_kth"]:
                return {"reason": QUANTISED, **found}
        return {"reason": UNEXPLAINED, **found}


def engine_losses(
    scorer: Any,
    vectors: Mapping[str, np.ndarray],
    exact: Mapping[str, Sequence[tuple[str, float]]],
    run: Mapping[str, Sequence[tuple[str, float]]],
    row_of: Mapping[str, int],
    relevant: Mapping[str, set],
    options: EngineOptions,
    vocab: Sequence[str],
    depth: int = 10,
) -> dict:
    """Accuracy@``depth`` of ``run`` against ``exact`` (both {query: [(item, score), …]}
    best first) per query of ``vectors`` (its dense query vector), each lost item's reason
    replayed on ``scorer``'s collection (see the module docstring), and the summary per
    reason."""
    check_engine(options)
    if options.engine is None:
        raise InputError("engine: name the engine that made the run (seismic, pisa, threshold)")
    replay = _Replay(scorer, options, depth)
    rows = []
    for q, vector in vectors.items():
        top_e = [d for d, _ in exact.get(q, [])[:depth]]
        scores_e = dict(exact.get(q, [])[:depth])
        top_r = [d for d, _ in run.get(q, [])[:depth]]
        held = set(top_r)
        kth = float(scores_e[top_e[-1]]) if top_e else 0.0
        state: dict = {}
        lost = []
        for rank, d in enumerate(top_e, 1):
            if d in held:
                continue
            entry = {
                "item": d,
                "exact_rank": rank,
                "exact_score": float(scores_e[d]),
                "relevant": d in relevant.get(q, set()),
            }
            if d in row_of:
                entry |= replay.reason(np.asarray(vector), row_of[d], kth, state)
            else:
                entry |= {"reason": UNEXPLAINED, "kth_score": kth}
            for p in entry.get("pruned_terms", []):
                p["term"] = vocab[p["term"]]
            lost.append(entry)
        exact_set = set(top_e)
        rows.append(
            {
                "query_id": q,
                "accuracy": len(exact_set & held) / len(top_e) if top_e else 1.0,
                "kept_terms": int(state["kept"].size) if "kept" in state else None,
                "lost": lost,
                "gained": [d for d in top_r if d not in exact_set],
            }
        )
    notes = []
    collection = scorer.collection
    if options.engine == SEISMIC and options.n_postings is not None:
        budget = options.n_postings * collection.vocab_size
        if collection.nnz > budget:
            notes.append(
                f"Seismic's default global-threshold pruning keeps n_postings × |V| = {budget:,} "
                f"of the collection's {collection.nnz:,} postings: it also drops the smallest "
                "weights collection-wide, which this replay of each list's cut counts as not "
                "decomposed"
            )
    accuracies = [r["accuracy"] for r in rows]
    lost_relevant = sum(1 for r in rows for e in r["lost"] if e["relevant"])
    summary = []
    for reason in REASONS:
        items = [(r["query_id"], e) for r in rows for e in r["lost"] if e["reason"] == reason]
        relevant_items = sum(1 for _, e in items if e["relevant"])
        summary.append(
            {
                "reason": reason,
                "queries": len({q for q, _ in items}),
                "items": len(items),
                "relevant_items": relevant_items,
                "share_of_lost_relevant": relevant_items / lost_relevant if lost_relevant else None,
            }
        )
    return {
        "engine": options.to_dict(),
        "depth": depth,
        "queries": len(rows),
        "mean_accuracy": float(np.mean(accuracies)) if accuracies else None,
        "lost": sum(len(r["lost"]) for r in rows),
        "gained": sum(len(r["gained"]) for r in rows),
        "lost_relevant": lost_relevant,
        "reasons": summary,
        "per_query": rows,
        "notes": notes,
    }


def with_engine_losses(
    comparison: Any,
    options: EngineOptions,
    device: str | None = None,
    opened: Mapping[str, Any] | None = None,
) -> Any:
    """``comparison`` (a :class:`~lexlens.analysis.systems.result.SystemsComparison`) with
    each engine comparison's losses and reasons (:func:`engine_losses`), the queries
    encoded as the exact system encodes them; refused when no run is paired with its
    collection's exact ranking."""
    check_engine(options)
    if options.engine is None:
        return comparison
    if not comparison.engine:
        raise InputError(
            f"--engine {options.engine}: give the engine's run (--run) and --with-exact, on "
            "the collection it searched"
        )
    explaining = Explaining(device, comparison.settings["query_mode"], opened)
    systems = {s.name: s for s in comparison.systems}
    texts = {q["id"]: q["text"] for q in comparison.per_query}
    order = list(texts)
    entries = []
    for entry in comparison.engine:
        exact = systems[entry["exact"]]
        ix, scorer, _, row_of = explaining.collection(exact)
        vectors = dict(
            zip(order, explaining.vectors(exact, [texts[q] for q in order]), strict=True)
        )
        losses = engine_losses(
            scorer,
            vectors,
            comparison.runs[entry["exact"]],
            comparison.runs[entry["run"]],
            row_of,
            {q: set(j) for q, j in comparison.judged.items()},
            options,
            ix.vocab,
        )
        entries.append({**entry, "losses": losses})
    return replace(comparison, engine=entries)


def _pruned(term: Mapping) -> str:
    """A kept query term the item holds, as engine_losses.csv writes it: ``term:weight<cut``
    (its weight and the list's static cut), or ``term:weight (whole list)``."""
    held = f"{term['term']}:{term['weight']:.4g}"
    return held + (" (whole list)" if term["cut"] is None else f"<{term['cut']:.4g}")


def loss_rows(engine: Sequence[Mapping]) -> list[dict]:
    """engine_losses.csv's rows: every lost item of every engine comparison with losses."""
    out = []
    for entry in engine:
        losses = entry.get("losses")
        for row in losses["per_query"] if losses else []:
            for e in row["lost"]:
                pruned = e.get("pruned_terms")
                out.append(
                    {
                        **{c: e.get(c) for c in LOSS_COLUMNS},
                        "run": entry["run"],
                        "query_id": row["query_id"],
                        "pruned_terms": None
                        if pruned is None
                        else " ".join(_pruned(p) for p in pruned),
                    }
                )
    return out


def loss_files(engine: Sequence[Mapping]) -> dict[str, bytes]:
    """engine_losses.csv when an engine comparison has reasons, else nothing."""
    if not any(e.get("losses") for e in engine):
        return {}
    rows = loss_rows(engine)
    return {
        "engine_losses.csv": csv_bytes(LOSS_COLUMNS, [[r[c] for c in LOSS_COLUMNS] for r in rows])
    }


def loss_lines(engine: Sequence[Mapping]) -> list[str]:
    """The command's lines: per engine comparison, accuracy@k and the reasons' summary."""
    lines = []
    for entry in engine:
        losses = entry.get("losses")
        if not losses:
            continue
        k = losses["depth"]
        engine_name = losses["engine"]["engine"]
        run = entry["run"] if entry["run"] == engine_name else f"{entry['run']} ({engine_name})"
        lines.append(
            f"{run} against {entry['exact']}: "
            f"accuracy@{k} {losses['mean_accuracy']:.4f} over {losses['queries']} queries; "
            f"{losses['lost']} items lost ({losses['lost_relevant']} relevant), "
            f"{losses['gained']} gained"
        )
        for s in losses["reasons"]:
            share = s["share_of_lost_relevant"]
            lines.append(
                f"  {s['reason']:<20} {s['items']:>6} items in {s['queries']:>5} queries"
                + ("" if share is None else f", {share:.0%} of the lost relevant")
            )
        lines += [f"  note: {n}" for n in losses["notes"]]
    return lines
