"""What if: Seismic (``pyseismic-lsr``) at several ``query_cut`` settings over one synthetic
collection, accuracy@10 against the exact ranking beside each setting's latency, the exact
scorer's latency, and why each setting lost what it lost.

The collection is :func:`bench.collections.write_synthetic_splade_index`'s (about 100
non-zeros per item in splade-tiny's vocabulary), exported with ``lexlens export --format
seismic``; the queries are stdlib docstring sentences encoded by splade-tiny (the export's
query vectors). Seismic is built once (``n_postings`` :data:`N_POSTINGS`, ``max_fraction`` 1,
its other settings at their defaults, built on every core), then searched one query at a time, single thread, at
each ``query_cut``; the exact top 10 is :meth:`Scorer.top`'s, timed the same way. Each
setting's lost items get their reasons
(:func:`~lexlens.analysis.systems.engine_loss.engine_losses`). Seismic's README reports
accuracy@10 90.5 % at 187 µs and 97.2 % at 531 µs per query on MS MARCO (8.8M items): the
figures here are at 100,000 items, with no goal.

Run alone: ``python -m bench.engine_sweep [ITEMS]`` prints the table (stderr) and the
figures' JSON (stdout, after Seismic's own build log).
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.collections import corpus, write_synthetic_splade_index
from bench.run import figure
from lexlens.analysis.collections.store import open_index
from lexlens.analysis.export.export import export_index
from lexlens.analysis.retrieval.scorer import scorer_for
from lexlens.analysis.systems.engine_loss import EngineOptions, engine_losses

ITEMS = 100_000
QUERIES = 200
N_POSTINGS = 2_000
QUERY_CUTS = (1, 2, 3, 5, 8, 13, 21, 1000)
HEAP_FACTOR = 0.9
DEPTH = 10


def run(items: int = ITEMS, queries: int = QUERIES) -> list[dict]:
    """The sweep's figures: accuracy@10 per query_cut (latency and reasons in details)."""
    import seismic  # pyseismic-lsr: an optional extra, imported only by this benchmark

    folder = Path(tempfile.mkdtemp(prefix="lexlens-bench-engine-"))
    try:
        write_synthetic_splade_index(folder / "ix", items, timeout=3600)
        ix = open_index(folder / "ix")
        texts = {f"q{n}": " ".join(t.split()[:12]) for n, t in enumerate(corpus(queries))}
        exported = export_index(ix, folder / "ex", format="seismic", queries=texts)
        (queries_file,) = [name for name in exported.written if name.startswith("queries")]
        lines = [json.loads(line) for line in (Path(exported.out) / queries_file).open()]
        term_id = {w: i for i, w in enumerate(ix.vocab)}
        vectors = {}
        for q in lines:
            v = np.zeros(len(ix.vocab))
            for term, w in q["vector"].items():
                v[term_id[term]] = w
            vectors[q["id"]] = v
        ids = [str(i) for i in ix.column("id")]
        row_of = {d: r for r, d in enumerate(ids)}
        scorer = scorer_for(ix)
        exact, exact_times = {}, []
        for q, v in vectors.items():
            started = time.perf_counter()
            rows, scores = scorer.top(v, DEPTH)
            exact_times.append(time.perf_counter() - started)
            exact[q] = [(ids[r], float(s)) for r, s in zip(rows, scores, strict=True) if s > 0]
        started = time.perf_counter()
        engine = seismic.SeismicIndex.build(
            str(folder / "ex" / "docs.jsonl"),
            n_postings=N_POSTINGS,
            max_fraction=1.0,
            input_token_to_id_map=term_id,
        )
        build = time.perf_counter() - started
        kind = seismic.get_seismic_string()
        asked = [
            (
                q["id"],
                np.array(list(q["vector"]), dtype=kind),
                np.array(list(q["vector"].values()), dtype=np.float32),
            )
            for q in lines
        ]
        exact_us = float(np.median(exact_times)) * 1e6
        out = [
            figure(
                "engine_sweep_exact_top10_latency",
                exact_us,
                "µs",
                measured_with=f"median of {len(vectors)} single exact top-10 queries over "
                f"{items:,} synthetic items (Scorer.top), one thread",
                details={"items": items, "queries": len(vectors)},
            )
        ]
        rows_out = []
        for cut in QUERY_CUTS:
            run_, times = {}, []
            for qid, comps, vals in asked:
                started = time.perf_counter()
                hits = engine.search(qid, comps, vals, DEPTH, cut, HEAP_FACTOR)
                times.append(time.perf_counter() - started)
                run_[qid] = [(d, float(s)) for _, s, d in hits]
            options = EngineOptions(engine="seismic", query_cut=cut, n_postings=N_POSTINGS)
            losses = engine_losses(scorer, vectors, exact, run_, row_of, {}, options, ix.vocab)
            latency = float(np.median(times)) * 1e6
            reasons = {s["reason"]: s["items"] for s in losses["reasons"]}
            rows_out.append((cut, losses["mean_accuracy"], latency, reasons))
            out.append(
                figure(
                    f"engine_sweep_seismic_query_cut_{cut}_accuracy_at_10",
                    losses["mean_accuracy"],
                    "fraction",
                    measured_with=f"Seismic n_postings={N_POSTINGS}, query_cut={cut}, "
                    f"heap_factor={HEAP_FACTOR}, one query at a time, against the exact top 10",
                    details={
                        "latency_us": latency,
                        "exact_latency_us": exact_us,
                        "build_s": build,
                        "lost": losses["lost"],
                        "reasons": reasons,
                    },
                )
            )
        for cut, accuracy, latency, reasons in rows_out:
            print(
                f"query_cut {cut:>5}: accuracy@10 {accuracy:.4f}, {latency:8.1f} µs "
                f"(exact {exact_us:.1f} µs); lost by reason {reasons}",
                file=sys.stderr,
            )
        return out
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    print(json.dumps(run(int(sys.argv[1]) if len(sys.argv) > 1 else ITEMS), indent=1))
