"""Peers measured beside Lexlens's retrieval in ``make bench`` (same run, one thread each).

- scipy's inverted CSC product: the collection as one in-memory ``csc_matrix`` [items ×
  |V|] (float32 weights, int32 ids), a query as a sparse column: ``X @ q`` touches only
  the query terms' columns, then ``argpartition`` over the items it scored.
- PISA (block-max WAND over an impact-quantised index, ×100 as pyterrier-pisa's
  ``toks_indexer`` does) through pyterrier-pisa (``pip install "lexlens[bench]"``). Its index
  is written here from the stored postings in PISA's binary collection format (the files
  pyterrier-pisa's own indexer writes; its Python loop over a million documents would take
  the bench's whole budget), then compressed by PISA at its first query.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from bench.run import child_run, figure

#: PISA's impact quantisation of pyterrier-pisa's toks indexer: int(weight × 100).
PISA_SCALE = 100.0


def term_name(t: int) -> str:
    """A vocabulary id as a PISA term (zero-padded: sorted names are sorted ids)."""
    return f"t{t:05d}"


def write_pisa_index(index, folder: Path) -> int:
    """PISA's binary collection of a stored index's postings, its lexicons and
    pyterrier-pisa's metadata; returns the number of terms written."""
    from pyterrier_pisa import _pisathon

    folder.mkdir(parents=True, exist_ok=True)
    postings = index.postings
    p_indptr, p_weights = np.asarray(postings.indptr), np.asarray(postings.weights)
    scale = float(postings.scale)
    n = len(index)
    terms = []
    sizes = np.zeros(n, np.int64)
    with open(folder / "inv.docs", "wb") as docs, open(folder / "inv.freqs", "wb") as freqs:
        docs.write(np.array([1, n], np.uint32).tobytes())
        for t in range(p_indptr.size - 1):
            a, b = int(p_indptr[t]), int(p_indptr[t + 1])
            impact = (p_weights[a:b].astype(np.float64) * scale * PISA_SCALE).astype(np.int64)
            keep = impact > 0
            items = postings.term_rows(t)[keep]
            if not items.size:
                continue
            terms.append(t)
            np.add.at(sizes, items, impact[keep])
            docs.write(np.r_[items.size, items].astype(np.uint32).tobytes())
            freqs.write(np.r_[items.size, impact[keep]].astype(np.uint32).tobytes())
    (folder / "inv.sizes").write_bytes(np.r_[n, sizes].astype(np.uint32).tobytes())
    (folder / "fwd.documents").write_text("".join(f"{i}\n" for i in range(n)))
    (folder / "fwd.terms").write_text("".join(term_name(t) + "\n" for t in terms))
    _pisathon.build_binlex(str(folder / "fwd.documents"), str(folder / "fwd.doclex"))
    _pisathon.build_binlex(str(folder / "fwd.terms"), str(folder / "fwd.termlex"))
    meta = {
        "type": "sparse_index",
        "format": "pisa",
        "package_hint": "pyterrier-pisa",
        "stemmer": "none",
    }
    (folder / "pt_meta.json").write_text(json.dumps(meta))
    return len(terms)


def pisa_queries(vectors: list[np.ndarray]):
    """Queries as pyterrier-pisa's ``query_toks`` frame (weights scaled ×100 by it)."""
    import pandas as pd

    rows = []
    for i, q in enumerate(vectors):
        terms = np.flatnonzero(q)
        rows.append({"qid": str(i), "query_toks": {term_name(int(t)): float(q[t]) for t in terms}})
    return pd.DataFrame(rows)


def csc_top(csc, q: np.ndarray, n: int) -> np.ndarray:
    """scipy's inverted product for one query: the rows of its top ``n`` (ties by row)."""
    import scipy.sparse as sp

    column = sp.csc_matrix(q.reshape(-1, 1))
    scored = (csc @ column).tocoo()
    rows, scores = scored.row, scored.data
    keep = min(n, scores.size)
    if keep == 0:
        return rows[:0]
    top = np.argpartition(-scores, keep - 1)[:keep]
    return rows[top[np.lexsort((rows[top], -scores[top]))]]


def csc_exact_top(csc, q: np.ndarray, n: int) -> np.ndarray:
    """The exact top ``n`` rows by a float64 product over the query terms' CSC columns (ties
    by row, items sharing a term only): the reference the rankings are checked against."""
    terms = np.flatnonzero(q)
    part = csc[:, terms].tocoo()
    weights = part.data.astype(np.float64) * q[terms][part.col].astype(np.float64)
    rows = np.unique(part.row)
    scores = np.bincount(part.row, weights=weights, minlength=csc.shape[0])[rows]
    return rows[np.lexsort((rows, -scores))[:n]]


