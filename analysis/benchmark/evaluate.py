"""Evaluate a stored collection on its queries and relevance judgements, and explain it.

``lexlens evaluate``: without a run, every query is encoded (the collection's own query
encoder by default) and the collection searched, exact top ``n`` for all queries in batches
(:mod:`lexlens.analysis.benchmark.retrieval`); with a run (another system's ranking, TREC
format), that ranking is read instead, and the items it names that the collection does not
hold are counted and named. Either way the result holds:

- ``metrics``: nDCG@10, RR@10, R@1, R@5, R@10, R@100 and AP@100 through ir-measures (the
  trec_eval definitions), over all queries and per query, with each query's first relevant
  rank and its own top terms;
- ``failures``: for every query whose first relevant item is not first, the highest-ranked
  non-relevant item and the highest-ranked relevant one (its exact rank at any depth when
  the collection holds it), both ``q ⊙ d`` decompositions and the decisive terms
  (:mod:`lexlens.analysis.benchmark.explain`);
- ``blame``: per word, how often and how much it put a non-relevant item first, and how
  often a query's top terms are missing from its relevant item.

Queries with no judged relevant item are left out of the measures (trec_eval's convention)
and listed in the notes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from lexlens.analysis.benchmark.explain import (
    Failure,
    blame,
    decisive_terms,
    explain_item,
)
from lexlens.analysis.benchmark.retrieval import BatchScorer, encode_queries
from lexlens.analysis.collections.store import StoredIndex, open_index
from lexlens.analysis.core.gating import DEFAULT_GATE_K, check_gate_k
from lexlens.analysis.core.outputs import csv_bytes, json_bytes
from lexlens.analysis.core.results import Progress, Result, internal, progress_part
from lexlens.analysis.core.words import item_words, text_words, top_terms
from lexlens.models.base import Encoder, InputError
from lexlens.models.registry import as_encoder

#: The measures every evaluation reports (ir-measures names).
MEASURES = ("nDCG@10", "RR@10", "R@1", "R@5", "R@10", "R@100", "AP@100")
#: Items retrieved per query by default (R@100 and AP@100 need 100).
DEFAULT_TOP = 100
#: A query's own top terms shown and checked against its relevant item.
QUERY_TERMS = 10


@dataclass(frozen=True)
class EvaluationResult(Result):
    """Metrics, failures and blame of one evaluation (see the module docstring)."""

    file_stem = "evaluation"

    index: dict
    encoder: str
    settings: dict
    metrics: dict  # {"aggregate": {measure: mean}, "per_query": [...]}
    failures: list[Failure]
    blame: list[dict]
    missing: dict | None = None  # items a run names that the collection does not hold
    notes: list[str] = field(default_factory=list)
    #: {query id: [(item id, score), …]}: not in the JSON document (it is the run.trec file)
    run: dict = internal(default_factory=dict)

    def files(self) -> dict[str, bytes]:
        """evaluation.json, per_query.csv, failures.csv, blame.csv, the run (run.trec) and
        evaluation.html."""
        from lexlens.analysis.benchmark.trec import run_text

        per_query = self.metrics["per_query"]
        failures = [
            [f.query_id, f.query, f.first_relevant_rank,
             f.nonrelevant.id if f.nonrelevant else "", f.relevant.id if f.relevant else "",
             f.relevant.rank if f.relevant else "", f.gap,
             " ".join(d["word"] for d in f.decisive)]
            for f in self.failures
        ]  # fmt: skip
        return {
            "evaluation.json": json_bytes(self),
            "per_query.csv": csv_bytes(
                ["query_id", "query", "first_relevant_rank", *MEASURES],
                [
                    [q["id"], q["text"], q["first_relevant_rank"], *(q[m] for m in MEASURES)]
                    for q in per_query
                ],
            ),
            "failures.csv": csv_bytes(
                [
                    "query_id",
                    "query",
                    "first_relevant_rank",
                    "nonrelevant",
                    "relevant",
                    "relevant_rank",
                    "gap",
                    "decisive_words",
                ],
                failures,
            ),  # fmt: skip
            "blame.csv": csv_bytes(
                ["word", "pushed", "amount", "mismatch", "pushed_queries", "mismatch_queries"],
                [
                    [
                        b["word"],
                        b["pushed"],
                        b["amount"],
                        b["mismatch"],
                        " ".join(b["pushed_queries"]),
                        " ".join(b["mismatch_queries"]),
                    ]
                    for b in self.blame
                ],
            ),  # fmt: skip
            "run.trec": run_text(self.run, tag=f"lexlens-{self.encoder}").encode("utf-8"),
            "evaluation.html": self.html().encode("utf-8"),
        }

    def html(self, max_failures: int = 200) -> str:
        """A self-contained HTML report (Jinja2, autoescaped): metrics, the queries worst
        first, each failure side by side with its decisive words, the blame table."""
        from lexlens.analysis.render.html import meta_rows, now, num, templates

        doc = self.to_dict()
        worst = sorted(doc["metrics"]["per_query"], key=lambda q: (q["nDCG@10"], q["id"]))
        meta = {"index": self.index.get("name") or self.index.get("path"),
                "encoder": self.encoder, **self.settings, "generated": now()}  # fmt: skip
        return templates().get_template("evaluation.html").render(
            title=f"Lexlens evaluation — {meta['index']}", meta=meta_rows(meta), r=doc,
            measures=MEASURES, worst=worst, failures=doc["failures"][:max_failures],
            hidden=max(0, len(doc["failures"]) - max_failures), num=num,
        )  # fmt: skip


def ir_measures_of(run: Mapping[str, list[tuple[str, float]]], qrels: Mapping) -> tuple:
    """Aggregate and per-query values of :data:`MEASURES` (ir-measures) for a run."""
    import ir_measures

    measures = [ir_measures.parse_measure(m) for m in MEASURES]
    names = {str(m): name for m, name in zip(measures, MEASURES, strict=True)}
    judged = {q: {d: int(r) for d, r in rel.items()} for q, rel in qrels.items() if rel}
    scored = {q: {d: float(s) for d, s in pairs} for q, pairs in run.items() if pairs}
    per_query: dict[str, dict[str, float]] = {q: dict.fromkeys(MEASURES, 0.0) for q in judged}
    for value in ir_measures.iter_calc(measures, judged, scored):
        per_query[value.query_id][names[str(value.measure)]] = float(value.value)
    n = max(1, len(per_query))
    aggregate = {m: float(sum(v[m] for v in per_query.values()) / n) for m in MEASURES}
    return aggregate, per_query


def _check(queries: Mapping, qrels: Mapping, top: int, mode: str) -> None:
    if not isinstance(top, int) or isinstance(top, bool) or top < 1:
        raise InputError("the number of items retrieved per query must be a positive integer")
    if mode not in ("parametric", "bow"):
        raise InputError(f"query mode must be 'parametric' or 'bow', not {mode!r}")
    if not queries:
        raise InputError("no queries to evaluate")
    if not any(qrels.get(q) for q in queries):
        raise InputError("no query has a judged relevant item: nothing to evaluate")


def _first_relevant(pairs: list[tuple[str, float]], relevant: set[str]) -> int | None:
    return next((i + 1 for i, (d, _) in enumerate(pairs) if d in relevant), None)


def _failure(
    q: str, text: str, vector: np.ndarray, pairs: list[tuple[str, float]], relevant: set[str],
    ix: StoredIndex, row_of: Mapping[str, int], scorer: BatchScorer, ranking: Any,
) -> tuple[Failure | None, tuple[int, int] | None]:  # fmt: skip
    """The failure of one query (``None`` when its first item is relevant) and the (rank,
    row) of its best-ranked relevant item that the collection holds (``None`` if none)."""
    words = text_words(text)
    first = _first_relevant(pairs, relevant)
    best = next(((i + 1, row_of[d]) for i, (d, _) in enumerate(pairs)
                 if d in relevant and d in row_of), None)  # fmt: skip
    held = [row_of[d] for d in relevant if d in row_of]
    if best is None and held and ranking is not None:  # beyond the top n: its exact rank
        best = min((scorer.rank_of(ranking, r, vector)[0], r) for r in held)
    if first == 1:
        return None, best
    top = next(((i + 1, row_of[d]) for i, (d, _) in enumerate(pairs)
                if d not in relevant and d in row_of), None)  # fmt: skip
    note = "" if held else "no relevant item of this query is in the collection"
    non_exp = rel_exp = None
    raw_n: list[dict] = []
    raw_r: list[dict] = []
    metas = {r: m for r, m in zip(
        [x[1] for x in (top, best) if x], ix.meta([x[1] for x in (top, best) if x]), strict=True
    )}  # fmt: skip
    if top is not None:
        non_exp, raw_n = explain_item(vector, top[1], top[0], False, ix, words, metas[top[1]])
    if best is not None:
        rel_exp, raw_r = explain_item(vector, best[1], best[0], True, ix, words, metas[best[1]])
    gap = decisive = None
    if non_exp is not None and rel_exp is not None:
        gap = non_exp.score - rel_exp.score
        evidence = words | item_words(metas[top[1]]) | item_words(metas[best[1]])
        decisive = decisive_terms(raw_n, raw_r, ix.vocab, evidence)
    failure = Failure(
        query_id=q, query=text, first_relevant_rank=first, nonrelevant=non_exp,
        relevant=rel_exp, gap=gap, decisive=decisive or [], note=note,
    )  # fmt: skip
    return failure, best


def _mismatch(terms: list, row: int, ix: StoredIndex) -> list[str]:
    """The query's top words (``terms``) that its relevant item lacks entirely (lexical
    mismatch)."""
    cols, _ = ix.row(row)
    present = {int(c) for c in cols}
    return [t.token for t in terms if not set(t.columns) & present]


def evaluate(
    index: str | Path | StoredIndex,
    queries: Mapping[str, str],
    qrels: Mapping[str, Mapping[str, int]],
    *,
    run: Mapping[str, list[tuple[str, float]]] | None = None,
    top: int = DEFAULT_TOP,
    query_encoder: Encoder | str | None = None,
    mode: str = "parametric",
    gate_k: int = DEFAULT_GATE_K,
    device: str | None = None,
    progress: Progress | None = None,
) -> EvaluationResult:
    """Evaluate ``index`` on ``queries`` (id → text) and ``qrels`` (query id → {item id:
    relevance}); with ``run`` (query id → [(item id, score), …] best first), explain that
    ranking instead of searching. See the module docstring for what the result holds."""
    from lexlens.analysis.search.queries import check_vocabulary, default_query_encoder

    _check(queries, qrels, top, mode)
    gate_k = check_gate_k(gate_k)
    ix = index if isinstance(index, StoredIndex) else open_index(index)
    spec = query_encoder if query_encoder is not None else default_query_encoder(ix, "text")
    encoder = as_encoder(spec, device)
    check_vocabulary(ix, encoder)
    ids = [str(i) for i in ix.column("id")]
    row_of = {item: r for r, item in enumerate(ids)}
    order = [q for q in queries if qrels.get(q)]
    notes = []
    if len(order) < len(queries):
        notes.append(f"{len(queries) - len(order)} queries have no judged relevant item: left out")
    vectors = encode_queries(
        encoder, [queries[q] for q in order], mode, gate_k, progress_part(progress, 0.0, 0.3)
    )
    scorer = BatchScorer(ix)
    out_run: dict[str, list[tuple[str, float]]] = {}
    failures: list[Failure] = []
    mismatches: dict[str, list[str]] = {}
    missing: dict[str, int] = {}
    ranks: dict[str, tuple[int | None, int | None]] = {}  # first relevant in the run; at any depth
    terms: dict[str, list] = {}  # each query's own top words
    if run is None:
        rankings = scorer.rank(vectors, top, progress_part(progress, 0.3, 1.0))
    else:
        rankings = iter([None] * len(order))
    for q, vector, ranking in zip(order, vectors, rankings, strict=True):
        relevant = {d for d, r in qrels[q].items() if r > 0}
        if ranking is not None:
            pairs = zip(ranking.rows, ranking.scores, strict=True)
            out_run[q] = [(ids[int(r)], float(s)) for r, s in pairs]
        else:
            out_run[q] = [(str(i), float(s)) for i, s in list(run.get(q, []))[:top]]
            for item, _ in out_run[q]:
                if item not in row_of:
                    missing[item] = missing.get(item, 0) + 1
        failure, best = _failure(
            q, queries[q], vector, out_run[q], relevant, ix, row_of, scorer, ranking
        )
        if failure is not None:
            failures.append(failure)
        ranks[q] = (_first_relevant(out_run[q], relevant), best[0] if best else None)
        terms[q] = top_terms(
            vector, ix.vocab, QUERY_TERMS, merge_pieces=True, words=text_words(queries[q])
        )
        if best is not None and (words := _mismatch(terms[q], best[1], ix)):
            mismatches[q] = words
    if missing:
        shown = ", ".join(list(missing)[:5])
        notes.append(
            f"the run names {len(missing)} items the collection does not hold (e.g. {shown}): "
            "counted as retrieved by the measures, never explained"
        )
    aggregate, values = ir_measures_of(out_run, qrels)
    per_query = []
    for q in order:
        per_query.append(
            {"id": q, "text": queries[q], **values.get(q, dict.fromkeys(MEASURES, 0.0)),
             "first_relevant_rank": ranks[q][0], "relevant_rank": ranks[q][1],
             "relevant": sum(1 for r in qrels[q].values() if r > 0),
             "top_terms": [{"word": t.token, "weight": t.weight} for t in terms[q]]}
        )  # fmt: skip
    settings = {
        "top": top, "query_mode": mode, "topk": gate_k, "query_encoder": encoder.name,
        "queries": len(order), "run": run is not None,
    }  # fmt: skip
    return EvaluationResult(
        index=ix.describe(), encoder=encoder.name, settings=settings,
        metrics={"aggregate": aggregate, "per_query": per_query}, failures=failures,
        blame=[b.to_dict() for b in blame(failures, mismatches)],
        missing=None if run is None else {"count": len(missing), "items": sorted(missing)[:100]},
        notes=notes, run=out_run,
    )  # fmt: skip


def stored_benchmark(index: StoredIndex) -> tuple[Path, Path] | None:
    """The queries and judgements a collection keeps beside its items (built from a
    benchmark source), or ``None``."""
    queries, qrels = index.path / "queries.jsonl", index.path / "qrels.tsv"
    return (queries, qrels) if queries.is_file() and qrels.is_file() else None


def evaluate_benchmark(
    index: str | Path | StoredIndex,
    *,
    queries: str | Path | Mapping[str, str] | None = None,
    qrels: str | Path | Mapping[str, Mapping[str, int]] | None = None,
    run: str | Path | Mapping[str, list[tuple[str, float]]] | None = None,
    top: int = DEFAULT_TOP,
    query_encoder: Encoder | str | None = None,
    mode: str = "parametric",
    gate_k: int = DEFAULT_GATE_K,
    device: str | None = None,
    progress: Progress | None = None,
) -> EvaluationResult:
    """:func:`evaluate` with files: the queries (BEIR jsonl or a TSV), the judgements (TREC
    or BEIR qrels) and a TREC run, or the queries and judgements the collection keeps. Every
    malformed line is listed in the notes; the readable ones are used."""
    from lexlens.analysis.benchmark.trec import Problems, read_qrels, read_queries, read_run

    ix = index if isinstance(index, StoredIndex) else open_index(index)
    stored = stored_benchmark(ix)
    if (queries is None or qrels is None) and stored is None:
        raise InputError(
            f"{ix.label} keeps no queries and judgements: give --queries and --qrels "
            "(or index a benchmark: a BEIR folder, MS MARCO files, a Karpathy split)"
        )
    problems = Problems()
    if not isinstance(queries, Mapping):
        queries = read_queries(queries if queries is not None else stored[0], problems)
    if not isinstance(qrels, Mapping):
        qrels = read_qrels(qrels if qrels is not None else stored[1], problems)
    if run is not None and not isinstance(run, Mapping):
        run = read_run(run, problems)
    unknown = [q for q in qrels if q not in queries]
    result = evaluate(
        ix, queries, qrels, run=run, top=top, query_encoder=query_encoder, mode=mode,
        gate_k=gate_k, device=device, progress=progress,
    )  # fmt: skip
    notes = list(result.notes)
    if unknown:
        notes.append(
            f"{len(unknown)} judged query ids are not among the queries (e.g. "
            f"{', '.join(unknown[:3])}): left out"
        )
    if problems.count:
        notes.append(f"{problems.count} malformed lines skipped: " + "; ".join(problems.lines[:5]))
    return replace(result, notes=notes)
