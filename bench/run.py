"""``make bench``: run every benchmark once, side by side, and write one JSON file.

Each module in ``BENCHES`` has ``run() -> list[dict]``; every entry names what it measured
and carries the ratios computed from measurements taken in this same run (the machine is
shared and noisy, so only same-run ratios are meaningful).
"""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import sys
import time
from pathlib import Path

BENCHES = ["bench.text", "bench.images", "bench.attribution"]


def timed(fn, *, repeat: int = 3) -> float:
    """Best wall time of ``repeat`` calls (seconds): the least disturbed measurement."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="bench/results.json")
    parser.add_argument("--only", nargs="*", help="module names to run (default: all)")
    args = parser.parse_args(argv)
    import torch

    results = []
    for name in BENCHES:
        if args.only and name.split(".")[-1] not in args.only and name not in args.only:
            continue
        print(f"bench: {name} …", file=sys.stderr, flush=True)
        results.extend(importlib.import_module(name).run())
    doc = {
        "machine": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "cuda": torch.cuda.is_available(),
        },
        "results": results,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
