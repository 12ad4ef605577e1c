"""Stored collections at scale: indexing throughput, the 20,000-text build, query
latency on synthetic indexes of 10k / 100k / 1M items, sparse vs dense, build memory.

Every figure carries its goal. Memory is measured in a fresh child process per build
(``VmHWM`` of its own address space and the peak of anonymous memory sampled from
``/proc``; see ``bench.run.child_run``), so one build's pages never count towards another's. Synthetic items have about 100 non-zeros drawn from a
Zipf-like term distribution over the 30,522-term vocabulary (common terms in a large share
of items, as in learned sparse collections), positive weights.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.run import child_run, figure

ROOT = Path(__file__).resolve().parent.parent
VOCAB_SIZE = 30522
NNZ_PER_ITEM = 100


# ------------------------------------------------------------------------------- helpers
def corpus(n: int) -> list[str]:
    """``n`` real English texts: docstring paragraphs of Python's standard library
    (deterministic: files in sorted order, 40–600 characters, duplicates dropped)."""
    import ast
    import sysconfig

    seen: dict[str, None] = {}
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).rglob("*.py")):
        if "test" in path.parts or "idlelib" in path.parts:
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, OSError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                for para in (doc or "").split("\n\n"):
                    text = " ".join(para.split())
                    if 40 <= len(text) <= 600 and text not in seen:
                        seen[text] = None
                        if len(seen) >= n:
                            return list(seen)
    return list(seen)


def zipf_probabilities(size: int = VOCAB_SIZE, shift: float = 30.0, power: float = 1.05):
    ranks = np.arange(size, dtype=np.float64)
    p = 1.0 / (ranks + shift) ** power
    rng = np.random.default_rng(7)
    p = p[rng.permutation(size)]  # frequent terms spread over the vocabulary ids
    return p / p.sum()


def synthetic_rows(n: int, seed: int = 0, chunk: int = 20000):
    """(meta, indices, weights) of ``n`` synthetic items, about 100 non-zeros each."""
    rng = np.random.default_rng(seed)
    cdf = np.cumsum(zipf_probabilities())
    draws = int(NNZ_PER_ITEM * 1.15)
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        terms = np.searchsorted(cdf, rng.random((m, draws)))
        terms = np.minimum(terms, VOCAB_SIZE - 1)
        keys = (np.arange(m)[:, None] * VOCAB_SIZE + terms).ravel()
        keys.sort()
        keys = keys[np.r_[True, keys[1:] != keys[:-1]]]  # unique (row, term) pairs
        rows, cols = np.divmod(keys, VOCAB_SIZE)
        bounds = np.searchsorted(rows, np.arange(m + 1))
        weights = rng.gamma(2.0, 0.5, size=cols.size).astype(np.float32) + 0.01
        for i in range(m):
            a, b = bounds[i], bounds[i + 1]
            yield {"id": f"s{start + i}"}, cols[a:b].astype(np.int32), weights[a:b]


def write_synthetic_splade_index(folder: Path, items: int, timeout: float = 3600) -> None:
    """Write ``items`` synthetic rows as an index of splade-tiny's vocabulary (its encoder
    recorded, so queries encode with it), in a child process."""
    child_run(
        f"""
        from bench.collections import synthetic_rows
        from lexlens.analysis.collections.build_parts import encoder_entry
        from lexlens.analysis.collections.store_writer import write_index
        from lexlens.models import load_encoder
        splade = load_encoder("splade-tiny")
        write_index({str(folder)!r}, splade.vocab, synthetic_rows({items}),
                    encoder=encoder_entry(splade))
        _done({{}})
        """,
        timeout=timeout,
    )


def synthetic_query(rng: np.random.Generator, terms: int = 25) -> np.ndarray:
    p = zipf_probabilities()
    q = np.zeros(VOCAB_SIZE, np.float32)
    picked = rng.choice(VOCAB_SIZE, size=terms, replace=False, p=p)
    q[picked] = rng.gamma(2.0, 0.6, size=terms).astype(np.float32)
    return q


def _vocab() -> list[str]:
    return [f"t{i}" for i in range(VOCAB_SIZE)]


# ---------------------------------------------------------------------------- figures
def indexing_throughput(n: int = 1500) -> list[dict]:
    """Items/s of `lexlens index` on real texts, in-process and on local Ray, against the
    encoder's own batched throughput measured in the same child."""
    folder = Path(tempfile.mkdtemp(prefix="lexlens-bench-"))
    try:
        (folder / "texts.txt").write_text("\n".join(corpus(n)) + "\n", encoding="utf-8")
        here = child_run(
            f"""
            from pathlib import Path
            from lexlens.models import load_encoder
            from lexlens.analysis.collections.indexing import build_index
            folder = Path({str(folder)!r})
            texts = (folder / "texts.txt").read_text().splitlines()
            enc = load_encoder("splade-tiny", device="cpu")
            enc.encode_texts(texts[:32], side="document", keep_units=False)
            t = time.perf_counter()
            for s in range(0, len(texts), 32):
                enc.encode_texts(texts[s:s + 32], side="document", keep_units=False)
            encode_s = time.perf_counter() - t
            r = build_index(enc, folder / "texts.txt", folder / "ix", batch_size=32)
            _done({{"items": r.items, "index_s": r.seconds, "encode_s": encode_s}})
            """
        )
        out = [
            figure(
                "collections_index_items_per_s_in_process",
                here["items"] / here["index_s"],
                "items/s",
                goal=(">=", 0.8 * here["items"] / here["encode_s"]),
                measured_with=f"lexlens index of {here['items']} stdlib docstring paragraphs "
                "with splade-tiny (batch 32), one fresh process; goal: at least 0.8x the "
                "encoder's own batched throughput measured in the same process",
                details={**here, "encode_items_per_s": here["items"] / here["encode_s"]},
            )
        ]
        try:
            import ray  # noqa: F401
        except ImportError:
            out.append(
                figure(
                    "collections_index_items_per_s_local_ray",
                    None,
                    "items/s",
                    goal=(">=", 0.0),
                    measured_with='skipped: Ray not installed (pip install "lexlens[ray]")',
                )
            )
            return out
        on_ray = child_run(
            f"""
            from pathlib import Path
            from lexlens.models import load_encoder
            from lexlens.analysis.collections.indexing import build_index
            folder = Path({str(folder)!r})
            enc = load_encoder("splade-tiny", device="cpu")
            t = time.perf_counter()
            r = build_index(enc, folder / "texts.txt", folder / "ray-ix", batch_size=32,
                            ray="local")
            _done({{"items": r.items, "index_s": time.perf_counter() - t}})
            """
        )
        ratio = (on_ray["items"] / on_ray["index_s"]) / (here["items"] / here["index_s"])
        out.append(
            figure(
                "collections_index_items_per_s_local_ray",
                on_ray["items"] / on_ray["index_s"],
                "items/s",
                goal=(">=", 0.5 * here["items"] / here["index_s"]),
                measured_with="the same texts with --ray (a local Ray started by the build, "
                "2 CPUs: 2 actors, one encoder each, start-up included); goal: at least "
                "0.5x in-process on this 2-core machine (Ray pays off on a cluster)",
                details={**on_ray, "ratio_to_in_process": ratio, "cpus": os.cpu_count()},
            )
        )
        return out
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def twenty_thousand_texts(n: int = 20000) -> list[dict]:
    """Acceptance: 20,000 texts with splade-tiny: peak RSS < 1.5 GB; index ≤ 2× CSR bytes."""
    folder = Path(tempfile.mkdtemp(prefix="lexlens-bench-"))
    try:
        texts = corpus(n)
        (folder / "texts.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
        r = child_run(
            f"""
            from pathlib import Path
            from lexlens.models import load_encoder
            from lexlens.analysis.collections.indexing import build_index
            from lexlens.analysis.collections.store import open_index
            folder = Path({str(folder)!r})
            enc = load_encoder("splade-tiny", device="cpu")
            r = build_index(enc, folder / "texts.txt", folder / "ix", batch_size=32)
            ix = open_index(folder / "ix")
            _done({{"items": r.items, "seconds": r.seconds, "nnz": ix.nnz,
                    "disk_bytes": ix.disk_bytes, "csr_bytes": ix.csr_bytes,
                    "files": dict(ix.manifest.files)}})
            """
        )
        details = {
            **r,
            "texts_in_corpus": len(texts),
            "mean_chars": float(np.mean([len(t) for t in texts])),
        }
        return [
            figure(
                "collections_20k_texts_peak_rss",
                r["peak_rss_mb"],
                "MB",
                goal=("<", 1536.0),
                measured_with=f"lexlens index of {r['items']:,} stdlib docstring paragraphs "
                "with splade-tiny in a fresh process (VmHWM, model and torch included)",
                details=details,
            ),
            figure(
                "collections_20k_texts_disk_over_csr",
                r["disk_bytes"] / r["csr_bytes"],
                "x",
                goal=("<=", 2.0),
                measured_with="bytes of every index file (CSR, norms, Parquet metadata with "
                "the texts, vocabulary, manifest) over the CSR arrays' bytes "
                "(int64 indptr + int32 indices + float32 weights)",
                details=details,
            ),
        ]
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def latency(
    sizes: tuple[int, ...] = (10_000, 100_000, 1_000_000),
    queries: int = 30,
    keep: Path | None = None,
) -> list[dict]:
    """Query latency (top 10, exact) on synthetic indexes; sparse vs dense at 10k; the peak
    memory of building each index (fresh child per size). ``keep``: where the
    1,000,000-item index is moved, for the figures beside the peers, instead of deleted."""
    folder = Path(tempfile.mkdtemp(prefix="lexlens-bench-"))
    out: list[dict] = []
    try:
        for n in sizes:
            built = child_run(
                f"""
                from bench.collections import synthetic_rows, _vocab
                from lexlens.analysis.collections.store_writer import write_index
                t = time.perf_counter()
                ix = write_index({str(folder / f"s{n}")!r}, _vocab(), synthetic_rows({n}),
                                 encoder={{"name": "synthetic"}})
                _done({{"items": len(ix), "nnz": ix.nnz, "seconds": time.perf_counter() - t,
                        "disk_bytes": ix.disk_bytes, "csr_bytes": ix.csr_bytes,
                        "postings": ix.postings is not None}})
                """
            )
            measured = child_run(
                f"""
                import numpy as np
                from bench.collections import synthetic_query
                from lexlens.analysis.collections.store import open_index
                from lexlens.analysis.retrieval.scorer import scorer_for
                t = time.perf_counter()
                ix = open_index({str(folder / f"s{n}")!r})
                open_s = time.perf_counter() - t
                top_n = scorer_for(ix).top
                rng = np.random.default_rng(1)
                qs = [synthetic_query(rng) for _ in range({queries} + 3)]
                for q in qs[:3]:
                    top_n(q, 10)
                times = []
                for q in qs[3:]:
                    t = time.perf_counter(); top_n(q, 10); times.append(time.perf_counter() - t)
                res = {{"open_s": open_s, "median_s": float(np.median(times)),
                        "p95_s": float(np.percentile(times, 95)), "queries": len(times)}}
                if {n} <= 10000:
                    dense = ix.rows(0, len(ix)).toarray()
                    dt = []
                    for q in qs[3:13]:
                        t = time.perf_counter()
                        s = dense @ q
                        top = np.argpartition(-s, 10)[:10]
                        dt.append(time.perf_counter() - t)
                    res["dense_median_s"] = float(np.median(dt))
                    res["dense_bytes"] = dense.nbytes
                _done(res)
                """
            )
            label = f"{n // 1000}k" if n < 1_000_000 else f"{n // 1_000_000}M"
            details = {"items": n, "build": built, "query": measured}
            out.append(
                figure(
                    f"collections_query_latency_{label}",
                    measured["median_s"] * 1000,
                    "ms",
                    goal=("<", 50.0),
                    measured_with=f"median of {measured['queries']} exact top-10 queries "
                    "(25 terms each, Zipf-like) on a synthetic index of "
                    f"{n:,} items x ~{NNZ_PER_ITEM} non-zeros, memory-mapped, after 3 warm-up "
                    + (
                        "queries; float16 postings + exact rescoring"
                        if built["postings"]
                        else "queries; one sparse product over the CSR"
                    ),
                    details=details,
                )
            )
            if "dense_median_s" in measured:
                out.append(
                    figure(
                        f"collections_sparse_speedup_over_dense_{label}",
                        measured["dense_median_s"] / measured["median_s"],
                        "x",
                        goal=(">=", 10.0),
                        measured_with=f"dense float32 [{n:,} x 30,522] product + top-10 "
                        "(median of 10) over the sparse search's median, same queries, same "
                        "process",
                        details=details,
                    )
                )
            out.append(
                figure(
                    f"collections_build_peak_rss_{label}",
                    built["peak_rss_mb"],
                    "MB",
                    goal=("<", 1536.0),
                    measured_with=f"writing the {n:,}-item synthetic index (CSR, Parquet, "
                    "postings) in a fresh process; VmHWM counts the memory-mapped output "
                    f"pages it touched (peak anonymous memory {built['peak_anon_mb']:.0f} MB)",
                    details=details,
                )
            )
            if keep is not None and n == 1_000_000:
                shutil.move(folder / f"s{n}", keep)
            shutil.rmtree(folder / f"s{n}", ignore_errors=True)
        return out
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run() -> list[dict]:
    from bench.peers import retrieval_beside_peers

    started = time.perf_counter()
    results = [*indexing_throughput(), *twenty_thousand_texts()]
    if os.environ.get("LEXLENS_BENCH_INDEX_1M"):
        results += [*latency(), *retrieval_beside_peers()]
    else:  # the 1,000,000-item index is built once, for both
        shared = Path(tempfile.mkdtemp(prefix="lexlens-bench-1M-"))
        try:
            results += latency(keep=shared / "s1M")
            os.environ["LEXLENS_BENCH_INDEX_1M"] = str(shared / "s1M")
            results += retrieval_beside_peers()
        finally:
            os.environ.pop("LEXLENS_BENCH_INDEX_1M", None)
            shutil.rmtree(shared, ignore_errors=True)
    print(f"bench.collections: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return results
