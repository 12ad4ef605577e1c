"""The faithfulness of 300 failures' explanations, measured by re-encoding.

A collection of 1,000 real English texts (standard-library docstring paragraphs, indexed
with splade-tiny) and 300 short queries (the first 4–9 words of other paragraphs), each
judged relevant to a seeded random item, so nearly every query fails. In one fresh child:
``evaluate`` finds the failures, then ``failures_faithfulness`` measures the first 300 with
the defaults (10 random draws, curves to K = 5): every edited query of every failure — the
explanation's deletion, the random draws, both deletion curves — deduplicated and encoded
together in batches, each scored against its failure's two items only. The figure is the
process's CPU time (the machine is shared: wall time waits for other processes), the wall
time and load beside it.
Beside it, the peer a user would otherwise write: the same measurement encoding each edited
query alone (one model call per text), on the first 20 failures, per failure.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from bench.run import child_run, figure

ITEMS = 1_000
FAILURES = 300
ONE_AT_A_TIME = 20


def run(items: int = ITEMS, failures: int = FAILURES) -> list[dict]:
    folder = Path(tempfile.mkdtemp(prefix="lexlens-bench-faith-"))
    started = time.perf_counter()
    try:
        r = child_run(
            f"""
            import csv, os, random, time
            from bench.collections import corpus
            from lexlens.analysis.evaluation.evaluate import evaluate
            from lexlens.analysis.collections.indexing import build_index
            from lexlens.analysis.collections.store import open_index
            from lexlens.analysis.retrieval import queries as query_rule
            from lexlens.analysis.faithfulness.benchmark import failures_faithfulness
            from lexlens.models import load_encoder
            splade = load_encoder("splade-tiny")
            texts = corpus({items} + {failures} + 200)
            docs, rest = texts[:{items}], texts[{items}:]
            with open({str(folder / "items.csv")!r}, "w", newline="") as f:
                w = csv.writer(f); w.writerow(["id", "text"])
                w.writerows([f"d{{i}}", t] for i, t in enumerate(docs))
            build_index(splade, {str(folder / "items.csv")!r}, {str(folder / "ix")!r})
            ix = open_index({str(folder / "ix")!r})
            rng = random.Random(0)
            queries = {{f"q{{i}}": " ".join(t.split()[: rng.randint(4, 9)])
                        for i, t in enumerate(rest)}}
            qrels = {{q: {{f"d{{rng.randrange({items})}}": 1}} for q in queries}}
            ev = evaluate(ix, queries, qrels, query_encoder=splade, top=10)
            from dataclasses import replace
            ev = replace(ev, failures=ev.failures[:{failures}])
            import scipy.stats  # imported once per process; not the measure's work
            t, cpu = time.perf_counter(), time.process_time()
            found = failures_faithfulness(ix, ev, query_encoder=splade)
            batched, cpu = time.perf_counter() - t, time.process_time() - cpu
            load = os.getloadavg()[0]
            few = replace(ev, failures=ev.failures[:{ONE_AT_A_TIME}])
            t = time.perf_counter()
            failures_faithfulness(ix, few, query_encoder=splade)
            few_batched = time.perf_counter() - t
            query_rule.SPARSE_GROUP = 1
            t = time.perf_counter()
            alone = failures_faithfulness(ix, few, query_encoder=splade)
            one_by_one = time.perf_counter() - t
            s = found.summary
            _done({{"seconds": batched, "cpu": cpu, "load": load, "failures": len(ev.failures),
                   "measured": s.failures,
                   "skipped": s.skipped, "calls": s.model_calls, "few": few_batched,
                   "alone": one_by_one, "alone_calls": alone.summary.model_calls,
                   "summary": {{k: getattr(s, k) for k in ("comprehensiveness",
                               "random_comprehensiveness", "flip_rate", "random_flip_rate",
                               "aopc", "random_aopc", "beats_random", "wilcoxon_p")}}}})
            """
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    per_batched = r["few"] / ONE_AT_A_TIME
    per_alone = r["alone"] / ONE_AT_A_TIME
    return [
        figure(
            "faithfulness_of_300_failures",
            r["cpu"],
            "s",
            goal=("<=", 60.0),
            measured_with=f"process CPU time of failures_faithfulness over {r['failures']} "
            f"failures of a {items}-item splade-tiny collection (10 draws, K = 5), one fresh "
            "process (scipy.stats imported before)",
            details={
                "wall_s_measure": r["seconds"],
                "load_average_1min": r["load"],
                "measured": r["measured"],
                "skipped": r["skipped"],
                "edited_queries_encoded": r["calls"],
                "summary": r["summary"],
                "peak_rss_mb": r.get("peak_rss_mb"),
                "wall_s": round(time.perf_counter() - started, 1),
            },
        ),
        figure(
            "faithfulness_batched_vs_one_at_a_time",
            per_alone / per_batched,
            "x",
            goal=(">=", 2.0),
            measured_with=f"the first {ONE_AT_A_TIME} failures: each edited query encoded "
            "alone vs deduplicated and encoded in batches, same process, per failure",
            details={"batched_s_per_failure": per_batched, "alone_s_per_failure": per_alone},
        ),
    ]