def csc_batch_top(csc, vectors: list[np.ndarray], n: int, chunk: int = 64) -> list[np.ndarray]:
    """The inverted product for a batch of queries: ``X @ Q_chunkᵀ`` (sparse), then each
    query's column partitioned."""
    import scipy.sparse as sp

    out = []
    for start in range(0, len(vectors), chunk):
        block = sp.csr_matrix(np.stack(vectors[start : start + chunk])).T.tocsc()
        scored = (csc @ block).tocsc()
        for j in range(scored.shape[1]):
            a, b = scored.indptr[j], scored.indptr[j + 1]
            rows, scores = scored.indices[a:b], scored.data[a:b]
            keep = min(n, scores.size)
            top = np.argpartition(-scores, keep - 1)[:keep] if keep else rows[:0]
            out.append(rows[top[np.lexsort((rows[top], -scores[top]))]])
    return out


# ------------------------------------------------------------ retrieval beside its peers
#: Items of the collection the retrieval figures run on, and the queries.
PEER_ITEMS = 1_000_000
PEER_QUERIES = 1000
SINGLE_QUERIES = 50
#: Queries whose batched top 100 is checked against the exact CSC reference.
CHECKED_QUERIES = 100


def _peer_inputs(folder: Path) -> tuple[Path, Path]:
    """The 1,000,000-item synthetic index (``LEXLENS_BENCH_INDEX_1M`` names one built
    already) and 1,000 splade-tiny queries (gated, k = 768): the first 8 words of stdlib
    docstring paragraphs not in the index's texts."""
    given = os.environ.get("LEXLENS_BENCH_INDEX_1M")
    index = Path(given) if given else folder / "s1M"
    if not given:
        child_run(
            f"""
            from bench.collections import synthetic_rows, _vocab
            from lexlens.analysis.collections.store_writer import write_index
            write_index({str(index)!r}, _vocab(), synthetic_rows({PEER_ITEMS}),
                        encoder={{"name": "synthetic"}})
            _done({{}})
            """
        )
    queries = folder / "queries.npz"
    child_run(
        f"""
        import numpy as np
        from bench.collections import corpus
        from lexlens.models import load_encoder
        from lexlens.analysis.retrieval.queries import QuerySpec
        texts = [" ".join(t.split()[:8]) for t in corpus(3000 + {PEER_QUERIES})[3000:]]
        enc = load_encoder("splade-tiny", device="cpu")
        import scipy.sparse as sp
        vectors = QuerySpec(enc, "parametric", 768).vectors(texts)
        sp.save_npz({str(queries)!r}, sp.csr_matrix(np.stack(vectors)))
        _done({{}})
        """
    )
    return index, queries


def median_ms(fn: Callable, queries: Sequence) -> tuple[float, float]:
    """The median CPU and wall milliseconds of ``fn`` on each query, after the first three
    (warm-up) — the one timer of every retrieval child (peers and bench-scale)."""
    for q in queries[:3]:
        fn(q)
    wall, cpu = [], []
    for q in queries[3:]:
        t, c = time.perf_counter(), time.process_time()
        fn(q)
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return 1000 * float(np.median(cpu)), 1000 * float(np.median(wall))


def _child_setup(index: Path, queries: Path) -> str:
    """The code every retrieval child starts with (run with ``one_thread``): the queries,
    timers, the index opened (its RSS read before)."""
    return f"""
            import numpy as np, scipy.sparse as sp
            from bench.peers import median_ms
            from lexlens.analysis.collections.store import open_index
            Q = sp.load_npz({str(queries)!r})
            def dense(rows):
                return [np.asarray(Q[i].todense()).ravel() for i in rows]
            def per_query_ms(fn, vectors):
                t, c = time.perf_counter(), time.process_time()
                fn(vectors)
                wall, cpu = time.perf_counter() - t, time.process_time() - c
                return 1000 * cpu / len(vectors), 1000 * wall / len(vectors)
            base_rss_mb = _status("VmRSS") / 1024
            ix = open_index({str(index)!r})
        """


