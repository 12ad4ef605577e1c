"""Evaluate a stored collection on its queries and relevance judgements, and explain it.

``lexlens evaluate``: without a run, every query is encoded (the collection's own query
encoder by default) and the collection searched, exact top ``n`` for all queries in batches
(:mod:`lexlens.analysis.benchmark.retrieval`); with a run (another system's ranking, TREC
format or a mapping), that ranking is read instead, and the items it names that the
collection does not hold are counted and named. Either way the result holds:

- ``metrics``: nDCG@10, RR@10, R@1, R@5, R@10, R@100 and AP@100 through ir-measures (the
  trec_eval definitions), per query and as their mean over the same queries (the aggregate
  is always the mean of the per-query table), with each query's first relevant rank, its
  best relevant item's rank and status, and its own top terms;
- ``failures``: for every query whose first relevant item is not first, the highest-ranked
  non-relevant item and the best relevant one (its exact rank at any depth when it scores
  above 0, else *not retrieved*), both ``q ⊙ d`` decompositions and the decisive terms
  (:mod:`lexlens.analysis.benchmark.explain`);
- ``blame``: per word, how often and how much it put a non-relevant item first, and how
  often a query's top terms are missing from its relevant item.

Which queries count (each rule's queries are named in the notes):

- a query given without any judgement is left out (trec_eval evaluates judged queries only);
- a judged query that is not among the queries given is left out;
- a judged query whose judgements are all 0 or below (no relevant item) is *counted*, with 0
  in every measure: trec_eval (pytrec_eval) and ir-measures count such a query so, and
  Lexlens follows them; it has no failure to explain;
- a query whose ranking is empty (nothing retrieved, or not in the run) counts 0, as
  ir-measures (and trec_eval ``-c``) count it.

Relevance is a whole number in trec_eval's int range; 0 and below are not relevant, and a
negative relevance is clamped to a gain of 0 for the measures
(:mod:`lexlens.analysis.core.metrics`).

Order: Lexlens's rankings break ties by collection row, as search does; a run's tied items
keep the order given (the file's lines, the list, the mapping). The measures get each ranking
as shown with strictly decreasing scores and ``run.trec`` gets strictly decreasing scores,
so RR, nDCG, AP, R@k, the first relevant rank and the run file all agree on that one order
(trec_eval alone would order tied items by item id). A relevant item is *retrieved* when the
ranking holds it: for Lexlens's own ranking that means a score above 0 (an item sharing no
term with the query scores 0 and has no rank).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence, Sized
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
from lexlens.analysis.core.metrics import (
    checked_qrels,
    has_ties,
    is_relevant,
    measure,
    ranked_run,
)
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
#: Query ids named in a note (the count says how many in all).
NAMED = 10

#: Where a query's best relevant item is (``relevant_status``).
RETRIEVED = "retrieved"  # in the ranking evaluated (the top n, or the run)
BEYOND_TOP = "beyond the top"  # scores above 0 but ranks below the top n: its rank is exact
NOT_RETRIEVED = "not retrieved"  # scores 0 or less (shares no term), or the run omits it
NOT_HELD = "not in the collection"  # no relevant item of the query is in the collection
NONE_RELEVANT = "none judged relevant"  # every judgement of the query is 0 or below

#: The per-query table's columns, as per_query.csv, the page and the command name them.
PER_QUERY_COLUMNS = (
    "query_id", "query", "first_relevant_rank", *MEASURES, "relevant_rank", "relevant_status",
)  # fmt: skip
#: failures.csv's columns.
FAILURE_COLUMNS = (
    "query_id", "query", "first_relevant_rank", "nonrelevant", "relevant", "relevant_rank",
    "relevant_status", "gap", "decisive_words",
)  # fmt: skip
#: The blame table's columns, as blame.csv, the page and the command name them.
BLAME_COLUMNS = ("word", "pushed", "amount", "mismatch", "pushed_queries", "mismatch_queries")


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
    #: {query id: [(item id, score), …]} in the order evaluated: not in the JSON document
    #: (it is the run.trec file)
    run: dict = internal(default_factory=dict)

    def files(self) -> dict[str, bytes]:
        """evaluation.json, per_query.csv, failures.csv, blame.csv, the run (run.trec) and
        evaluation.html."""
        from lexlens.analysis.benchmark.trec import run_text

        failures = [
            [f.query_id, f.query, f.first_relevant_rank,
             f.nonrelevant.id if f.nonrelevant else "", f.relevant.id if f.relevant else "",
             f.relevant.rank if f.relevant else None, f.relevant_status, f.gap,
             " ".join(d["word"] for d in f.decisive)]
            for f in self.failures
        ]  # fmt: skip
        return {
            "evaluation.json": json_bytes(self),
            "per_query.csv": csv_bytes(
                PER_QUERY_COLUMNS,
                [list(per_query_row(q).values()) for q in self.metrics["per_query"]],
            ),
            "failures.csv": csv_bytes(FAILURE_COLUMNS, failures),
            "blame.csv": csv_bytes(
                BLAME_COLUMNS, [list(blame_row(b).values()) for b in self.blame]
            ),
            "run.trec": run_text(self.run, tag=f"lexlens-{self.encoder}").encode("utf-8"),
            "evaluation.html": self.html().encode("utf-8"),
        }

    def html(self, max_failures: int = 200) -> str:
        """A self-contained HTML report (Jinja2, autoescaped): metrics, the queries worst
        first, each failure side by side with its decisive words, the blame table."""
        from lexlens.analysis.render.html import meta_rows, now, num, templates

        doc = self.to_dict()
        worst = worst_first(doc["metrics"]["per_query"])
        meta = {"index": self.index.get("name") or self.index.get("path"),
                "encoder": self.encoder, **self.settings, "generated": now()}  # fmt: skip
        return templates().get_template("evaluation.html").render(
            title=f"Lexlens evaluation — {meta['index']}", meta=meta_rows(meta), r=doc,
            measures=MEASURES, worst=worst, failures=doc["failures"][:max_failures],
            hidden=max(0, len(doc["failures"]) - max_failures), num=num,
        )  # fmt: skip


def natural_key(text: str) -> tuple:
    """A sort key that orders the numbers inside ids by value: q2, q10, q102."""
    parts = re.split(r"([0-9]+)", text)
    return (
        tuple((0, int(p), "") if i % 2 else (1, 0, p.casefold()) for i, p in enumerate(parts)),
        text,
    )


def worst_first(per_query: Iterable[Mapping]) -> list[Mapping]:
    """The per-query rows by nDCG@10, lowest first; equal values by id in natural order."""
    return sorted(per_query, key=lambda q: (q["nDCG@10"], natural_key(q["id"])))


def per_query_row(q: Mapping) -> dict[str, Any]:
    """One per-query row under :data:`PER_QUERY_COLUMNS` (a rank is ``None`` when there is
    none; ``relevant_status`` says why, empty in a result kept from before it was recorded)."""
    return {
        "query_id": q["id"], "query": q["text"], "first_relevant_rank": q["first_relevant_rank"],
        **{m: q[m] for m in MEASURES}, "relevant_rank": q["relevant_rank"],
        "relevant_status": q.get("relevant_status", ""),
    }  # fmt: skip


def blame_row(b: Mapping) -> dict[str, Any]:
    """One blame row under :data:`BLAME_COLUMNS` (the queries joined by spaces)."""
    return {
        "word": b["word"], "pushed": b["pushed"], "amount": b["amount"],
        "mismatch": b["mismatch"], "pushed_queries": " ".join(b["pushed_queries"]),
        "mismatch_queries": " ".join(b["mismatch_queries"]),
    }  # fmt: skip


def _count(items: Sized, one: str, many: str) -> str:
    """``"1 query has"`` or ``"3 queries have"``."""
    return f"{len(items)} {one if len(items) == 1 else many}"


def _named(ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:NAMED])
    return shown + (f" and {len(ids) - NAMED} more" if len(ids) > NAMED else "")


def checked_queries(queries: Mapping) -> dict[str, str]:
    """Query id → text, ids as strings; a text that is not a non-empty string is refused
    naming it."""
    if not isinstance(queries, Mapping):
        raise InputError("queries: expected a mapping of query id to text")
    out: dict[str, str] = {}
    for q, text in queries.items():
        if not isinstance(text, str) or not text.strip():
            raise InputError(f"queries[{q!r}]: a query must be a non-empty text")
        out[str(q)] = text
    return out


def _check(top: int, mode: str) -> None:
    if not isinstance(top, int) or isinstance(top, bool) or top < 1:
        raise InputError("the number of items retrieved per query must be a positive integer")
    if mode not in ("parametric", "bow"):
        raise InputError(f"query mode must be 'parametric' or 'bow', not {mode!r}")


def _first_relevant(pairs: Sequence[tuple[str, float]], relevant: set[str]) -> int | None:
    return next((i + 1 for i, (d, _) in enumerate(pairs) if d in relevant), None)


def _best_relevant(
    pairs: Sequence[tuple[str, float]], relevant: set[str], row_of: Mapping[str, int],
    scorer: BatchScorer, ranking: Any, vector: np.ndarray,
) -> tuple[int | None, int] | None:  # fmt: skip
    """(rank, row) of the query's best relevant item the collection holds: the first in the
    ranking; else (Lexlens's ranking) the best exact rank of those scoring above 0; else the
    highest-scoring one (ties by row) with rank ``None`` (not retrieved). ``None`` when the
    collection holds none."""
    found = next(((i + 1, row_of[d]) for i, (d, _) in enumerate(pairs)
                  if d in relevant and d in row_of), None)  # fmt: skip
    if found is not None:
        return found
    held = sorted(row_of[d] for d in relevant if d in row_of)
    if not held:
        return None
    if ranking is not None:  # beyond the top n: the exact rank of those scoring above 0
        ranked = [(rank, row) for row in held
                  if (rank := scorer.rank_of(ranking, row, vector)[0]) is not None]  # fmt: skip
        if ranked:
            return min(ranked)
    scores = scorer.exact_many(np.array(held, np.int64), vector)
    return None, held[int(np.argmax(scores))]  # argmax: the first (lowest row) of a tie


def _status(first: int | None, best: tuple[int | None, int] | None, listed: int) -> str:
    """Where a query's relevant items are: ``first`` relevant rank in the ranking of
    ``listed`` items, or else its best relevant item the collection holds (``best``)."""
    if first is not None:
        return RETRIEVED
    if best is None:
        return NOT_HELD
    if best[0] is None:
        return NOT_RETRIEVED
    return RETRIEVED if best[0] <= listed else BEYOND_TOP


def _failure_note(status: str, best: tuple[int | None, int] | None, top: int, run: bool) -> str:
    if status == NOT_HELD:
        return "no relevant item of this query is in the collection"
    if status == BEYOND_TOP and best is not None:
        return f"its best relevant item ranks {best[0]}, beyond the top {top} evaluated"
    if status == NOT_RETRIEVED:
        if run:
            return (
                "the run does not list this relevant item: not retrieved (its q ⊙ d by the "
                "query encoder shown)"
            )
        return "its relevant items score 0 (no shared term with the query): not retrieved"
    return ""


def _failure(
    q: str, text: str, vector: np.ndarray, pairs: Sequence[tuple[str, float]],
    relevant: set[str], best: tuple[int | None, int] | None, ix: StoredIndex,
    row_of: Mapping[str, int], top: int, run: bool,
) -> Failure:  # fmt: skip
    """The failure of one query whose first relevant item is not first, explained (its
    ``relevant_status`` is the explained relevant item's)."""
    words = text_words(text)
    status = _status(None, best, len(pairs))
    nonrelevant = next(((i + 1, row_of[d]) for i, (d, _) in enumerate(pairs)
                        if d not in relevant and d in row_of), None)  # fmt: skip
    rows = [x[1] for x in (nonrelevant, best) if x]
    metas = dict(zip(rows, ix.meta(rows), strict=True))
    non_exp = rel_exp = None
    raw_n: list[dict] = []
    raw_r: list[dict] = []
    if nonrelevant is not None:
        non_exp, raw_n = explain_item(
            vector, nonrelevant[1], nonrelevant[0], False, ix, words, metas[nonrelevant[1]]
        )
    if best is not None:
        rel_exp, raw_r = explain_item(vector, best[1], best[0], True, ix, words, metas[best[1]])
    gap = decisive = None
    if non_exp is not None and rel_exp is not None:
        gap = non_exp.score - rel_exp.score
        evidence = words | item_words(metas[nonrelevant[1]]) | item_words(metas[best[1]])
        decisive = decisive_terms(raw_n, raw_r, ix.vocab, evidence)
    return Failure(
        query_id=q, query=text, first_relevant_rank=_first_relevant(pairs, relevant),
        nonrelevant=non_exp, relevant=rel_exp, gap=gap, decisive=decisive or [],
        note=_failure_note(status, best, top, run), relevant_status=status,
    )  # fmt: skip


def _mismatch(terms: list, row: int, ix: StoredIndex) -> list[str]:
    """The query's top words (``terms``) that its relevant item lacks entirely (lexical
    mismatch)."""
    cols, _ = ix.row(row)
    present = {int(c) for c in cols}
    return [t.token for t in terms if not set(t.columns) & present]


def _selection_notes(
    queries: Mapping[str, str], qrels: Mapping[str, Mapping[str, int]], order: list[str]
) -> list[str]:
    """The notes naming the queries left out, and the judged ones without a relevant item."""
    notes = []
    unjudged = [q for q in queries if not qrels.get(q)]
    if unjudged:
        notes.append(
            f"{_count(unjudged, 'query has', 'queries have')} no judgement ({_named(unjudged)}): "
            "left out of every measure (trec_eval evaluates judged queries only)"
        )
    absent = [q for q, judged in qrels.items() if judged and q not in queries]
    if absent:
        notes.append(
            f"{_count(absent, 'judged query is', 'judged queries are')} not among the queries "
            f"given ({_named(absent)}): left out of every measure"
        )
    no_relevant = [q for q in order if not any(is_relevant(r) for r in qrels[q].values())]
    if no_relevant:
        notes.append(
            f"{_count(no_relevant, 'query has', 'queries have')} judgements but no relevant item "
            f"({_named(no_relevant)}): counted with 0 in every measure, as trec_eval and "
            "ir-measures count them; nothing to explain"
        )
    negative = sum(1 for q in order for r in qrels[q].values() if r < 0)
    if negative:
        notes.append(
            f"{_count(range(negative), 'judgement is', 'judgements are')} below 0: not relevant, "
            "a gain of 0 for nDCG (as 0)"
        )
    return notes


def evaluate(
    index: str | Path | StoredIndex,
    queries: Mapping[str, str],
    qrels: Mapping[str, Mapping[str, int]],
    *,
    run: Mapping[str, Any] | None = None,
    top: int = DEFAULT_TOP,
    query_encoder: Encoder | str | None = None,
    mode: str = "parametric",
    gate_k: int = DEFAULT_GATE_K,
    device: str | None = None,
    progress: Progress | None = None,
) -> EvaluationResult:
    """Evaluate ``index`` on ``queries`` (id → text) and ``qrels`` (query id → {item id:
    relevance}); with ``run`` (query id → [(item id, score), …] or {item id: score}: ranked
    by score, ties as given), explain that ranking instead of searching. See the module
    docstring for which queries count, the tie rule and what the result holds."""
    from lexlens.analysis.search.queries import check_vocabulary, default_query_encoder

    _check(top, mode)
    queries = checked_queries(queries)
    qrels = checked_qrels(qrels)
    run = ranked_run(run) if run is not None else None
    if not queries:
        raise InputError("no queries to evaluate")
    order = [q for q in queries if qrels.get(q)]
    if not order:
        raise InputError("no query given is judged: nothing to evaluate")
    if not any(is_relevant(r) for q in order for r in qrels[q].values()):
        raise InputError("no query has a judged relevant item: nothing to evaluate")
    gate_k = check_gate_k(gate_k)
    ix = index if isinstance(index, StoredIndex) else open_index(index)
    spec = query_encoder if query_encoder is not None else default_query_encoder(ix, "text")
    encoder = as_encoder(spec, device)
    check_vocabulary(ix, encoder)
    ids = [str(i) for i in ix.column("id")]
    row_of = {item: r for r, item in enumerate(ids)}
    notes = _selection_notes(queries, qrels, order)
    vectors = encode_queries(
        encoder, [queries[q] for q in order], mode, gate_k, progress_part(progress, 0.0, 0.3)
    )
    scorer = BatchScorer(ix)
    out_run: dict[str, list[tuple[str, float]]] = {}
    failures: list[Failure] = []
    mismatches: dict[str, list[str]] = {}
    missing: dict[str, int] = {}
    ranks: dict[str, tuple[int | None, int | None, str]] = {}  # first relevant, best, status
    terms: dict[str, list] = {}  # each query's own top words
    if run is None:
        rankings = scorer.rank(vectors, top, progress_part(progress, 0.3, 1.0))
    else:
        rankings = iter([None] * len(order))
    for q, vector, ranking in zip(order, vectors, rankings, strict=True):
        relevant = {d for d, r in qrels[q].items() if is_relevant(r)}
        if ranking is not None:
            pairs = zip(ranking.rows, ranking.scores, strict=True)
            out_run[q] = [(ids[int(r)], float(s)) for r, s in pairs]
        else:
            out_run[q] = list(run.get(q, []))[:top]
            for item, _ in out_run[q]:
                if item not in row_of:
                    missing[item] = missing.get(item, 0) + 1
        terms[q] = top_terms(
            vector, ix.vocab, QUERY_TERMS, merge_pieces=True, words=text_words(queries[q])
        )
        if not relevant:
            ranks[q] = (None, None, NONE_RELEVANT)
            continue
        first = _first_relevant(out_run[q], relevant)
        best = _best_relevant(out_run[q], relevant, row_of, scorer, ranking, vector)
        status = _status(first, best, len(out_run[q]))
        ranks[q] = (first, first if first is not None else (best[0] if best else None), status)
        if first != 1:
            failures.append(_failure(q, queries[q], vector, out_run[q], relevant, best, ix,
                                     row_of, top, run is not None))  # fmt: skip
        if best is not None and (words := _mismatch(terms[q], best[1], ix)):
            mismatches[q] = words
    notes += _ranking_notes(out_run, order, run, top)
    if missing:
        shown = ", ".join(list(missing)[:5])
        notes.append(
            f"the run names {len(missing)} items the collection does not hold (e.g. {shown}): "
            "counted as retrieved by the measures, never explained"
        )
    aggregate, values = measure(out_run, {q: qrels[q] for q in order}, MEASURES)
    per_query = [
        {"id": q, "text": queries[q], **values[q], "first_relevant_rank": ranks[q][0],
         "relevant_rank": ranks[q][1], "relevant_status": ranks[q][2],
         "relevant": sum(1 for r in qrels[q].values() if is_relevant(r)),
         "top_terms": [{"word": t.token, "weight": t.weight} for t in terms[q]]}
        for q in order
    ]  # fmt: skip
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


def _ranking_notes(
    out_run: Mapping[str, list[tuple[str, float]]], order: list[str], run: Mapping | None,
    top: int,
) -> list[str]:  # fmt: skip
    """The notes on the rankings: empty ones, a run's queries not evaluated, ties."""
    notes = []
    empty = [q for q in order if not out_run[q]]
    if empty:
        why = "the run lists no item for" if run is not None else "no item shares a term with"
        notes.append(
            f"{why} {_count(empty, 'query', 'queries')} ({_named(empty)}): 0 in every measure, as "
            "ir-measures counts them"
        )
    if run is not None:
        evaluated = set(order)
        extra = [q for q in run if q not in evaluated]
        if extra:
            notes.append(
                f"the run ranks {_count(extra, 'query that is', 'queries that are')} not "
                f"evaluated ({_named(extra)}): ignored"
            )
    tied = [q for q in order if has_ties([s for _, s in out_run[q]])]
    if tied:
        rule = (
            "in the order the run gives them (trec_eval would order them by item id)"
            if run is not None
            else "by collection order, as search ranks them"
        )
        notes.append(
            f"{_count(tied, 'query has', 'queries have')} tied scores among the top {top} "
            f"({_named(tied)}): tied items are ranked {rule}; every measure and run.trec "
            "follow that order"
        )
    return notes


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
    run: str | Path | Mapping[str, Any] | None = None,
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
    result = evaluate(
        ix, queries, qrels, run=run, top=top, query_encoder=query_encoder, mode=mode,
        gate_k=gate_k, device=device, progress=progress,
    )  # fmt: skip
    if not problems.count:
        return result
    notes = [
        *result.notes,
        f"{problems.count} malformed lines skipped: " + "; ".join(problems.lines[:5]),
    ]
    return replace(result, notes=notes)
