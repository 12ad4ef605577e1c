"""A document-gate sweep without re-encoding: 4 gates of a 100,000-item stored collection.

The collection is synthetic (about 100 non-zeros per item, Zipf-like terms, as
:mod:`bench.collections` builds them), stored at gate 128 with 8 of each item's terms kept
as its own tokens. In one fresh child, for each document gate 64, 32, 16 and 8: the stored
vectors re-gated exactly (:func:`~lexlens.analysis.systems.systems.system_collection`, as
``lexlens evaluate --doc-gate-k`` re-gates them: top-k of the stored weights plus the
item's own tokens, nothing encoded) and its document frequencies and FLOPs against 200
synthetic queries (:mod:`lexlens.analysis.systems.efficiency`): the sweep, timed. Goal: at
most 10 s for the 4 gates, where a re-index would encode every item once per gate. Then,
outside the sweep's time, those queries' exact top 10 on each re-gated view (the one scorer;
``queries_s`` in the details: what evaluating each gate then costs).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from bench.run import child_run, figure

ITEMS = 100_000
STORED_GATE = 128
GATES = (64, 32, 16, 8)
QUERIES = 200
OWN_TOKENS = 8


def run(items: int = ITEMS) -> list[dict]:
    folder = Path(tempfile.mkdtemp(prefix="lexlens-bench-docgates-"))
    try:
        child_run(
            f"""
            import numpy as np
            from bench.collections import _vocab, synthetic_rows
            from lexlens.analysis.collections.store_writer import write_index
            rng = np.random.default_rng(5)
            def rows():
                for meta, cols, vals in synthetic_rows({items}):
                    own = rng.choice(cols, size=min({OWN_TOKENS}, cols.size), replace=False)
                    yield meta, cols, vals, own.astype(np.int32)
            write_index({str(folder / "ix")!r}, _vocab(), rows(),
                        encoder={{"name": "synthetic"}}, gate_k={STORED_GATE})
            _done({{}})
            """,
            timeout=3600,
        )
        measured = child_run(
            f"""
            import numpy as np
            import scipy.sparse as sp
            from bench.collections import synthetic_query
            from lexlens.analysis.collections.store import open_index
            from lexlens.analysis.deviation.flops import activation_counts, flops_between
            from lexlens.analysis.retrieval.scorer import scorer_for
            from lexlens.analysis.systems.efficiency import document_frequencies
            from lexlens.analysis.systems.systems import LEXLENS, System, system_collection
            path = {str(folder / "ix")!r}
            base = open_index(path)
            rng = np.random.default_rng(1)
            queries = [synthetic_query(rng) for _ in range({QUERIES})]
            query_counts = activation_counts(sp.csr_matrix(np.stack(queries)))
            per_gate = []
            sweep_s = 0.0
            for k in {list(GATES)!r}:
                t = time.perf_counter()
                opened = {{path: base}}
                view = system_collection(System(str(k), LEXLENS, path, 768, doc_gate_k=k), opened)
                regate_s = time.perf_counter() - t
                df = document_frequencies(view)
                flops = flops_between(query_counts, len(queries), df, len(view))
                gate_s = time.perf_counter() - t
                sweep_s += gate_s
                t = time.perf_counter()
                top_n = scorer_for(view).top
                for q in queries:
                    top_n(q, 10)
                per_gate.append({{"k": k, "nnz": int(view.indices.size), "flops": flops,
                                  "regate_s": regate_s, "gate_s": gate_s,
                                  "queries_s": time.perf_counter() - t}})
            _done({{"sweep_s": sweep_s, "gates": per_gate, "stored_nnz": int(base.nnz)}})
            """,
            timeout=3600,
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return [
        figure(
            "doc_gate_sweep_100k",
            measured["sweep_s"],
            "s",
            goal=("<=", 10.0),
            measured_with=f"wall time of {len(GATES)} document gates {list(GATES)} re-gated from "
            f"a {items:,}-item synthetic index stored at gate {STORED_GATE} (no encoding), "
            f"each with its document frequencies and FLOPs against {QUERIES} queries, summed, "
            "in one fresh process (each gate's query ranking timed apart, in the details)",
            details={
                "items": items,
                "stored_gate": STORED_GATE,
                "stored_nnz": measured["stored_nnz"],
                "gates": measured["gates"],
                "peak_rss_mb": measured.get("peak_rss_mb"),
            },
        )
    ]