def retrieval_beside_peers() -> list[dict]:
    """One query and 1,000 batched queries over 1,000,000 items: Lexlens against scipy's
    inverted CSC product and PISA, each in its own fresh process, one thread each."""
    folder = Path(tempfile.mkdtemp(prefix="lexlens-bench-peers-"))
    try:
        index, queries = _peer_inputs(folder)
        setup = _child_setup(index, queries)
        single = child_run(
            setup
            + f"""
            from lexlens.analysis.retrieval.scorer import scorer_for
            top = scorer_for(ix).top
            vectors = dense(range({SINGLE_QUERIES} + 3))
            ms, wall = median_ms(lambda q: top(q, 10), vectors)
            tops = [top(q, 10)[0].tolist() for q in vectors[:{SINGLE_QUERIES}]]
            peak_mb = _status("VmHWM") / 1024  # before the 1,000 queries below
            every = dense(range(Q.shape[0]))
            cpu, _ = per_query_ms(lambda v: [top(q, 100) for q in v], every)
            _done({{"median_ms": ms, "median_wall_ms": wall, "tops": tops,
                    "base_rss_mb": base_rss_mb, "single_peak_mb": peak_mb,
                    "one_at_a_time_top100_ms": cpu}})
            """,
            one_thread=True,
        )
        batched = child_run(
            setup
            + """
            from lexlens.analysis.retrieval.scorer import scorer_for
            vectors = dense(range(Q.shape[0]))
            scorer = scorer_for(ix)
            list(scorer.rank(vectors[:64], 100))
            found = []
            cpu, wall = per_query_ms(lambda v: found.extend(scorer.rank(v, 100)), vectors)
            tops = [r.rows.tolist() for r in found[:CHECKED_QUERIES]]
            _done({"ms_per_query": cpu, "wall_ms_per_query": wall, "nnz": ix.nnz,
                   "tops100": tops})
            """.replace("CHECKED_QUERIES", str(CHECKED_QUERIES)),
            one_thread=True,
        )
        csc = child_run(
            setup
            + f"""
            from bench.peers import csc_top, csc_batch_top, csc_exact_top
            X = ix.rows(0, len(ix)).tocsc()
            X.sort_indices()
            nbytes = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
            vectors = dense(range(Q.shape[0]))
            ms, wall = median_ms(lambda q: csc_top(X, q, 10), vectors[:{SINGLE_QUERIES} + 3])
            tops = [csc_top(X, q, 10).tolist() for q in vectors[:{SINGLE_QUERIES}]]
            csc_batch_top(X, vectors[:64], 100)
            cpu, batch_wall = per_query_ms(lambda v: csc_batch_top(X, v, 100), vectors)
            exact = [csc_exact_top(X, q, 100).tolist() for q in vectors[:{CHECKED_QUERIES}]]
            _done({{"median_ms": ms, "median_wall_ms": wall, "bytes": nbytes,
                    "ms_per_query": cpu, "wall_ms_per_query": batch_wall, "tops": tops,
                    "exact_tops100": exact}})
            """,
            one_thread=True,
        )
        pisa = _pisa(index, queries, folder)
        return _retrieval_figures(single, batched, csc, pisa)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _pisa(index: Path, queries: Path, folder: Path) -> dict:
    """PISA's batched time per query, or why it could not run here."""
    try:
        import pyterrier_pisa  # noqa: F401
    except Exception as exc:  # noqa: BLE001 (missing, or its own imports failing)
        return {
            "error": f"pyterrier-pisa not importable ({type(exc).__name__}: {exc}); "
            'pip install "lexlens[bench]"'
        }
    return child_run(
        f"""
        import numpy as np
        from pathlib import Path
        import pyterrier_pisa
        from bench.peers import write_pisa_index, pisa_queries
        from lexlens.analysis.collections.store import open_index
        terms = write_pisa_index(open_index({str(index)!r}), Path({str(folder / "pisa")!r}))
        import scipy.sparse as sp
        Q = sp.load_npz({str(queries)!r})
        frame = pisa_queries([np.asarray(Q[i].todense()).ravel() for i in range(Q.shape[0])])
        pisa = pyterrier_pisa.PisaIndex({str(folder / "pisa")!r}, stemmer="none", threads=1)
        retriever = pisa.quantized(num_results=100, threads=1)
        retriever(frame.iloc[:64])  # compresses the index, loads it
        t, c = time.perf_counter(), time.process_time()
        out = retriever(frame)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        _done({{"ms_per_query": 1000 * cpu / len(frame), "wall_ms_per_query": 1000 * wall /
                len(frame), "terms": terms, "rows": len(out)}})
        """
    )


