"""``make bench-scale``: a collection the size of MS MARCO passages on this machine, with its
peers side by side in the same run (it may take an hour; ``make bench`` does not run it).

The collection is synthetic, its sparsity that of SPLADE on MS MARCO v1 passages:
8,841,823 items and 6,980 queries (the dev set), on average :data:`DOC_NNZ` non-zeros per
document and :data:`QUERY_NNZ` per query: 119 and 43, the figures the Seismic authors list
for splade-cocondenser on MS MARCO v1 (TusKANNy, "awesome-learned-sparse-retrieval",
README, "Datasets and Encodings", MS MARCO v1: the embeddings their Seismic experiments
use; Bruch, Nardini, Rulli and Venturini, "Efficient Inverted Indexes for Approximate
Retrieval over Learned Sparse Representations", SIGIR 2024). The BigANN NeurIPS'23 sparse
track (Simhadri et al., arXiv 2409.17424; big-ann-benchmarks, neurips23/README.md) states
"approximately 120" and "approximately 49" for SPLADE CoCondenser EnsembleDistil on the
same corpus and queries: a query encoded another way, the same order of magnitude. Only the
averages come from that list; the spread is ours (each item's count drawn from a gamma
distribution of shape 8 around the mean, at least one), the terms distinct and Zipf-like
over a 30,522-term vocabulary (as :func:`bench.collections.zipf_probabilities` draws them),
document weights as integer impacts ×100 (Pyserini's and the SPLADE repository's writers
round weight × 100).

What it measures, each as a :func:`bench.run.figure` with the goal the issue states:

1. the JsonVectorCollection imported through ``lexlens index --vectors`` (the CLI, in a
   fresh child held to one thread): items per CPU second, peak RSS, index bytes over CSR
   bytes;
2. ``lexlens evaluate --query-vectors`` of every query at top 1000 (each query drawn around
   one stored item judged relevant to it: :func:`write_queries`), in a fresh child held to
   one thread: its wall time and peak RSS; one exact query's median CPU time at top 10;
3. beside it in the same run: PISA through pyterrier-pisa (its index written from the
   stored postings as :mod:`bench.peers` does, then compressed by PISA; build time and time
   per query), scipy's CSC product where it fits in the memory available (said where it does
   not), and Seismic (``pyseismic-lsr``) at the fastest query setting (query_cut ×
   heap_factor, swept over the first 1,000 queries) whose accuracy@10 against the exact
   ranking reaches 90, 95 and 97 %, built over the first ``min(items, --seismic-items)``
   items (1,000,000 by default: its one-thread build took 455 s over 200,000 items in the
   rehearsal, so 8.8M would not fit the run), its build time reported.

4. the counterfactual verification at ``--counterfactual-items`` (default: ``--items``):
   :func:`bench.counterfactual_space.run_large`'s built queries over the BEIR sample's texts
   among synthetic items in splade-tiny's vocabulary (a counterfactual edits text, so its
   collection is one an encoder reads), every failure's counterfactual at the default budget,
   each candidate ranked against the whole collection: median seconds per failure and the
   exhaustive share.

``python -m bench.scale [--items N] [--queries Q] [--seismic-items M]
[--counterfactual-items C] [--out FILE]``; the results go to ``bench/results-scale.json``
and ``python -m bench.write_readme`` adds them to bench/README.md as a section of their own.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from bench.collections import VOCAB_SIZE, zipf_probabilities
from bench.counterfactual_space import run_large
from bench.peers import term_name
from bench.run import child_run, figure, machine, summary, table

#: MS MARCO v1 passages and its dev queries.
MSMARCO_ITEMS = 8_841_823
MSMARCO_DEV_QUERIES = 6_980
#: Mean non-zeros of splade-cocondenser on MS MARCO v1 (as the Seismic authors list them).
DOC_NNZ = 119
QUERY_NNZ = 43
#: Shape of the gamma distribution each item's count is drawn from (ours: the paper gives means).
COUNT_SHAPE = 8.0
#: Integer impacts: weight × SCALE, rounded (Pyserini's writers).
SCALE = 100
#: Items Seismic is built over at most (its build over 8.8M does not fit the run).
SEISMIC_ITEMS = 1_000_000
#: Seismic's query settings swept: (query_cut, heap_factor).
SEISMIC_SETTINGS = [
    (cut, heap) for cut in (3, 5, 8, 10, 15, 20, 30, 43) for heap in (0.6, 0.7, 0.8, 0.9, 1.0)
]
#: Queries the Seismic sweep runs (the first ones): 40 settings × 6,980 queries would take
#: longer than the rest of the run.
SEISMIC_SWEEP_QUERIES = 1000
#: Accuracy@10 targets against the exact ranking.
SEISMIC_TARGETS = (0.90, 0.95, 0.97)
#: Single queries timed (after 3 warm-up queries).
SINGLE_QUERIES = 50
OUT = Path(__file__).resolve().parent / "results-scale.json"


# ------------------------------------------------------------------------ the collection
def sparse_rows(
    n: int, mean_nnz: float, seed: int, chunk: int = 20_000
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(term ids, float weights) of ``n`` synthetic vectors whose non-zero counts average
    ``mean_nnz`` (gamma-distributed, shape :data:`COUNT_SHAPE`), terms Zipf-like and distinct:
    each vector's terms are the first distinct ones of a stream of independent Zipf draws
    (successive sampling without replacement), drawn in rounds until every count is met."""
    rng = np.random.default_rng(seed)
    cdf = np.cumsum(zipf_probabilities())
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        counts = np.maximum(1, np.rint(rng.gamma(COUNT_SHAPE, mean_nnz / COUNT_SHAPE, m)))
        counts = np.minimum(counts, VOCAB_SIZE // 2).astype(np.int64)
        keys = np.zeros(0, np.int64)
        missing = counts
        while missing.any():
            rows = np.repeat(np.arange(m), missing)
            terms = np.minimum(np.searchsorted(cdf, rng.random(rows.size)), VOCAB_SIZE - 1)
            keys = np.sort(np.concatenate([keys, rows * VOCAB_SIZE + terms]))
            keys = keys[np.r_[True, keys[1:] != keys[:-1]]]  # (np.unique hashes: slower)
            missing = counts - np.bincount(keys // VOCAB_SIZE, minlength=m)
        rows, cols = np.divmod(keys, VOCAB_SIZE)
        bounds = np.searchsorted(rows, np.arange(m + 1))
        weights = rng.gamma(2.0, 0.5, size=cols.size) + 0.01
        for i in range(m):
            a, b = bounds[i], bounds[i + 1]
            yield cols[a:b], weights[a:b]


def write_collection(path: Path, items: int, seed: int = 0) -> dict[str, Any]:
    """``items`` documents as an Anserini JsonVectorCollection of integer impacts; its bytes
    and non-zero statistics."""
    names = [term_name(t) for t in range(VOCAB_SIZE)]
    counts = np.zeros(items, np.int64)
    with open(path, "wb") as handle:
        for i, (cols, weights) in enumerate(sparse_rows(items, DOC_NNZ, seed)):
            impacts = np.maximum(1, np.rint(weights * SCALE)).astype(np.int64).tolist()
            vector = dict(zip(map(names.__getitem__, cols.tolist()), impacts, strict=True))
            handle.write(orjson.dumps({"id": f"d{i}", "contents": "", "vector": vector}))
            handle.write(b"\n")
            counts[i] = len(vector)
    return {"bytes": path.stat().st_size, **_stats(counts)}


def write_queries(
    index: Path, path: Path, qrels: Path, queries: int, seed: int = 1
) -> dict[str, Any]:
    """``queries`` query vectors (float weights) as JSONL ``{"id", "vector"}``, each drawn
    around one stored item judged relevant to it in ``qrels`` (TREC); their statistics.

    A query's count is drawn as a document's is (mean :data:`QUERY_NNZ`); half of it, at
    most the item's own count, are terms of that item (drawn without replacement, each as
    likely as its stored weight is large), the rest Zipf-like terms as a document's. So an
    evaluation ranks, fails and explains as on a real benchmark: the judged item usually
    ranks high, and not always first."""
    from lexlens.analysis.collections.store import open_index

    ix = open_index(index)
    ids = ix.column("id")
    rng = np.random.default_rng(seed)
    sources = np.sort(rng.choice(len(ix), size=queries, replace=queries > len(ix)))
    counts = np.zeros(queries, np.int64)
    noise = sparse_rows(queries, QUERY_NNZ, seed)
    with open(path, "w", encoding="utf-8") as handle, open(qrels, "w") as judged:
        for i, (source, (cols, weights)) in enumerate(zip(sources.tolist(), noise, strict=True)):
            row = ix.rows(source, source + 1)
            own, mass = row.indices, row.data.astype(np.float64)
            take = min(len(cols) // 2, len(own))
            chosen = rng.choice(len(own), size=take, replace=False, p=mass / mass.sum())
            terms = dict.fromkeys(own[chosen].tolist())
            for c in cols.tolist():
                if len(terms) == len(cols):
                    break
                terms.setdefault(c)
            vector = {
                ix.vocab[c]: round(float(w), 4)
                for c, w in zip(terms, weights[: len(terms)] * 1.2, strict=True)
            }
            handle.write(json.dumps({"id": f"q{i}", "vector": vector}) + "\n")
            judged.write(f"q{i} 0 {ids[source]} 1\n")
            counts[i] = len(vector)
    return {"bytes": path.stat().st_size, **_stats(counts)}


def _stats(counts: np.ndarray) -> dict[str, Any]:
    """Mean, median and extremes of per-vector non-zero counts."""
    a = np.asarray(counts)
    return {
        "vectors": int(a.size),
        "mean_nnz": float(a.mean()),
        "median_nnz": float(np.median(a)),
        "min_nnz": int(a.min()),
        "max_nnz": int(a.max()),
    }


def query_vectors(ix: Any, path: str | Path) -> list[np.ndarray]:
    """The queries of ``path`` as dense vectors over ``ix``'s columns (a term no document
    holds scores nothing and is left out)."""
    column = {name: j for j, name in enumerate(ix.vocab)}
    out = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            q = np.zeros(len(column), np.float32)
            for term, weight in json.loads(line)["vector"].items():
                if term in column:
                    q[column[term]] = weight
            out.append(q)
    return out


def available_bytes() -> int:
    """``MemAvailable`` of /proc/meminfo (bytes)."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


# ---------------------------------------------------------------------------- the children
def _import(source: Path, index: Path) -> dict:
    """``lexlens index --vectors`` in a fresh child held to one thread."""
    return child_run(
        f"""
        import io, contextlib
        from lexlens.app.cli import main
        cpu, wall = time.process_time(), time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            main(["index", "--vectors", {str(source)!r}, "--vector-format", "anserini",
                  "--scale", "{SCALE}", "--out", {str(index)!r}, "--json"])
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        from lexlens.analysis.collections.store import open_index
        ix = open_index({str(index)!r})
        _done({{"cpu_s": cpu, "wall_s": wall, "items": len(ix), "nnz": ix.nnz,
                "disk_bytes": ix.disk_bytes, "csr_bytes": ix.csr_bytes,
                "postings": ix.postings is not None, "files": dict(ix.manifest.files)}})
        """,
        one_thread=True,
    )


_SETUP = """
        import numpy as np
        from bench.peers import median_ms
        from bench.scale import query_vectors
        from lexlens.analysis.collections.store import open_index
        ix = open_index(INDEX)
        vectors = query_vectors(ix, QUERIES)
"""


def _setup(index: Path, queries: Path) -> str:
    return _SETUP.replace("INDEX", repr(str(index))).replace("QUERIES", repr(str(queries)))


def _exact(index: Path, queries: Path) -> dict:
    """One exact query's median time at top 10 (Scorer.top), one thread."""
    return child_run(
        _setup(index, queries)
        + f"""
        from lexlens.analysis.retrieval.scorer import scorer_for
        scorer = scorer_for(ix)
        ms, wall_ms = median_ms(lambda q: scorer.top(q, 10), vectors[:{SINGLE_QUERIES} + 3])
        _done({{"single_ms": ms, "single_wall_ms": wall_ms}})
        """,
        one_thread=True,
    )


def _evaluate(index: Path, queries: Path, qrels: Path, out: Path) -> dict:
    """``lexlens evaluate --query-vectors`` of every query at top 1000 (the CLI: ranking,
    measures, every failure explained, the files written) in a fresh child, one thread."""
    return child_run(
        f"""
        import io, contextlib
        from lexlens.app.cli import main
        cpu, wall = time.process_time(), time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()) as text:
            code = main(["evaluate", "--index", {str(index)!r}, "--query-vectors",
                         {str(queries)!r}, "--qrels", {str(qrels)!r}, "--top", "1000",
                         "--out", {str(out)!r}, "--json"])
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        doc = json.loads(text.getvalue())
        _done({{"code": code, "cpu_s": cpu, "wall_s": wall,
                "queries": doc["settings"]["queries"], "measures": doc["metrics"]["aggregate"],
                "failures": len(doc["failures"]), "notes": doc["notes"]}})
        """,
        one_thread=True,
    )


def _csc(index: Path, queries: Path) -> dict:
    """scipy's CSC product, one query at a time at top 10 — or why it does not fit."""
    nnz = child_run(
        f"""
        from lexlens.analysis.collections.store import open_index
        ix = open_index({str(index)!r})
        _done({{"nnz": ix.nnz, "items": len(ix)}})
        """
    )
    need = 16 * nnz["nnz"] + 16 * nnz["items"]  # the CSR read into memory and its CSC
    free = available_bytes()
    if need > 0.8 * free:
        return {
            "error": f"does not fit: needs about {need / 2**30:.1f} GiB, "
            f"{free / 2**30:.1f} GiB available",
            "need_bytes": need,
            "free_bytes": free,
        }
    return child_run(
        _setup(index, queries)
        + f"""
        from bench.peers import csc_top
        X = ix.rows(0, len(ix)).tocsc()
        X.sort_indices()
        nbytes = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
        ms, wall_ms = median_ms(lambda q: csc_top(X, q, 10), vectors[:{SINGLE_QUERIES} + 3])
        _done({{"single_ms": ms, "single_wall_ms": wall_ms, "bytes": nbytes}})
        """,
        one_thread=True,
    )


def _pisa(index: Path, queries: Path, folder: Path) -> dict:
    """PISA's build (binary collection written, then compressed at its first query) and its
    time per query at top 10 in one batch, one thread — or why it could not run."""
    try:
        import pyterrier_pisa  # noqa: F401  (the bench extra: only whether it imports)
    except Exception as exc:  # noqa: BLE001 (missing, or its own imports failing)
        return {
            "error": f"pyterrier-pisa not importable ({type(exc).__name__}: {exc}); "
            'pip install "lexlens[bench]"'
        }
    return child_run(
        _setup(index, queries)
        + f"""
        from pathlib import Path
        import pyterrier_pisa
        from bench.peers import write_pisa_index, pisa_queries
        if ix.postings is None:
            _done({{"error": "the index stores no postings (under 2,000,000 non-zeros)"}})
            raise SystemExit
        t = time.perf_counter()
        write_pisa_index(ix, Path({str(folder)!r}))
        written_s = time.perf_counter() - t
        frame = pisa_queries(vectors)
        pisa = pyterrier_pisa.PisaIndex({str(folder)!r}, stemmer="none", threads=1)
        retriever = pisa.quantized(num_results=10, threads=1)
        t = time.perf_counter()
        retriever(frame.iloc[:1])  # compresses the index, loads it
        compressed_s = time.perf_counter() - t
        retriever(frame.iloc[:64])
        t, c = time.perf_counter(), time.process_time()
        out = retriever(frame)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        _done({{"written_s": written_s, "compressed_s": compressed_s,
                "build_s": written_s + compressed_s,
                "ms_per_query": 1000 * cpu / len(frame),
                "wall_ms_per_query": 1000 * wall / len(frame), "rows": len(out)}})
        """,
        one_thread=True,
    )


def _seismic(index: Path, queries: Path, items: int) -> dict:
    """Seismic over the first ``items`` items: its build, then every query setting's
    accuracy@10 against the exact float64 ranking of those items and its median time."""
    try:
        import seismic  # noqa: F401  (the seismic extra: only whether it imports)
    except Exception as exc:  # noqa: BLE001
        return {
            "error": f"pyseismic-lsr not importable ({type(exc).__name__}: {exc}); "
            'pip install "lexlens[seismic]"'
        }
    return child_run(
        _setup(index, queries)
        + f"""
        import seismic
        from bench.peers import csc_exact_top
        kind = seismic.get_seismic_string()
        n = min(len(ix), {items})
        X = ix.rows(0, n)
        names = np.array(ix.vocab, dtype=kind)
        t = time.perf_counter()
        dataset = seismic.SeismicDataset()
        for i in range(n):
            a, b = X.indptr[i], X.indptr[i + 1]
            dataset.add_document(str(i), names[X.indices[a:b]], X.data[a:b].astype(np.float32))
        loaded_s = time.perf_counter() - t
        t = time.perf_counter()
        engine = seismic.SeismicIndex.build_from_dataset(
            dataset, n_postings=3500, centroid_fraction=0.1, min_cluster_size=2,
            summary_energy=0.4, max_fraction=1.5, doc_cut=15, num_threads=1)
        build_s = time.perf_counter() - t
        del dataset
        C = X.tocsc()
        vectors = vectors[:{SEISMIC_SWEEP_QUERIES}]
        exact = [set(csc_exact_top(C, q, 10).tolist()) for q in vectors]
        del C, X
        qs = []
        for q in vectors:
            terms = np.flatnonzero(q)
            qs.append((names[terms], q[terms].astype(np.float32)))
        sweep = []
        for cut, heap in {SEISMIC_SETTINGS!r}:
            hit, cpu, wall = [], [], []
            for i, (terms, values) in enumerate(qs):
                t, c = time.perf_counter(), time.process_time()
                found = engine.search(str(i), terms, values, 10, cut, heap)
                cpu.append(time.process_time() - c); wall.append(time.perf_counter() - t)
                want = exact[i]
                if want:
                    hit.append(len(want & {{int(d) for _, _, d in found}}) / len(want))
            sweep.append({{"query_cut": cut, "heap_factor": heap,
                           "accuracy_at_10": float(np.mean(hit)),
                           "median_ms": 1000 * float(np.median(cpu)),
                           "median_wall_ms": 1000 * float(np.median(wall))}})
        _done({{"items": n, "loaded_s": loaded_s, "build_s": build_s, "sweep": sweep,
                "sweep_queries": len(vectors),
                "build": {{"n_postings": 3500, "centroid_fraction": 0.1,
                           "summary_energy": 0.4, "max_fraction": 1.5, "doc_cut": 15}}}})
        """,
        one_thread=True,
    )


def seismic_at(sweep: list[dict], target: float) -> dict | None:
    """The fastest setting reaching ``target`` accuracy@10, else the most accurate one."""
    reached = [s for s in sweep if s["accuracy_at_10"] >= target]
    if reached:
        return min(reached, key=lambda s: s["median_ms"])
    return max(sweep, key=lambda s: s["accuracy_at_10"]) if sweep else None


# ------------------------------------------------------------------------------ figures
def measure(
    items: int, queries: int, seismic_items: int, counterfactual_items: int, folder: Path
) -> list[dict]:
    """Write the collection and queries, then every child above; the figures."""
    source, query_file, qrels, index = (
        folder / "vectors.jsonl",
        folder / "query-vectors.jsonl",
        folder / "qrels.txt",
        folder / "ix",
    )
    t = time.perf_counter()
    docs = write_collection(source, items)
    docs["written_s"] = time.perf_counter() - t
    print(f"bench-scale: wrote {items:,} items", file=sys.stderr)
    imported = _import(source, index)
    source.unlink()  # the index holds the vectors now; free the disk for PISA's copy
    asked = write_queries(index, query_file, qrels, queries)
    print(f"bench-scale: imported; wrote {queries:,} judged queries", file=sys.stderr)
    evaluated = _evaluate(index, query_file, qrels, folder / "evaluation")
    shutil.rmtree(folder / "evaluation", ignore_errors=True)
    print("bench-scale: evaluation done", file=sys.stderr)
    exact = {**_exact(index, query_file), "evaluate": evaluated}
    csc = _csc(index, query_file)
    pisa = _pisa(index, query_file, folder / "pisa")
    shutil.rmtree(folder / "pisa", ignore_errors=True)
    print("bench-scale: PISA done", file=sys.stderr)
    seismic = _seismic(index, query_file, seismic_items)
    print("bench-scale: Seismic done", file=sys.stderr)
    shutil.rmtree(index, ignore_errors=True)  # the disk and page cache for the next build
    counterfactuals = (
        run_large(counterfactual_items, prefix="scale_") if counterfactual_items else []
    )
    print("bench-scale: counterfactuals done", file=sys.stderr)
    return (
        figures(items, queries, docs, asked, imported, exact, csc, pisa, seismic) + counterfactuals
    )


def figures(
    items: int,
    queries: int,
    docs: dict,
    asked: dict,
    imported: dict,
    exact: dict,
    csc: dict,
    pisa: dict,
    seismic: dict,
) -> list[dict]:
    """The figures of one run, each with its goal."""
    where = (
        f"{items:,} synthetic items (mean {docs['mean_nnz']:.1f} non-zeros; splade-cocondenser "
        f"on MS MARCO v1 as the Seismic authors list it: {DOC_NNZ}) and {queries:,} queries "
        f"(mean {asked['mean_nnz']:.1f}; {QUERY_NNZ})"
    )
    details = {
        "collection": docs,
        "queries": asked,
        "import": imported,
        "exact": exact,
        "csc": csc,
        "pisa": pisa,
        "seismic": seismic,
    }
    out = [
        figure(
            "scale_import_items_per_cpu_s",
            imported["items"] / imported["cpu_s"],
            "items/s",
            goal=(">=", 50_000),
            measured_with=f"lexlens index --vectors (the CLI, no encoder, --scale {SCALE}) of "
            f"{where}, as a JsonVectorCollection of integer impacts, in a fresh child held "
            "to one thread: items over its process CPU time",
            details=details,
        ),
        figure(
            "scale_import_peak_rss_mb",
            imported["peak_rss_mb"],
            "MB",
            goal=("<=", 1536),
            measured_with=f"the import's child's peak RSS (VmHWM): {where}",
            details=details,
        ),
        figure(
            "scale_index_over_csr_bytes",
            imported["disk_bytes"] / imported["csr_bytes"],
            "x",
            goal=("<=", 1.3),
            measured_with="bytes of every index file (CSR, norms, postings, Parquet metadata, "
            "vocabulary, manifest) over the CSR arrays' bytes, after the import of " + where,
            details=details,
        ),
        figure(
            "scale_evaluate_top1000_s",
            exact["evaluate"]["wall_s"],
            "s",
            goal=("<=", 600),
            measured_with=f"wall time of lexlens evaluate --query-vectors --top 1000 (the CLI: "
            f"the exact ranking, the measures, every failure explained, the files written) "
            f"of {exact['evaluate']['queries']:,} judged queries in a fresh child held to one "
            f"thread, over {where}",
            details=details,
        ),
        figure(
            "scale_evaluate_peak_rss_over_index_plus_2gb",
            exact["evaluate"]["peak_rss_mb"] * 2**20 / (imported["disk_bytes"] + 2 * 2**30),
            "x",
            goal=("<=", 1.0),
            measured_with="the evaluation child's peak RSS (VmHWM, the memory-mapped index "
            "pages it touched included) over the index's bytes + 2 GiB",
            details=details,
        ),
    ]
    out += _latency_figures(exact, csc, pisa, where, details)
    out += _seismic_figures(exact, seismic, where, details)
    return out


def _latency_figures(exact: dict, csc: dict, pisa: dict, where: str, details: dict) -> list:
    """One exact query against PISA and scipy's CSC product."""
    single = exact["single_ms"]
    how = (
        f"median CPU time of {SINGLE_QUERIES} exact top-10 queries by Scorer.top, one "
        f"thread, over {where}"
    )
    pisa_ms = None if "error" in pisa else pisa["ms_per_query"]
    csc_ms = None if "error" in csc else csc["single_ms"]
    return [
        figure(
            "scale_one_query_ms",
            single,
            "ms",
            measured_with=how,
            details=details,
        ),
        figure(
            "scale_one_query_over_pisa",
            None if pisa_ms is None else single / pisa_ms,
            "x",
            goal=("<=", 0.6),
            measured_with=f"{how}, over PISA's CPU time per query (block-max WAND, impacts "
            "×100, top 10, one batch of every query through pyterrier-pisa, one thread: "
            "pyterrier-pisa gives no per-query time)"
            + (f" — PISA did not run: {pisa['error']}" if pisa_ms is None else ""),
            details=details,
        ),
        figure(
            "scale_pisa_build_s",
            None if pisa_ms is None else pisa["build_s"],
            "s",
            measured_with="PISA's build: its binary collection written from the stored "
            "postings (as bench/peers.py does) plus PISA's compression at its first query"
            + (f" — PISA did not run: {pisa['error']}" if pisa_ms is None else ""),
            details=details,
        ),
        figure(
            "scale_one_query_over_csc",
            None if csc_ms is None else single / csc_ms,
            "x",
            goal=("<=", 1.0),
            measured_with=f"{how}, over scipy's in-memory CSC product + argpartition on the "
            "same queries, one thread"
            + ("" if csc_ms is not None else f" — skipped: scipy's CSC {csc['error']}"),
            details=details,
        ),
    ]


def _seismic_figures(exact: dict, seismic: dict, where: str, details: dict) -> list:
    """Seismic's build and its latency at accuracy@10 ≈ 90 / 95 / 97 %."""
    if "error" in seismic:
        return [
            figure(
                "scale_seismic_build_s",
                None,
                "s",
                measured_with=f"skipped: {seismic['error']}",
                details=details,
            )
        ]
    subset = f"the first {seismic['items']:,} items of {where}"
    out = [
        figure(
            "scale_seismic_build_s",
            seismic["build_s"],
            "s",
            measured_with=f"Seismic's build_from_dataset over {subset}, one thread, "
            "n_postings 3500, centroid_fraction 0.1, summary_energy 0.4, max_fraction 1.5, "
            "doc_cut 15 (its MS MARCO settings); loading the dataset not counted",
            details=details,
        )
    ]
    for target in SEISMIC_TARGETS:
        chosen = seismic_at(seismic["sweep"], target)
        pct = round(target * 100)
        out.append(
            figure(
                f"scale_seismic_ms_at_{pct}pct",
                chosen["median_ms"],
                "ms",
                measured_with=f"median CPU time of Seismic's search, top 10, one thread, at "
                f"the fastest query setting reaching accuracy@10 {target:.2f} over the first "
                f"{seismic.get('sweep_queries', 'all')} queries against the "
                f"exact float64 ranking of {subset} (query_cut {chosen['query_cut']}, "
                f"heap_factor {chosen['heap_factor']}: accuracy@10 "
                f"{chosen['accuracy_at_10']:.3f}"
                + ("" if chosen["accuracy_at_10"] >= target else ", the best the sweep reached")
                + ")",
                details={"chosen": chosen, **details},
            )
        )
    chosen = seismic_at(seismic["sweep"], 0.97)
    out.append(
        figure(
            "scale_exact_over_seismic_at_97pct",
            exact["single_ms"] / chosen["median_ms"],
            "x",
            measured_with="one exact top-10 query's median CPU time over all the items, over "
            f"Seismic's at accuracy@10 ≈ 0.97 over {seismic['items']:,} items (a figure to "
            "report: the floor for exactness is rank-safe block-max pruning)",
            details={"chosen": chosen, **details},
        )
    )
    return out


def main(argv: list[str] | None = None) -> int:
    """Measure at ``--items`` / ``--queries`` and write ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=MSMARCO_ITEMS)
    parser.add_argument("--queries", type=int, default=MSMARCO_DEV_QUERIES)
    parser.add_argument("--seismic-items", type=int, default=SEISMIC_ITEMS)
    parser.add_argument(
        "--counterfactual-items", type=int, default=None, help="default: --items; 0: skip"
    )
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--work", type=Path, default=None, help="scratch folder (default: tmp)")
    args = parser.parse_args(argv)
    if args.counterfactual_items is None:
        args.counterfactual_items = args.items
    if args.items < 1 or args.queries < SINGLE_QUERIES + 3:
        parser.error(f"--items must be ≥ 1 and --queries ≥ {SINGLE_QUERIES + 3}")
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    run = {
        "started": started,
        "modules": ["bench.scale"],
        "items": args.items,
        "queries": args.queries,
        **machine(),
    }
    folder = Path(tempfile.mkdtemp(prefix="lexlens-bench-scale-", dir=args.work))
    try:
        results = [
            {**r, "module": "bench.scale"}
            for r in measure(
                args.items, args.queries, args.seismic_items, args.counterfactual_items, folder
            )
        ]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    run["load_average_after"] = list(os.getloadavg())
    doc = {"machine": run, "runs": [run], "results": results, "summary": summary(results)}
    args.out.write_text(json.dumps(doc, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    print(table(results))
    print(f"bench-scale: wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
