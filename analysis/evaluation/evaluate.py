"""Evaluate a stored collection on its queries and relevance judgements, and explain it.

``lexlens evaluate``: without a run, every query is encoded (the collection's own query
encoder by default) and the collection searched, exact top ``n`` for all queries in batches
(:meth:`lexlens.analysis.retrieval.scorer.Scorer.rank`); with a run (another system's ranking, TREC
format or a mapping), that ranking is read instead, and the items it names that the
collection does not hold are counted and named. Either way the result holds:

- ``metrics``: nDCG@10, RR@10, R@1, R@5, R@10, R@100 and AP@100 through ir-measures (the
  trec_eval definitions), per query and as their mean over the same queries (the aggregate
  is always the mean of the per-query table), with each query's first relevant rank, its
  best relevant item's rank and status, and its own top terms; beside them ``Judged@10``
  (ir-measures: the share of the top 10 that is judged at all, a hole in the judgements
  when low);
- ``failures``: for every query whose first relevant item is not first, the highest-ranked
  non-relevant item and the best relevant one (its exact rank at any depth when it scores
  above 0, else *not retrieved*), both ``q ⊙ d`` decompositions and the decisive terms
  (:mod:`lexlens.analysis.evaluation.explain`);
- ``blame``: per word, how often and how much it put a non-relevant item first, and how
  often a query's top terms are missing from its relevant item;
- ``cause_rates``: each cause of failure against its base rate among the successful
  queries (:mod:`lexlens.analysis.evaluation.causes`).

Which queries count (each rule's queries are named in the notes):

- a query given without any judgement is left out (trec_eval evaluates judged queries only);
- a judged query that is not among the queries given is left out;
- a judged query whose judgements are all 0 or below (no relevant item) is *counted*, with 0
  in every measure: trec_eval (pytrec_eval) and ir-measures count such a query so, and
  Lexlens follows them; it has no failure to explain;
- a query whose ranking is empty (nothing retrieved, or not in the run) counts 0, as
  ir-measures (and trec_eval ``-c``) count it.
- with ``judged_only`` every item not judged for a query is removed from its ranking before
  anything is measured or explained (the condensed-list convention: Sakai, SIGIR 2007; Sakai
  and Kando 2008): the measures are those of the condensed rankings, a failure's rival is the
  highest judged non-relevant item (none is *rival unjudged*), ``run.trec`` holds the
  condensed rankings, and the notes say how many items were removed. A relevant item beyond
  the condensed list keeps its exact rank in the full ranking (*beyond the top*). A run is
  condensed over its whole list before its top ``n`` is taken; Lexlens's own ranking is its
  top ``n`` condensed.

Each part in its module: which queries count and the notes naming the others
(:mod:`.selection`), where a query's relevant items are and its failure explained
(:mod:`.failures`), the result and its files (:mod:`.evaluation_result`); the settings are
:class:`~lexlens.analysis.evaluation.options.EvaluationOptions`.

Relevance is a whole number from −1,000 to 1,000; 0 and below are not relevant, and a
negative relevance is clamped to a gain of 0 for the measures
(:mod:`lexlens.analysis.core.metrics`).

Order: Lexlens's rankings break ties by collection row, as search does. A run's tied items
are ordered as trec_eval orders them (score read as a C float, descending, then item id
descending: :func:`~lexlens.analysis.core.metrics.trec_eval_order`), so every measure equals
trec_eval's (and ir-measures's) on the run file; with ``ties="as-listed"`` they keep the order
given (the file's lines, the list, the mapping). The notes say which rule ordered them and
how many queries had ties. The measures get each ranking as shown with strictly decreasing
scores and ``run.trec`` gets strictly decreasing scores, so RR, nDCG, AP, R@k, the first
relevant rank and the run file all agree on that one order. A relevant item is *retrieved*
when the ranking holds it: for Lexlens's own ranking that means a score above 0 (an item
sharing no term with the query scores 0 and has no rank).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from lexlens.analysis.collections.arguments import index_argument
from lexlens.analysis.collections.stored import StoredCollection
from lexlens.analysis.core.arguments import device_argument, progress_argument
from lexlens.analysis.core.metrics import (
    checked_qrels,
    is_relevant,
    is_results_frame,
    measure,
    ranked_run,
    trec_eval_order,
)
from lexlens.analysis.core.results import Progress, progress_part
from lexlens.analysis.core.truncation import Truncation, truncation_notes
from lexlens.analysis.core.words import Term, text_words, top_terms
from lexlens.analysis.datasets.trec import Problems, read_qrels, read_queries, read_run
from lexlens.analysis.evaluation.causes import (
    QueryCauses,
    blame_rates,
    cause_rates,
    query_causes,
)
from lexlens.analysis.evaluation.explain import Failure, blame
from lexlens.analysis.evaluation.failures import (
    NONE_RELEVANT,
    Explainer,
    first_relevant,
    status,
    word_variants,
)
from lexlens.analysis.evaluation.options import TIES_TREC_EVAL, EvaluationOptions
from lexlens.analysis.evaluation.result import JUDGED, MEASURES, Evaluation, cause_counts
from lexlens.analysis.evaluation.selection import (
    checked_queries,
    condensed_note,
    judged_order,
    missing_note,
    ranking_notes,
    selection_notes,
)
from lexlens.analysis.evaluation.slices import expansion_share, mean_idf, query_slices, term_idf
from lexlens.analysis.retrieval.queries import QuerySpec, query_encoder_for
from lexlens.analysis.retrieval.query_vectors import (
    PRE_ENCODED,
    QueryVectors,
    checked_vectors,
    queries_of,
    read_query_vectors,
)
from lexlens.analysis.retrieval.scorer import QueryRanking, scorer_for
from lexlens.models.base import Encoder, InputError

#: A query's own top terms shown and checked against its relevant item.
QUERY_TERMS = 10


@dataclass
class _Found:
    """What ranking and explaining every query finds."""

    run: dict[str, list[tuple[str, float]]] = field(default_factory=dict)  # as evaluated
    failures: list[Failure] = field(default_factory=list)
    mismatches: dict[str, list[str]] = field(default_factory=dict)  # top words the item lacks
    missing: dict[str, int] = field(default_factory=dict)  # a run's items not in the collection
    #: (first relevant rank, best relevant rank, status) per query
    ranks: dict[str, tuple[int | None, int | None, str]] = field(default_factory=dict)
    terms: dict[str, list[Term]] = field(default_factory=dict)  # each query's own top words
    #: every query with a relevant item: its causes as tested for the base rates
    tested: list[QueryCauses] = field(default_factory=list)
    condensed: int = 0  # unjudged items removed from the rankings (judged only)


def _ranked(
    explainer: Explainer,
    q: str,
    ranking: QueryRanking | None,
    run: Mapping | None,
    found: _Found,
    judged: Mapping[str, int] | None = None,
) -> list[tuple[str, float]]:
    """Query ``q``'s ranking as evaluated: Lexlens's top n, or the run's top n (its items
    the collection lacks counted); with ``judged`` (the query's judgements: judged only),
    condensed to the items judged — Lexlens's top n, or the run's whole list before its top
    n is taken — the items removed counted."""
    if ranking is not None:
        pairs = zip(ranking.rows, ranking.scores, strict=True)
        listed = [(explainer.ids[int(r)], float(s)) for r, s in pairs]
        return listed if judged is None else _condensed(listed, judged, found)
    listed = list(run.get(q, []))
    if judged is not None:
        listed = _condensed(listed, judged, found)
    listed = listed[: explainer.top]
    for item, _ in listed:
        if item not in explainer.row_of:
            found.missing[item] = found.missing.get(item, 0) + 1
    return listed


def _condensed(
    pairs: list[tuple[str, float]], judged: Mapping[str, int], found: _Found
) -> list[tuple[str, float]]:
    """``pairs`` without the items not judged (the condensed list), the removed counted."""
    kept = [(d, s) for d, s in pairs if d in judged]
    found.condensed += len(pairs) - len(kept)
    return kept


def _explain_all(
    explainer: Explainer,
    queries: Mapping[str, str],
    qrels: Mapping[str, Mapping[str, int]],
    order: list[str],
    vectors: list[np.ndarray],
    run: Mapping | None,
    progress: Progress | None,
    judged_only: bool = False,
) -> _Found:
    """Every query ranked (or its run read), placed and, when it fails, explained;
    ``judged_only``: each ranking condensed to its judged items first."""
    ix, found = explainer.index, _Found()
    idf = term_idf(ix)
    if run is None:
        rankings = explainer.scorer.rank(vectors, explainer.top, progress)
    else:
        rankings = iter([None] * len(order))
    for q, vector, ranking in zip(order, vectors, rankings, strict=True):
        relevant = {d for d, r in qrels[q].items() if is_relevant(r)}
        judged = qrels[q] if judged_only else None
        pairs = found.run[q] = _ranked(explainer, q, ranking, run, found, judged)
        terms = found.terms[q] = top_terms(
            vector, ix.vocab, QUERY_TERMS, merge_pieces=True, words=text_words(queries[q])
        )
        if not relevant:
            found.ranks[q] = (None, None, NONE_RELEVANT)
            continue
        first = first_relevant(pairs, relevant)
        # condensed: a relevant item listed is placed in the condensed list, not the full one
        placing = None if judged_only and first is not None else ranking
        best = explainer.best_relevant(pairs, relevant, placing, vector)
        rank = first if first is not None else (best[0] if best else None)
        found.ranks[q] = (first, rank, status(first, best, len(pairs)))
        record = explainer.failure(q, queries[q], vector, pairs, relevant, best)
        if first != 1:
            found.failures.append(record)
        meta = explainer.index.meta([best[1]])[0] if best is not None else {}
        variants = word_variants(queries[q], meta) if best is not None else []
        rival_unjudged = first != 1 and bool(pairs) and pairs[0][0] not in qrels[q]
        top_row = explainer.row_of.get(pairs[0][0]) if pairs and run is None else None
        features = {
            "expansion_share": expansion_share(ix, vector, queries[q], top_row),
            "mean_idf": mean_idf(queries[q], ix.vocab, idf),
        }
        found.tested.append(query_causes(record, first == 1, variants, rival_unjudged, features))
        if best is not None and (words := explainer.mismatch(terms, best[1])):
            found.mismatches[q] = words
    return found


def evaluate(
    index: str | Path | StoredCollection,
    queries: Mapping[str, str],
    qrels: Mapping[str, Mapping[str, int]],
    *,
    run: Mapping[str, Any] | None = None,
    query_encoder: Encoder | str | None = None,
    query_vectors: QueryVectors | None = None,
    device: str | None = None,
    progress: Progress | None = None,
    options: EvaluationOptions | None = None,
    **given: Any,
) -> Evaluation:
    """Evaluate ``index`` on ``queries`` (id → text) and ``qrels`` (query id → {item id:
    relevance}); with ``run`` (query id → [(item id, score), …] or {item id: score}, or a
    results frame with qid, docno, score: ranked by score, ties by ``options.ties``), explain
    that ranking instead of searching. The settings are
    ``options`` (:class:`EvaluationOptions`) or its fields as keywords. See the module
    docstring for which queries count, the tie rule and what the result holds. With
    ``query_vectors`` (read for this collection's vocabulary:
    :func:`~lexlens.analysis.retrieval.query_vectors.read_query_vectors`), those vectors are
    ranked instead of encoding the texts."""
    options = EvaluationOptions.of(options, **given)
    queries = checked_queries(queries)
    qrels = checked_qrels(qrels)
    run = ranked_run(run) if run is not None else None
    if run is not None and options.ties == TIES_TREC_EVAL:
        run = {q: trec_eval_order(pairs) for q, pairs in run.items()}
    device_argument(device)
    progress = progress_argument(progress)
    order = judged_order(queries, qrels)
    ix = index_argument(index)
    cuts: list[Truncation] = []
    if query_vectors is not None:  # encoded elsewhere: used as given
        encoder_name, vectors = PRE_ENCODED, checked_vectors(query_vectors, ix, order)
    else:
        encoder = query_encoder_for(ix, query_encoder, device)
        encoder_name = encoder.name
        vectors = QuerySpec(encoder, options.query_mode, options.gate_k).vectors(
            [queries[q] for q in order],
            progress_part(progress, 0.0, 0.3),
            names=order,
            cuts=cuts,
        )
    ids = [str(i) for i in ix.column("id")]
    row_of = {item: r for r, item in enumerate(ids)}
    explainer = Explainer(ix, ids, row_of, scorer_for(ix), options.top, run is not None)
    found = _explain_all(
        explainer,
        queries,
        qrels,
        order,
        vectors,
        run,
        progress_part(progress, 0.3, 1.0),
        options.judged_only,
    )
    notes = [
        *selection_notes(queries, qrels, order),
        *ranking_notes(found.run, order, run, options.top, options.ties),
        *missing_note(found.missing),
        *truncation_notes(cuts, what="queries"),
        *condensed_note(found.condensed, options.judged_only),
        *(query_vectors.notes() if query_vectors is not None else []),
    ]
    aggregate, values = measure(found.run, {q: qrels[q] for q in order}, (*MEASURES, JUDGED))
    per_query = [
        {
            "id": q,
            "text": queries[q],
            **values[q],
            "first_relevant_rank": found.ranks[q][0],
            "relevant_rank": found.ranks[q][1],
            "relevant_status": found.ranks[q][2],
            "relevant": sum(1 for r in qrels[q].values() if is_relevant(r)),
            "top_terms": [{"word": t.token, "weight": t.weight} for t in found.terms[q]],
        }
        for q in order
    ]
    settings = {
        "top": options.top,
        "query_mode": options.query_mode,
        "gate_k": options.gate_k,
        "query_encoder": encoder_name,
        "queries": len(order),
        "run": run is not None,
        "judgements": sum(len(qrels[q]) for q in order),
    }
    if run is not None:
        settings["ties"] = options.ties
    if options.judged_only:
        settings["judged_only"] = True
    missing = {"count": len(found.missing), "items": sorted(found.missing)[:100]}
    return Evaluation(
        index=ix.describe(),
        encoder=encoder_name,
        settings=settings,
        metrics={"aggregate": aggregate, "per_query": per_query},
        failures=found.failures,
        blame=blame_rates(
            [b.to_dict() for b in blame(found.failures, found.mismatches)], found.tested
        ),
        causes=cause_counts(found.failures),
        missing=None if run is None else missing,
        notes=notes,
        run=found.run,
        cause_rates=cause_rates(found.tested),
        slices=query_slices(found.tested, from_run=run is not None),
        options=options,
        collection=ix,
        query_vectors=_sparse_rows(vectors, ix.vocab_size),
    )


def _sparse_rows(vectors: list[np.ndarray], width: int) -> sp.csr_matrix:
    """Dense query vectors as one CSR matrix ``[queries × width]`` (float32), row by row."""
    columns = [np.flatnonzero(v) for v in vectors]
    indptr = np.zeros(len(vectors) + 1, np.int64)
    np.cumsum([c.size for c in columns], out=indptr[1:])
    empty = np.zeros(0, np.int64)
    indices = np.concatenate([empty, *columns]).astype(np.int32)
    data = np.concatenate(
        [np.zeros(0, np.float32), *(v[c] for v, c in zip(vectors, columns, strict=True))]
    )
    return sp.csr_matrix((data.astype(np.float32), indices, indptr), shape=(len(vectors), width))


def _source(value: object, name: str) -> None:
    """Refuse an argument that is neither a file's path, a mapping nor ``None`` (a run may
    also be a results frame, PyTerrier's)."""
    if name == "run" and is_results_frame(value):
        return
    if value is not None and not isinstance(value, (str, Path, Mapping)):
        raise InputError(
            f"{name} must be a file's path or a mapping (or None), not {type(value).__name__}"
        )


def _query_vectors(
    given: object, ix: StoredCollection, query_encoder: object, run: object
) -> QueryVectors | None:
    """The query vectors given (a file read for ``ix``'s vocabulary), refused beside a
    query encoder or a run, which they would replace."""
    if given is None:
        return None
    if query_encoder is not None:
        raise InputError("--query-vectors are ranked instead of encoding: give no --query-encoder")
    if run is not None:
        raise InputError("--query-vectors rank the collection itself: give no --run")
    return given if isinstance(given, QueryVectors) else read_query_vectors(given, ix.vocab)


def evaluate_benchmark(
    index: str | Path | StoredCollection,
    *,
    queries: str | Path | Mapping[str, str] | None = None,
    qrels: str | Path | Mapping[str, Mapping[str, int]] | None = None,
    run: str | Path | Mapping[str, Any] | None = None,
    query_encoder: Encoder | str | None = None,
    query_vectors: str | Path | QueryVectors | None = None,
    device: str | None = None,
    progress: Progress | None = None,
    options: EvaluationOptions | None = None,
    **given: Any,
) -> Evaluation:
    """:func:`evaluate` with files: the queries (BEIR jsonl or a TSV), the judgements (TREC
    or BEIR qrels) and a TREC run, or the queries and judgements the collection keeps. Every
    malformed line is listed in the notes; the readable ones are used. ``query_vectors`` (a
    file of queries encoded elsewhere, refused at its first malformed line) are ranked
    instead of encoding: the queries are those it holds, with their texts from the queries
    when they are there."""

    options = EvaluationOptions.of(options, **given)
    for value, name in ((queries, "queries"), (qrels, "qrels"), (run, "run")):
        _source(value, name)
    ix = index_argument(index)
    vectors = _query_vectors(query_vectors, ix, query_encoder, run)
    stored = ix.benchmark_files
    if vectors is not None and queries is None and stored is None:
        queries = queries_of(vectors, None)
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
    if is_results_frame(run):
        run = ranked_run(run)
    if run is not None and not isinstance(run, Mapping):
        run = read_run(run, problems)
    if vectors is not None:
        queries = queries_of(vectors, dict(queries))
    result = evaluate(
        ix,
        queries,
        qrels,
        run=run,
        query_encoder=query_encoder,
        query_vectors=vectors,
        device=device,
        progress=progress,
        options=options,
    )
    if not problems.count:
        return result
    notes = [
        *result.notes,
        f"{problems.count} malformed lines skipped: " + "; ".join(problems.lines[:5]),
    ]
    return replace(result, notes=notes)
