"""Counterfactuals' "none" on a benchmark built for it: a brute force over the whole edit
space checks every failure the search says has no fix.

The benchmark: :func:`tests.counterfactual.test_edit_space.built_benchmark` (queries of
words of one item of the packaged BEIR sample and of other items, seeded) over the
sample's 223 items indexed with splade-tiny. Every failure's counterfactual at the default
budget (3 edits, 200 model calls); each *none exists* is searched again by the test's
independent brute force (every candidate up to 3 edits encoded by the encoder directly and
ranked with numpy), each fix said to be the shortest checked for a shorter one, each
*none found* its space counted. Figures: FlipRate, its upper bound, the exhaustive share,
the disagreements (goal 0) and the median seconds per failure.

At scale (:func:`run_large`): the same built queries over the sample's 223 texts among
synthetic items (as :mod:`bench.counterfactual` makes them) up to 100,000 items; every
failure's counterfactual at the default budget: the median seconds per failure (wall time,
the search and its verification) and the exhaustive share.
"""

from __future__ import annotations

import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.counterfactual import build_sample_among_synthetic
from bench.run import figure
from lexlens.analysis.collections.indexing import build_index
from lexlens.analysis.collections.store import open_index
from lexlens.analysis.counterfactual.evaluation import failures_counterfactuals
from lexlens.analysis.evaluation.evaluate import evaluate_benchmark
from lexlens.models import load_encoder
from tests.counterfactual.test_edit_space import BEIR, built_benchmark, check_failures

QUERIES = 700
SEED = 5
ITEMS = 100_000
LARGE_QUERIES = 300


def run() -> list[dict]:
    """Both: the brute-force check and the figures at scale."""
    return run_check() + run_large()


def run_check(queries: int = QUERIES, max_calls: int = 200) -> list[dict]:
    """The brute-force check on ``queries`` built queries (see the module docstring)."""
    splade = load_encoder("splade-tiny", device="cpu")
    folder = Path(tempfile.mkdtemp(prefix="lexlens-bench-space-"))
    try:
        build_index(splade, BEIR, folder / "ix")
        index = open_index(folder / "ix")
        texts, qrels = built_benchmark(queries, SEED)
        evaluation = evaluate_benchmark(index, queries=texts, qrels=qrels, query_encoder=splade)
        started = time.perf_counter()
        found = failures_counterfactuals(
            index, evaluation, query_encoder=splade, max_calls=max_calls
        )
        search_s = time.perf_counter() - started
        started = time.perf_counter()
        checked = check_failures(index, splade, found.failures)
        brute_s = time.perf_counter() - started
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    s = found.summary
    seconds = [r.text.seconds + r.terms.seconds for r in found.failures]
    details = {
        "queries": queries,
        "failures": s.tried,
        "headline": s.flip_rate_text(),
        "flip_rate": s.flip_rate,
        "flip_rate_upper": s.flip_rate_upper,
        "exhaustive_share": s.exhaustive_share,
        "found": s.found,
        "shortest_proven": s.shortest_proven,
        "none_exists": s.none_exists,
        "none_found": s.none_found,
        "by_side": s.by_side,
        "checked_by_brute_force": checked["checked"],
        "disagreements": checked["disagreements"],
        "search_s": round(search_s, 1),
        "brute_force_s": round(brute_s, 1),
        "median_s_per_failure": statistics.median(seconds) if seconds else None,
    }
    how = (
        f"{queries} built queries ({s.tried} failures) over the BEIR sample's 223 items, "
        f"splade-tiny, max_edits 3, max_calls {max_calls}; brute force of tests/counterfactual/"
        "test_edit_space.py"
    )
    return [
        figure(
            "counterfactual_none_exists_disagreements",
            len(checked["disagreements"]),
            "failures",
            goal=("<=", 0),
            measured_with=how,
            details=details,
        ),
        figure(
            "counterfactual_exhaustive_share",
            s.exhaustive_share,
            "share",
            goal=(">=", 0.9),
            measured_with=how,
            details=details,
        ),
    ]


def run_large(items: int = ITEMS, queries: int = LARGE_QUERIES, prefix: str = "") -> list[dict]:
    """Every failure's counterfactual over ``items`` items (see the module docstring); the
    figures' names say the size (``100k``) after ``prefix``."""
    folder = Path(tempfile.mkdtemp(prefix="lexlens-bench-space-large-"))
    try:
        build_sample_among_synthetic(folder / "ix", items)
        splade = load_encoder("splade-tiny", device="cpu")
        index = open_index(folder / "ix")
        texts, qrels = built_benchmark(queries, SEED)
        evaluation = evaluate_benchmark(index, queries=texts, qrels=qrels, query_encoder=splade)
        started = time.perf_counter()
        found = failures_counterfactuals(index, evaluation, query_encoder=splade)
        wall = time.perf_counter() - started
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    s = found.summary
    details = {
        "items": items,
        "queries": queries,
        "failures": s.tried,
        "headline": s.flip_rate_text(),
        "flip_rate": s.flip_rate,
        "flip_rate_upper": s.flip_rate_upper,
        "exhaustive_share": s.exhaustive_share,
        "none_exists": s.none_exists,
        "none_found": s.none_found,
        "by_side": s.by_side,
        "mean_model_calls": s.mean_model_calls,
        "total_wall_s": round(wall, 1),
    }
    how = (
        f"{queries} built queries ({s.tried} failures) over {items:,} items (the BEIR "
        "sample's 223 texts + synthetic), splade-tiny, max_edits 3, max_calls 200, wall time "
        "per failure (text + term level), the machine shared"
    )
    size = f"{items // 1000}k" if items >= 1000 else str(items)
    return [
        figure(
            f"{prefix}counterfactual_per_failure_{size}_items_median_s",
            s.median_seconds,
            "s",
            goal=("<=", 2.0),
            measured_with=how,
            details=details,
        ),
        figure(
            f"{prefix}counterfactual_exhaustive_share_{size}_items",
            s.exhaustive_share,
            "share",
            goal=(">=", 0.9),
            measured_with=how,
            details=details,
        ),
    ]


if __name__ == "__main__":
    if sys.argv[1:2] == ["large"]:
        size = int(sys.argv[2]) if len(sys.argv) > 2 else ITEMS
        print(json.dumps(run_large(size), indent=1))
    else:
        queries = int(sys.argv[1]) if len(sys.argv) > 1 else QUERIES
        calls = int(sys.argv[2]) if len(sys.argv) > 2 else 200
        print(json.dumps(run_check(queries, calls), indent=1))
