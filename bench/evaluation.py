"""Evaluating a benchmark at scale: 1,000 text queries over a 1,000,000-item index.

The index is synthetic (about 100 non-zeros per item, Zipf-like terms, as
:mod:`bench.collections` builds them) but in splade-tiny's vocabulary, with splade-tiny as
its encoder, so real text queries run through the whole pipeline: 1,000 stdlib docstring
sentences, judged against a random item each. In one fresh child (its peak memory is its
own ``VmHWM``), side by side:

- ``lexlens evaluate``'s use case (queries encoded in batches, exact top-100 for all of
  them in batches, ir-measures, every failing query explained) against the peer a user
  would otherwise run, ``lexlens search`` one query at a time (``search_index``: encode,
  rank, explain the hits), per query;
- the retrieval alone: the batched exact top-100
  (:meth:`~lexlens.analysis.retrieval.scorer.Scorer.rank`) against one query's search
  (``Scorer.top``) and against scipy's plain CSR product (chunks of queries ×
  the transpose, each row's top 100 by ``argpartition``, no exactness check).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench.collections import write_synthetic_splade_index
from bench.run import child_run, figure

ITEMS = 1_000_000
QUERIES = 1_000
ONE_AT_A_TIME = 50  # queries run one by one (ratios are per query)


def run(items: int = ITEMS, queries: int = QUERIES) -> list[dict]:
    folder = Path(tempfile.mkdtemp(prefix="lexlens-bench-eval-"))
    started = time.perf_counter()
    try:
        write_synthetic_splade_index(folder / "ix", items)
        r = child_run(
            f"""
            import numpy as np, scipy.sparse as sp
            from bench.collections import corpus
            from lexlens.analysis.evaluation.evaluate import evaluate
            from lexlens.analysis.retrieval.queries import QuerySpec
            from lexlens.analysis.retrieval.scorer import scorer_for
            from lexlens.analysis.collections.store import open_index
            from lexlens.analysis.search.search import search_index
            from lexlens.models import load_encoder
            splade = load_encoder("splade-tiny")
            ix = open_index({str(folder / "ix")!r})
            texts = [" ".join(t.split()[:12]) for t in corpus({queries})]
            ids = [str(i) for i in ix.column("id")]
            rng = np.random.default_rng(3)
            queries = {{f"q{{n}}": t for n, t in enumerate(texts)}}
            qrels = {{q: {{ids[int(rng.integers(len(ids)))]: 1}} for q in queries}}
            search_index(ix, query=texts[0], top=100)  # warm-up: caches, first encoding
            t = time.perf_counter()
            result = evaluate(ix, queries, qrels, top=100, query_encoder=splade)
            evaluate_s = time.perf_counter() - t
            evaluate_peak_mb = _status("VmHWM") / 1024  # the model, the index, evaluate
            evaluate_anon_mb = _peak["anon"] / 1024  # what the process itself allocated
            t = time.perf_counter()
            for text in texts[:{ONE_AT_A_TIME}]:
                search_index(ix, query=text, top=100)
            search_s = time.perf_counter() - t
            vectors = QuerySpec(splade, "parametric", 768).vectors(texts)
            t = time.perf_counter()
            batched = [r.rows for r in scorer_for(ix).rank(vectors, 100)]
            batched_s = time.perf_counter() - t
            t = time.perf_counter()
            single = [scorer_for(ix).top(q, 100) for q in vectors[:{ONE_AT_A_TIME}]]
            single_s = time.perf_counter() - t
            same = sum(a.tolist() == b[0].tolist() for a, b in zip(batched, single))
            transpose = ix.rows(0, len(ix)).T.tocsr()
            t = time.perf_counter()
            for start in range(0, len(vectors), 64):
                block = (sp.csr_matrix(np.stack(vectors[start:start + 64])) @ transpose).tocsr()
                for i in range(block.shape[0]):
                    data = block.data[block.indptr[i]:block.indptr[i + 1]]
                    if data.size > 100:
                        np.argpartition(-data, 99)[:100]
            scipy_s = time.perf_counter() - t
            _done({{"evaluate_s": evaluate_s, "search_s": search_s, "batched_s": batched_s,
                    "single_s": single_s, "scipy_s": scipy_s, "same_rankings": same,
                    "compared": {ONE_AT_A_TIME}, "failures": len(result.failures),
                    "evaluate_peak_rss_mb": evaluate_peak_mb,
                    "evaluate_peak_anon_mb": evaluate_anon_mb,
                    "nnz": ix.nnz, "mean_query_terms": float(np.mean([np.count_nonzero(v) for v in vectors]))}})
            """,
            timeout=7200,
        )
        details = {"items": items, "queries": queries, **r}
        per = {
            k: r[f"{k}_s"] / (queries if k in ("evaluate", "batched", "scipy") else ONE_AT_A_TIME)
            for k in ("evaluate", "search", "batched", "single", "scipy")
        }
        details["seconds_per_query"] = per
        return [
            figure(
                "evaluation_over_search_one_query_at_a_time",
                per["search"] / per["evaluate"],
                "x",
                goal=(">=", 3.0),
                measured_with=f"lexlens evaluate's use case on {queries:,} text queries over "
                f"{items:,} items (encode, rank top 100, measure, explain every failure) vs "
                f"search_index on {ONE_AT_A_TIME} of them one at a time (encode, rank, explain "
                "the hits), per query, same process",
                details=details,
            ),
            figure(
                "evaluation_batched_retrieval_over_one_query",
                per["single"] / per["batched"],
                "x",
                goal=None,
                measured_with="the exact top-100 alone: batches of queries (one sparse product "
                "each, exact rescoring) vs search's Scorer.top one query at a time, per query "
                f"({r['same_rankings']} of {ONE_AT_A_TIME} rankings identical)",
                details=details,
            ),
            figure(
                "evaluation_batched_retrieval_over_scipy_product",
                per["scipy"] / per["batched"],
                "x",
                goal=None,
                measured_with="scipy's plain CSR product (chunks of 64 queries × the transpose, "
                "argpartition per row, no exactness check) over the batched exact top-100, per "
                "query; above 1 = Lexlens faster",
                details=details,
            ),
            figure(
                "evaluation_1000_queries_1M_items_peak_memory",
                r["evaluate_peak_anon_mb"],
                "MB",
                goal=("<", 2560.0),
                measured_with="peak anonymous memory (RssAnon, sampled every 50 ms) of the child "
                "up to the end of evaluate: splade-tiny loaded, one search, the 1,000 queries "
                "encoded, ranked, measured and every failure explained. The index's files are "
                "memory-mapped page cache, not counted here (VmHWM with them: "
                "evaluate_peak_rss_mb in the details)",
                details=details,
            ),
        ]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        print(f"bench.evaluation: {time.perf_counter() - started:.0f} s", file=sys.stderr)
