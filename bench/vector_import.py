"""Encoded corpora brought in: ``lexlens index --vectors`` on an Anserini JsonVectorCollection.

The file: synthetic items in splade-tiny's vocabulary (about 100 terms each, Zipf-like, as
:func:`bench.collections.synthetic_rows` draws them), their weights as integer impacts
(×100, as Pyserini's and the SPLADE repository's writers quantise them), each with a short
text, written with the standard library's ``json`` at :data:`SIZES` items. Each size is
imported in a fresh child held to one thread, without an encoder (the streaming path
alone; the parity check re-encodes a fixed 200 items whatever the size): items per second
of process CPU time against the floor of 50,000, and the child's peak RSS against
1.5 GB, the same at both sizes when memory is bounded. The smaller size is imported again
from a ``.jsonl.gz`` of the same lines (``gzip`` level 6), its decompression counted in
the CPU time, as its own figure.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

from bench.collections import synthetic_rows
from bench.run import child_run, figure

SIZES = (200_000, 1_000_000)
SCALE = 100


def write_collection(path: Path, items: int, vocab: list[str]) -> int:
    """``items`` synthetic items as a JsonVectorCollection at ``path``; its bytes."""
    with open(path, "w", encoding="utf-8") as handle:
        for meta, cols, weights in synthetic_rows(items):
            impacts = np.maximum(1, np.rint(weights * SCALE)).astype(int).tolist()
            vector = dict(zip((vocab[c] for c in cols.tolist()), impacts, strict=True))
            line = {"id": meta["id"], "contents": f"item {meta['id']}", "vector": vector}
            handle.write(json.dumps(line) + "\n")
    return path.stat().st_size


def _imported(source: Path, folder: Path) -> dict:
    """One import of ``source`` in a fresh child held to one thread: CPU and wall seconds,
    peak memory."""
    r = child_run(
        f"""
        import time
        from lexlens.analysis.collections.vector_import import import_vectors
        started, wall = time.process_time(), time.perf_counter()
        result = import_vectors(None, {str(source)!r}, {str(folder / "ix")!r},
                                scale={SCALE})
        _done({{"cpu_s": time.process_time() - started,
                "wall_s": time.perf_counter() - wall}})
        """,
        one_thread=True,
    )
    shutil.rmtree(folder / "ix", ignore_errors=True)
    return r


def run(sizes: tuple[int, ...] = SIZES) -> list[dict]:
    """Import speed and peak memory at each size (see the module docstring)."""
    vocab = child_run(
        """
        from lexlens.models import load_encoder
        _done({"vocab": list(load_encoder("splade-tiny").vocab)})
        """
    )["vocab"]
    folder = Path(tempfile.mkdtemp(prefix="lexlens-bench-import-"))
    measured = []
    try:
        for items in sizes:
            source = folder / f"vectors-{items}.jsonl"
            size = write_collection(source, items, vocab)
            measured.append({"items": items, "file_bytes": size, **_imported(source, folder)})
            if items == sizes[0]:
                packed = folder / f"vectors-{items}.jsonl.gz"
                with open(source, "rb") as raw, gzip.open(packed, "wb", compresslevel=6) as out:
                    shutil.copyfileobj(raw, out, 1 << 20)
                gzipped = {"items": items, "file_bytes": packed.stat().st_size}
                gzipped.update(_imported(packed, folder))
                packed.unlink()
            source.unlink()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    largest = measured[-1]
    sizes_text = ", ".join(f"{m['items']:,}" for m in measured)
    how = (
        f"lexlens index --vectors on a JsonVectorCollection of synthetic items (about 100 "
        f"terms each, integer impacts ×{SCALE}), no encoder, a fresh child held to one "
        f"thread; sizes {sizes_text}"
    )
    return [
        figure(
            "vector_import_items_per_cpu_s",
            largest["items"] / largest["cpu_s"],
            "items/s",
            goal=(">=", 50_000),
            measured_with=f"items over the import's process CPU time at "
            f"{largest['items']:,} items: {how}",
            details={"sizes": measured},
        ),
        figure(
            "vector_import_peak_rss_mb",
            max(m["peak_rss_mb"] for m in measured),
            "MB",
            goal=("<=", 1536),
            measured_with=f"the largest peak RSS of the import's child over the sizes: {how}",
            details={"sizes": measured},
        ),
        figure(
            "vector_import_gzip_items_per_cpu_s",
            gzipped["items"] / gzipped["cpu_s"],
            "items/s",
            goal=(">=", 50_000),
            measured_with=f"items over the import's process CPU time, decompression "
            f"included, of the {gzipped['items']:,}-item file as .jsonl.gz: {how}",
            details=gzipped,
        ),
    ]


if __name__ == "__main__":
    print(json.dumps(run(tuple(int(a) for a in sys.argv[1:]) or SIZES), indent=1))
