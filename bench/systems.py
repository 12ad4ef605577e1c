"""Comparing systems at scale: 1,000 text queries × 3 systems over a 1,000,000-item index.

The index is synthetic (about 100 non-zeros per item, as :mod:`bench.collections` builds
them) in splade-tiny's vocabulary, with splade-tiny as its encoder; the queries are 1,000
stdlib docstring sentences, each judged against a random item and the item its gate-768
ranking puts first (so measures vary). The three systems: the index at query gate 768, the
same index re-gated to 16, and an outside run (the gate-768 ranking with every query's top
10 reversed, written as a TREC file: it differs where it matters).

In one fresh child, side by side: evaluating the three systems
(:func:`~lexlens.analysis.systems.systems.evaluate_each`: encode, rank, measure, explain
failures, per system), and the comparison of what they returned
(:func:`~lexlens.analysis.systems.comparison.compare_evaluated`: the significance table with
10,000 bootstrap resamples and 10,000 sign assignments per comparison × measure, GeoRisk,
the largest wins and losses), then 20 queries explained
(:func:`~lexlens.analysis.systems.comparison.explain_many`: each pair's 10 largest differences
in nDCG@10). Goal: the comparison adds at most 20 % to the evaluation's time.
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


def run(items: int = ITEMS, queries: int = QUERIES) -> list[dict]:
    folder = Path(tempfile.mkdtemp(prefix="lexlens-bench-systems-"))
    started = time.perf_counter()
    try:
        write_synthetic_splade_index(folder / "ix", items, timeout=7200)
        r = child_run(
            f"""
            import numpy as np
            from bench.collections import corpus
            from lexlens.analysis.evaluation.evaluate import evaluate
            from lexlens.analysis.evaluation.options import EvaluationOptions
            from lexlens.analysis.datasets.trec import run_text
            from lexlens.analysis.collections.store import open_index
            from lexlens.analysis.systems.comparison import compare_evaluated, explain_many
            from lexlens.analysis.systems.options import ComparisonOptions
            from lexlens.analysis.systems.systems import (
                Benchmark, SystemsSpec, evaluate_each, systems_of)
            ix = open_index({str(folder / "ix")!r})
            texts = [" ".join(t.split()[:12]) for t in corpus({queries})]
            ids = [str(i) for i in ix.column("id")]
            rng = np.random.default_rng(3)
            queries = {{f"q{{n}}": t for n, t in enumerate(texts)}}
            qrels = {{q: {{ids[int(rng.integers(len(ids)))]: 1}} for q in queries}}
            first = evaluate(ix, queries, qrels, top=100)  # warm-up, and the outside run
            for q, pairs in first.run.items():
                if pairs:
                    qrels[q][pairs[0][0]] = 1
            outside = {{q: list(reversed(p[:10])) + p[10:] for q, p in first.run.items()}}
            outside = {{q: [(d, float(len(p) - i)) for i, (d, _) in enumerate(p)]
                       for q, p in outside.items()}}
            path = {str(folder / "outside.trec")!r}
            open(path, "w").write(run_text(outside, tag="outside"))
            evaluation = EvaluationOptions(top=100)
            spec = SystemsSpec([{str(folder / "ix")!r}], runs=[path], names=["outside"],
                               gate_ks=[768, 16])
            systems = systems_of(spec, evaluation.gate_k)
            benchmark = Benchmark(queries, qrels)
            t = time.perf_counter()
            evaluated = evaluate_each(systems, benchmark, evaluation, None, None)
            evaluate_s = time.perf_counter() - t
            t = time.perf_counter()
            result = compare_evaluated(evaluated, benchmark, evaluation,
                                       ComparisonOptions(explain=0), None, None)
            statistics_s = time.perf_counter() - t
            wanted = []
            for a, b in result.pairs():  # each pair's 10 largest |Δ nDCG@10|
                ranked = sorted(result.per_query, key=lambda q: -abs(
                    q["values"][b]["nDCG@10"] - q["values"][a]["nDCG@10"]))
                wanted += [(a, b, q["id"]) for q in ranked[:10]]
            t = time.perf_counter()
            why = explain_many(result, wanted, None)
            why_s = time.perf_counter() - t
            compare_s = statistics_s + why_s
            _done({{"evaluate_s": evaluate_s, "compare_s": compare_s,
                    "statistics_s": statistics_s, "why_s": why_s, "explained": len(why),
                    "comparisons": len(result.table),
                    "systems": [s.name for s in result.systems],
                    "means": result.means}})
            """,
            timeout=14400,
        )
        details = {"items": items, "queries": queries, **r}
        return [
            figure(
                "systems_comparison_over_evaluation",
                r["compare_s"] / r["evaluate_s"],
                "x",
                goal=("<=", 0.20),
                measured_with=f"{queries:,} queries × 3 systems over {items:,} items, one "
                "child: the comparison (significance table with 10,000 resamples and 10,000 "
                "sign assignments per comparison × measure, GeoRisk, wins and losses, "
                f"{r['explained']} queries explained) over the time of evaluating the three "
                "systems (encode, rank top 100, measure, explain failures)",
                details=details,
            ),
        ]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        print(f"bench.systems: {time.perf_counter() - started:.0f} s", file=sys.stderr)
