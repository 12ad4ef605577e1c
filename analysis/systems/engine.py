"""What another engine serves of a collection, against Lexlens's exact ranking of it: an
exported collection (Anserini's integer impacts, a Seismic run) searched elsewhere and read
back as a run, paired with the collection's exact ranking at the same gate and encoder.

Per query: ``overlap@10`` (the items both top 10s hold, over the shorter top 10's length —
10 unless a ranking holds fewer), the items of the exact top 10 the run lost, and the
largest score change that quantisation causes: the run's scores are on the engine's own
scale (Anserini multiplies weights by its scale and rounds them), so the scale is estimated
as the median of ``run score / exact score`` over every item both rankings hold with an
exact score above 0, and an item's change is ``|run score / scale − exact score|``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

#: The depth overlap is measured at.
DEPTH = 10
#: Queries listed per engine comparison (the worst overlap first).
LISTED = 100


def engine_comparison(
    exact: Mapping[str, Sequence[tuple[str, float]]],
    run: Mapping[str, Sequence[tuple[str, float]]],
    order: Sequence[str],
) -> dict:
    """The overlap, lost items and quantisation change of ``run`` against ``exact`` (both
    {query: [(item, score), …]} best first) over the queries of ``order``."""
    ratios = []
    for q in order:
        scores = dict(exact.get(q, []))
        ratios += [s / scores[d] for d, s in run.get(q, []) if scores.get(d, 0) > 0]
    scale = float(np.median(ratios)) if ratios else None
    rows, largest = [], (None, None, None)
    for q in order:
        top_e = [d for d, _ in exact.get(q, [])[:DEPTH]]
        top_r = [d for d, _ in run.get(q, [])[:DEPTH]]
        shorter = min(DEPTH, max(len(top_e), len(top_r)))
        overlap = len(set(top_e) & set(top_r)) / shorter if shorter else 1.0
        change = None
        if scale:
            scores = dict(exact.get(q, []))
            changes = [abs(s / scale - scores[d]) for d, s in run.get(q, []) if d in scores]
            change = max(changes) if changes else None
            if change is not None and (largest[0] is None or change > largest[0]):
                largest = (change, q, None)
        rows.append(
            {
                "query_id": q,
                "overlap": overlap,
                "lost": [d for d in top_e if d not in top_r],
                "largest_change": change,
            }
        )
    overlaps = [r["overlap"] for r in rows]
    return {
        "queries": len(rows),
        "mean_overlap": float(np.mean(overlaps)) if overlaps else None,
        "full_overlap": sum(1 for o in overlaps if o == 1.0),
        "scale": scale,
        "largest_change": largest[0],
        "largest_change_query": largest[1],
        "per_query": sorted(rows, key=lambda r: (r["overlap"], r["query_id"]))[:LISTED],
    }