def _retrieval_figures(single: dict, batched: dict, csc: dict, pisa: dict) -> list[dict]:
    """The figures: one query against CSC (time and memory), batched against PISA."""
    same = sum(a == b for a, b in zip(single["tops"], csc["tops"], strict=True))
    exact = sum(a == b for a, b in zip(batched["tops100"], csc["exact_tops100"], strict=True))
    from bench.collections import NNZ_PER_ITEM

    where = f"{PEER_ITEMS:,} synthetic items (~{NNZ_PER_ITEM} non-zeros, Zipf-like terms)"
    details = {
        "lexlens_single_ms": single["median_ms"],
        "csc_single_ms": csc["median_ms"],
        "lexlens_single_wall_ms": single["median_wall_ms"],
        "csc_single_wall_ms": csc["median_wall_ms"],
        "lexlens_peak_rss_mb": single["single_peak_mb"],
        "lexlens_one_at_a_time_top100_ms_per_query": single["one_at_a_time_top100_ms"],
        "lexlens_rss_before_opening_mb": single["base_rss_mb"],
        "csc_bytes": csc["bytes"],
        "csc_peak_rss_mb": csc["peak_rss_mb"],
        "same_top10_as_csc": f"{same}/{len(csc['tops'])}",
        "lexlens_batched_ms_per_query": batched["ms_per_query"],
        "csc_batched_ms_per_query": csc["ms_per_query"],
        "pisa": pisa,
        "batched_top100_same_as_exact_csc": f"{exact}/{len(csc['exact_tops100'])}",
    }
    return [
        *_single_figures(single, csc, where, details),
        *_batched_figures(single, batched, csc, pisa, where, exact, details),
    ]


def _single_figures(single: dict, csc: dict, where: str, details: dict) -> list[dict]:
    """One query against scipy's CSC product: its time and its memory."""
    return [
        figure(
            "retrieval_1M_one_query_over_csc",
            single["median_ms"] / csc["median_ms"],
            "x",
            goal=("<=", 1.0),
            measured_with=f"median CPU time of {SINGLE_QUERIES} splade-tiny queries, exact top "
            f"10 over {where}: Lexlens's Scorer.top on the memory-mapped index over scipy's "
            "in-memory CSC product + argpartition, each in a fresh process, same run (CPU "
            "time: the machine is shared; wall times in details)",
            details=details,
        ),
        figure(
            "retrieval_1M_one_query_memory_over_csc",
            (single["single_peak_mb"] - single["base_rss_mb"]) * 2**20 / csc["bytes"],
            "fraction",
            goal=("<=", 0.10),
            measured_with="what the Lexlens process's memory grew by from opening the index "
            "to the end of its queries (peak RSS less RSS before opening: the index pages its "
            "queries touched and their working arrays) over the bytes of the CSC arrays alone",
            details=details,
        ),
    ]


def _batched_figures(
    single: dict, batched: dict, csc: dict, pisa: dict, where: str, exact: int, details: dict
) -> list[dict]:
    """1,000 queries' top 100: batched against PISA and CSC, exact, one at a time."""
    out = []
    value = None if "error" in pisa else batched["ms_per_query"] / pisa["ms_per_query"]
    out.append(
        figure(
            "retrieval_1M_batched_top100_over_pisa",
            value,
            "x",
            goal=("<=", 0.8),
            measured_with=f"{PEER_QUERIES:,} splade-tiny queries, top 100 over {where}, one "
            "thread each, CPU time per query: Lexlens's exact Scorer.rank (MaxScore over the "
            "memory-mapped float16 postings, candidates rescored exactly; rankings of "
            f"{exact}/{len(csc['exact_tops100'])} checked queries identical to an exact "
            "float64 CSC ranking) over PISA's block-max WAND (quantised ×100) through "
            "pyterrier-pisa" + (f" — PISA did not run: {pisa['error']}" if value is None else ""),
            details=details,
        )
    )
    if value is not None:
        out.append(
            figure(
                "retrieval_1M_one_query_at_a_time_top100_over_pisa",
                single["one_at_a_time_top100_ms"] / pisa["ms_per_query"],
                "x",
                goal=("<=", 0.8),
                measured_with=f"the same {PEER_QUERIES:,} queries ranked one at a time by "
                "search's Scorer.top (exact top 100, memory-mapped postings) over PISA's "
                "batched block-max WAND, CPU time per query",
                details=details,
            )
        )
    out.append(
        figure(
            "retrieval_1M_batched_top100_exact",
            exact / max(1, len(csc["exact_tops100"])),
            "fraction",
            goal=(">=", 1.0),
            measured_with=f"share of the first {CHECKED_QUERIES} of those queries whose "
            "batched top 100 (rows, in order) equals the exact ranking: a float64 product "
            "over the query terms' CSC columns, ties by row",
            details=details,
        )
    )
    out.append(
        figure(
            "retrieval_1M_batched_top100_over_csc",
            batched["ms_per_query"] / csc["ms_per_query"],
            "x",
            goal=("<=", 1.0),
            measured_with=f"the same {PEER_QUERIES:,} queries: Lexlens's Scorer.rank over "
            "scipy's inverted CSC product (64 queries per product, argpartition per query)",
            details=details,
        )
    )
    return out
