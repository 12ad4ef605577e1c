"""What if: Seismic (``pyseismic-lsr``) at several ``query_cut`` settings over one synthetic
collection, accuracy@10 against the exact ranking beside each setting's latency, the exact
scorer's latency, and why each setting lost what it lost.

The collection is :func:`bench.collections.write_synthetic_splade_index`'s (about 100
non-zeros per item in splade-tiny's vocabulary), exported with ``lexlens export --format
seismic``; the queries are stdlib docstring sentences encoded by splade-tiny (the export's
query vectors). The sweep is the library's
(:func:`~lexlens.analysis.systems.engine_sweep.engine_sweep`, what ``lexlens evaluate --sweep
seismic`` runs): Seismic built once (``n_postings`` :data:`N_POSTINGS`, ``max_fraction`` 1,
its other settings at their defaults, built on every core), then searched one query at a
time, single thread, at each ``query_cut``; the exact top 10 is :meth:`Scorer.top`'s, timed
the same way; each setting's lost items get their reasons
(:func:`~lexlens.analysis.systems.engine_loss.engine_losses`); no judgements, so no
nDCG@10. Seismic's README reports accuracy@10 90.5 % at 187 µs and 97.2 % at 531 µs per
query on MS MARCO (8.8M items): the figures here are at 100,000 items, with no goal.

Run alone: ``python -m bench.engine_sweep [ITEMS]`` prints the table and Seismic's build
log (stderr) and the figures' JSON (stdout).
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

from bench.collections import corpus, write_synthetic_splade_index
from bench.run import figure
from lexlens.analysis.collections.store import open_index
from lexlens.analysis.export.export import export_index
from lexlens.analysis.systems.engine_sweep import SweepOptions, engine_sweep

ITEMS = 100_000
QUERIES = 200
N_POSTINGS = 2_000
QUERY_CUTS = (1, 2, 3, 5, 8, 13, 21, 1000)
HEAP_FACTOR = 0.9


def run(items: int = ITEMS, queries: int = QUERIES) -> list[dict]:
    """The sweep's figures: accuracy@10 per query_cut (latency and reasons in details)."""
    folder = Path(tempfile.mkdtemp(prefix="lexlens-bench-engine-"))
    try:
        write_synthetic_splade_index(folder / "ix", items, timeout=3600)
        ix = open_index(folder / "ix")
        texts = {f"q{n}": " ".join(t.split()[:12]) for n, t in enumerate(corpus(queries))}
        exported = export_index(ix, folder / "ex", format="seismic", queries=texts)
        (queries_file,) = [name for name in exported.written if name.startswith("queries")]
        term_id = {w: i for i, w in enumerate(ix.vocab)}
        vectors = {}
        for line in (Path(exported.out) / queries_file).open():
            q = json.loads(line)
            v = np.zeros(len(ix.vocab))
            for term, w in q["vector"].items():
                v[term_id[term]] = w
            vectors[q["id"]] = v
        options = SweepOptions.of(
            sweep="seismic",
            sweep_query_cuts=QUERY_CUTS,
            sweep_n_postings=N_POSTINGS,
            sweep_heap_factor=HEAP_FACTOR,
        )
        sweep = engine_sweep(ix, vectors, None, options)
        exact_us = sweep.exact.latency_us
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
        for p in sweep.settings:
            reasons = {s["reason"]: s["items"] for s in p.reasons}
            out.append(
                figure(
                    f"engine_sweep_seismic_query_cut_{p.query_cut}_accuracy_at_10",
                    p.accuracy,
                    "fraction",
                    measured_with=f"Seismic n_postings={N_POSTINGS}, query_cut={p.query_cut}, "
                    f"heap_factor={HEAP_FACTOR}, one query at a time, against the exact top 10",
                    details={
                        "latency_us": p.latency_us,
                        "exact_latency_us": exact_us,
                        "build_s": sweep.build_seconds,
                        "lost": p.lost,
                        "reasons": reasons,
                    },
                )
            )
            print(
                f"query_cut {p.query_cut:>5}: accuracy@10 {p.accuracy:.4f}, "
                f"{p.latency_us:8.1f} µs (exact {exact_us:.1f} µs); lost by reason {reasons}",
                file=sys.stderr,
            )
        return out
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    print(json.dumps(run(int(sys.argv[1]) if len(sys.argv) > 1 else ITEMS), indent=1))
