"""What each system of a comparison costs, beside what it finds: FLOPs, postings touched,
the exact scorer's latency and the index's bytes.

- **FLOPs**: the expected number of multiplications of one query–document dot product,
  from the document frequencies, as SPLADE (Formal et al., after Paria et al.) and
  Dense2Sparse define it: ``Σ_t p_q(t) · p_d(t)``, ``p_q(t)`` the share of the benchmark's
  queries (as the system encodes them) that activate term t, ``p_d(t)`` the share of the
  collection's items that do (:func:`~lexlens.analysis.deviation.flops.flops_between`);
- **postings touched**: per query, every posting of its terms' lists (``Σ_{t ∈ q} df(t)``,
  what a term-at-a-time scorer reads; MaxScore may skip some), the mean over the queries —
  ``FLOPs × items`` by the definitions;
- **latency**: the one exact scorer's (:class:`~lexlens.analysis.retrieval.scorer.Scorer`)
  mean wall time of one query's top n, over the first :data:`LATENCY_QUERIES` queries,
  after the evaluation ranked them all (its arrays are warm);
- **index bytes**: a stored index's files on disk; a view re-gated in memory at a smaller
  document gate, the bytes its vectors' files would take at that gate (the stored index's
  files with its vectors' CSR arrays replaced by the view's and no postings).

Only a system the stored index ranks has them. A run from another engine has none
(``None``): Lexlens holds neither its query vectors nor its index; nor does BM25, whose
scores come from bm25s's own index, not from the stored vectors (the collection's figures
under its name would be another system's costs).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from lexlens.analysis.collections.stored import StoredCollection, index_bytes, is_stored
from lexlens.analysis.deviation.flops import activation_counts, flops_between
from lexlens.analysis.evaluation.result import Evaluation
from lexlens.analysis.retrieval.scorer import scorer_for
from lexlens.analysis.systems.systems import LEXLENS

#: Queries whose top n is timed for a system's latency (the first ones, in order).
LATENCY_QUERIES = 200
#: The efficiency columns of the systems table, in order.
EFFICIENCY_COLUMNS = ("flops", "postings_per_query", "latency_ms", "index_bytes")


def document_frequencies(collection: StoredCollection) -> np.ndarray:
    """How many items activate each term (non-zero stored weight), int64 ``[|V|]``."""
    if is_stored(collection) and collection.postings is not None:
        return np.diff(np.asarray(collection.postings.indptr)).astype(np.int64)
    if is_stored(collection):  # a stored row holds no zero weight (the gate drops them)
        return np.bincount(collection.indices, minlength=collection.vocab_size).astype(np.int64)
    return activation_counts(collection.matrix(), collection.vocab_size)


def system_efficiency(evaluation: Evaluation, top: int) -> dict:
    """One Lexlens system's FLOPs, mean postings touched per query, mean latency (ms) of
    its exact top ``top`` per query, and its index's bytes (see the module docstring)."""
    collection, queries = evaluation.collection, evaluation.query_vectors
    if collection is None or queries is None:
        return dict.fromkeys(EFFICIENCY_COLUMNS)
    n_queries, n_items = queries.shape[0], len(collection)
    df = document_frequencies(collection)
    query_counts = activation_counts(queries, collection.vocab_size)
    flops = flops_between(query_counts, n_queries, df, n_items)
    postings = (
        float(np.dot(query_counts.astype(np.float64), df.astype(np.float64)) / n_queries)
        if n_queries
        else None
    )
    return {
        "flops": flops,
        "postings_per_query": postings,
        "latency_ms": _latency_ms(collection, queries, top),
        "index_bytes": index_bytes(collection),
    }


def _latency_ms(collection: StoredCollection, queries: object, top: int) -> float | None:
    """Mean milliseconds of the exact scorer's top ``top`` over the first queries."""
    count = min(LATENCY_QUERIES, queries.shape[0])
    if count == 0:
        return None
    scorer = scorer_for(collection)
    dense = [queries[i].toarray().ravel() for i in range(count)]
    started = time.perf_counter()
    for vector in dense:
        scorer.top(vector, top)
    return (time.perf_counter() - started) / count * 1000.0


def efficiency_of(evaluations: Sequence[tuple[str, str, Evaluation]], top: int) -> dict:
    """{system: its efficiency} for ``(name, kind, evaluation)`` triples; a run's and BM25's
    are ``None`` (their costs are not the stored index's)."""
    return {
        name: system_efficiency(evaluation, top)
        if kind == LEXLENS
        else dict.fromkeys(EFFICIENCY_COLUMNS)
        for name, kind, evaluation in evaluations
    }
