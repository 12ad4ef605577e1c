"""Compare on a stored collection: two gates of a 3,000-text collection, then a second query.

A 3,000-text collection (standard-library docstring paragraphs, :func:`bench.collections.
corpus`) is indexed with splade-tiny at gate 768 and compared with itself re-gated at 64,
with a query (``compare_indexes``, the encoder loaded first, as a page's job holds it); then
a second query on the same two sides. Beside them, in the same run, the old path: the code
of commit :data:`OLD_COMMIT` (before stored collections were read instead of re-encoded),
taken from this repository with ``git archive`` and run in a fresh process on the same index
and queries — it encodes every text again (its own tokens for the re-gate, its tokens for
each side's deviation) and recomputes everything for the second query. The two paths'
documents are compared number by number (largest relative difference in the details).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from bench.collections import corpus
from bench.run import ROOT, child_run, figure

TEXTS = 3000
ENCODER = "splade-tiny"
GATES = (768, 64)
QUERIES = ("read lines from a file", "compare two strings", "start a thread", "parse a date")
#: The last commit whose Compare encoded every stored text again (the old path).
OLD_COMMIT = "f2d4ca2aedc84942a292de88db74d23a522a3f51"

OLD_PATH = """
import sys, time, json
sys.path.insert(0, {tree!r})
import lexlens
assert lexlens.__file__.startswith({tree!r}), lexlens.__file__
from lexlens.models import load_encoder
from lexlens.analysis.compare.compare_collections import compare_indexes
encoder = load_encoder({encoder!r}, device="cpu")
out = {{"seconds": [], "cpu": [], "documents": []}}
for query in {queries!r}:
    start, cpu = time.perf_counter(), time.process_time()
    result = compare_indexes({index!r}, encoder_a=encoder, gate_k={gates!r}, query=query)
    out["seconds"].append(time.perf_counter() - start)
    out["cpu"].append(time.process_time() - cpu)
    out["documents"].append(result.to_dict())
_done(out)
"""


def _build(folder: Path, encoder) -> Path:
    """Index :data:`TEXTS` real texts at gate 768; returns the index folder."""
    from lexlens.analysis.collections.indexing import build_index

    source = folder / "texts.jsonl"
    source.write_text(
        "".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(corpus(TEXTS)))
    )
    build_index(encoder, source, folder / "ix3k", gate_k=GATES[0])
    return folder / "ix3k"


def _old_tree(folder: Path) -> Path | None:
    """The old path's code (``git archive`` of :data:`OLD_COMMIT`) as a ``lexlens`` package
    in ``folder``; ``None`` when this is not a git checkout holding that commit."""
    tree = folder / "old"
    (tree / "lexlens").mkdir(parents=True)
    try:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", OLD_COMMIT], capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", str(tree / "lexlens")], input=archive.stdout, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return tree


def _largest_difference(new: dict, old: dict) -> float | None:
    """The largest relative difference between two documents' numbers (same paths only)."""

    def numbers(value, path=""):
        if isinstance(value, dict):
            for k, v in value.items():
                yield from numbers(v, f"{path}.{k}")
        elif isinstance(value, list):
            for i, v in enumerate(value):
                yield from numbers(v, f"{path}[{i}]")
        elif isinstance(value, float):
            yield path, value

    left, right = dict(numbers(new["collection"])), dict(numbers(old["collection"]))
    shared = left.keys() & right.keys()
    if not shared:
        return None
    return max(abs(left[p] - right[p]) / max(abs(right[p]), 1e-12) for p in shared)


def _new_path(index: Path, encoder) -> dict:
    """The first comparison (nothing cached) and each further query, timed."""
    from lexlens.analysis.compare.compare_collections import compare_indexes
    from lexlens.analysis.compare.side_cache import SIDE_CACHE

    SIDE_CACHE.clear()
    out: dict = {"seconds": [], "cpu": [], "documents": []}
    for query in QUERIES:
        start, cpu = time.perf_counter(), time.process_time()
        result = compare_indexes(index, encoder_a=encoder, gate_k=list(GATES), query=query)
        out["seconds"].append(time.perf_counter() - start)
        out["cpu"].append(time.process_time() - cpu)
        out["documents"].append(result.to_dict())
    return out


def run() -> list[dict]:
    from lexlens.models import load_encoder

    folder = Path(tempfile.mkdtemp(prefix="lexlens-bench-compare-"))
    try:
        encoder = load_encoder(ENCODER, device="cpu")
        index = _build(folder, encoder)
        new = _new_path(index, encoder)
        tree = _old_tree(folder)
        old = None
        if tree is not None:
            old = child_run(
                OLD_PATH.format(
                    tree=str(tree),
                    encoder=ENCODER,
                    index=str(index),
                    gates=list(GATES),
                    queries=list(QUERIES[:2]),
                )
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    later = min(new["seconds"][1:])
    details = {
        "texts": TEXTS,
        "encoder": ENCODER,
        "gate_k": list(GATES),
        "queries": list(QUERIES),
        "new_seconds": new["seconds"],
        "new_cpu_seconds": new["cpu"],
        "old_commit": OLD_COMMIT,
        "old_seconds": None if old is None else old["seconds"],
        "old_cpu_seconds": None if old is None else old["cpu"],
        "largest_relative_difference_to_old": None
        if old is None
        else [
            _largest_difference(n, o)
            for n, o in zip(new["documents"], old["documents"], strict=False)
        ],
    }
    old_note = "" if old is not None else " (old path skipped: no git checkout holding it)"
    return [
        figure(
            "compare_two_gates_3000_texts",
            new["seconds"][0],
            "s",
            goal=("<=", 5.0),
            measured_with="compare_indexes of a 3,000-text splade-tiny collection at gate 768 "
            "against itself re-gated at 64, with a query, nothing cached, the encoder loaded; "
            f"the old path (commit {OLD_COMMIT[:7]}) on the same index in the same run" + old_note,
            details={
                **details,
                "old_first_seconds": None if old is None else old["seconds"][0],
                "speedup": None if old is None else old["seconds"][0] / new["seconds"][0],
            },
        ),
        figure(
            "compare_second_query_3000_texts",
            later,
            "s",
            goal=("<=", 1.0),
            measured_with="the same two sides with another query (best of "
            f"{len(QUERIES) - 1} queries; statistics reused), beside the old path's second "
            "query, which recomputed everything" + old_note,
            details={
                **details,
                "old_second_seconds": None if old is None else old["seconds"][1],
                "speedup": None if old is None else old["seconds"][1] / later,
            },
        ),
    ]
