"""Search with reasons at the ranking's speed: ``search_index`` (the query encoded, the
collection ranked, every hit's metadata read and its score decomposed into the terms that
make it) against the query's encoding plus its exact ranking alone, on a synthetic
splade-tiny index of 1,000,000 items with a short text each, measured side by side in one
process, one thread.

The synthetic items are :func:`bench.collections.synthetic_rows` (about 100 Zipf-like
non-zeros over splade-tiny's 30,522 terms), each with a text of 14 words, so a hit's
metadata is read from the index's stored records as a real collection's would be.
``LEXLENS_BENCH_SEARCH_INDEX`` names such an index built already (it is then kept).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench.run import child_run, figure

ITEMS = 1_000_000
#: Queries timed (after 3 warm-up queries), each both ways, alternating.
QUERIES = 40


def write_texted_splade_index(folder: Path, items: int) -> None:
    """``items`` synthetic rows in splade-tiny's vocabulary, each with a short text (its
    id and the tokens of its first 12 terms), written as an index in a child process."""
    child_run(
        f"""
        from bench.collections import synthetic_rows
        from lexlens.analysis.collections.build_parts import encoder_entry
        from lexlens.analysis.collections.store_writer import write_index
        from lexlens.models import load_encoder
        splade = load_encoder("splade-tiny")
        def rows():
            for meta, cols, weights in synthetic_rows({items}):
                words = " ".join(splade.vocab[c] for c in cols[:12])
                meta["text"] = f"synthetic passage {{meta['id']}} {{words}}"
                yield meta, cols, weights
        write_index({str(folder)!r}, splade.vocab, rows(), encoder=encoder_entry(splade))
        _done({{}})
        """
    )


def _measured(index: Path) -> dict:
    """Per query, the CPU and wall time of the encoding plus the exact top 10, and of
    ``search_index`` at top 10 and top 100, alternating (one fresh process, one thread)."""
    return child_run(
        f"""
        import numpy as np
        from bench.collections import corpus
        from lexlens.analysis.collections.store import open_index
        from lexlens.analysis.retrieval.queries import QuerySpec
        from lexlens.analysis.retrieval.scorer import scorer_for
        from lexlens.analysis.search.options import SearchOptions
        from lexlens.analysis.search.search import search_index
        from lexlens.models import load_encoder
        ix = open_index({str(index)!r})
        enc = load_encoder("splade-tiny", device="cpu")
        defaults = SearchOptions()
        spec = QuerySpec(enc, defaults.query_mode, defaults.gate_k)
        top = scorer_for(ix).top
        texts = [" ".join(t.split()[:8]) for t in corpus(3000 + {QUERIES} + 3)[3000:]]
        def ranking(text):
            return top(spec.vector(text), 10)
        def reasons(text, n):
            return search_index(ix, enc, query=text, top=n)
        def timed(fn, *args):
            t, c = time.perf_counter(), time.process_time()
            out = fn(*args)
            return out, time.process_time() - c, time.perf_counter() - t
        for text in texts[:3]:
            ranking(text); reasons(text, 10); reasons(text, 100)
        times = {{"ranking": [], "top10": [], "top100": []}}
        same = 0
        for text in texts[3:]:
            (rows, _), *rank_t = timed(ranking, text)
            found, *top10_t = timed(reasons, text, 10)
            _, *top100_t = timed(reasons, text, 100)
            same += [h.row for h in found.results] == [int(r) for r in rows]
            for key, value in (("ranking", rank_t), ("top10", top10_t), ("top100", top100_t)):
                times[key].append(value)
        med = {{k: [1000 * float(np.median([v[i] for v in vs])) for i in (0, 1)]
                for k, vs in times.items()}}
        _done({{"cpu_ms": {{k: v[0] for k, v in med.items()}},
                "wall_ms": {{k: v[1] for k, v in med.items()}},
                "same_ranking": same, "queries": len(texts) - 3}})
        """,
        one_thread=True,
    )


def run() -> list[dict]:
    started = time.perf_counter()
    given = os.environ.get("LEXLENS_BENCH_SEARCH_INDEX")
    folder = Path(tempfile.mkdtemp(prefix="lexlens-bench-search-"))
    try:
        index = Path(given) if given else folder / "s1M"
        if not given:
            write_texted_splade_index(index, ITEMS)
        measured = _measured(index)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    cpu, wall = measured["cpu_ms"], measured["wall_ms"]
    details = {"items": ITEMS, **measured, "load_average": os.getloadavg()}
    how = (
        f"median CPU time of {measured['queries']} queries (8 words of stdlib docstrings), "
        f"each encoded and ranked, then searched with reasons, alternating, in one process, "
        f"one thread, on {ITEMS:,} synthetic items with texts; "
        f"{measured['same_ranking']}/{measured['queries']} searches listed the ranking's rows"
    )
    print(f"bench.search: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return [
        figure(
            "search_with_reasons_top10_over_ranking_1M",
            cpu["top10"] / cpu["ranking"],
            "x",
            goal=("<=", 1.5),
            measured_with=how + f" (wall {wall['top10']:.1f} ms against {wall['ranking']:.1f})",
            details=details,
        ),
        figure(
            "search_with_reasons_top100_ms_1M",
            cpu["top100"],
            "ms",
            measured_with=how.replace("searched with reasons", "searched with reasons at top 100"),
            details=details,
        ),
    ]
