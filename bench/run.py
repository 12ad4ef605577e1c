"""``make bench``: run every benchmark once, side by side, and write one JSON file.

Each module in ``BENCHES`` has ``run() -> list[dict]``; each dict is one *figure*, built with
:func:`figure` so that every number is written with its goal beside it and whether it is met.
The machine is shared and noisy, so goals are stated on same-run ratios or on wall times
measured the way a user meets them, never compared with numbers from another run.

A figure (JSON object; ``figure()`` builds and checks it)::

    {
      "name": "cold_start_to_first_word_cloud",   # unique, snake_case
      "value": 6.4,                # the measured number (float), null when it was not measured
      "unit": "s",                 # "s", "x" (a ratio), "texts/s", "fraction", "MB", ...
      "goal": {"op": "<=", "value": 8.0},   # op is one of "<", "<=", ">", ">="; or null
      "met": true,                 # value op goal; null when there is no goal or no value
      "measured_with": "median of 3 fresh processes ...",   # how, in one sentence
      "details": {...}             # optional: inputs, raw timings, floors, explanations
    }

The output file is ``{"machine": {...}, "runs": [...], "results": [figure, ...], "summary":
{...}}``; the summary counts goals met and lists the names of those missed. ``--only M…
--update`` re-runs some modules and keeps the others' figures; ``runs`` then lists each run
(start, machine, load average) with the modules whose figures came from it. An entry from an
older module without ``value``/``goal`` is kept under ``details`` with ``goal: null`` and a
warning, so every module keeps working while it moves to this shape.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import platform
import subprocess
import sys
import textwrap
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCHES = [
    "bench.text",
    "bench.images",
    "bench.attribution",
    "bench.coldstart",
    "bench.collections",
    "bench.vector_import",
    "bench.search",
    "bench.evaluation",
    "bench.systems",
    "bench.deviation_store",
    "bench.compare_store",
    "bench.doc_gates",
    "bench.counterfactual",
    "bench.counterfactual_space",
    "bench.faithfulness",
]

OPS: dict[str, Callable[[float, float], bool]] = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}
KEYS = ("name", "value", "unit", "goal", "met", "measured_with")


CHILD_PRELUDE = """
import json, threading, time
_peak = {"anon": 0}
def _status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0
def _watch():
    while True:
        try:
            _peak["anon"] = max(_peak["anon"], _status("RssAnon"))
        except OSError:
            return
        time.sleep(0.05)
threading.Thread(target=_watch, daemon=True).start()
def _done(result):
    result["peak_rss_mb"] = _status("VmHWM") / 1024
    result["peak_anon_mb"] = max(_peak["anon"], _status("RssAnon")) / 1024
    print(json.dumps(result))
"""


#: Code a child runs first to hold OpenMP, MKL and OpenBLAS to one thread (before any loads).
ONE_THREAD = """
import os
for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_name] = "1"
"""


def child_run(code: str, timeout: float = 3600, *, one_thread: bool = False) -> dict:
    """Run ``code`` in a fresh Python that ends by calling ``_done(result_dict)``; returns that
    dict with the child's peak RSS and peak anonymous memory (MB). ``one_thread``: the child's
    OpenMP and BLAS libraries held to one thread (:data:`ONE_THREAD`).

    The peak is ``VmHWM`` of the child's own address space, which starts empty at ``exec``.
    ``ru_maxrss`` would not do: Linux carries it across ``fork`` + ``exec``, so a child of a
    large benchmark process reports at least its parent's size.
    """
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            (ONE_THREAD if one_thread else "") + CHILD_PRELUDE + textwrap.dedent(code),
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    if proc.returncode != 0:
        raise RuntimeError(f"bench child failed: {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def timed(fn: Callable[[], object], *, repeat: int = 3) -> float:
    """Best wall time of ``repeat`` calls (seconds): the least disturbed measurement."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def figure(
    name: str,
    value: float | None,
    unit: str,
    *,
    goal: tuple[str, float] | None = None,
    measured_with: str,
    details: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One result in the shape documented above; ``met`` is computed here, never by hand.

    ``goal=("<=", 8.0)`` reads "value ≤ 8.0". A value that is NaN or infinite is stored as
    ``null`` (JSON has no NaN) and its goal as not met.
    """
    if goal is not None and goal[0] not in OPS:
        raise ValueError(f"goal operator must be one of {sorted(OPS)}, not {goal[0]!r}")
    if value is not None:
        value = float(value)
        if not math.isfinite(value):
            value = None
    met: bool | None = None
    if goal is not None and value is not None:
        met = OPS[goal[0]](value, float(goal[1]))
    elif goal is not None:
        met = False if "skipped" not in measured_with else None
    return {
        "name": name,
        "value": value,
        "unit": unit,
        "goal": None if goal is None else {"op": goal[0], "value": float(goal[1])},
        "met": met,
        "measured_with": measured_with,
        "details": _finite(details or {}),
    }


def _finite(obj: Any) -> Any:
    """``obj`` with NaN/Infinity replaced by None, tuples as lists (strict JSON)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalars
        return _finite(obj.item())
    return obj


def normalise(entry: dict[str, Any], module: str) -> dict[str, Any]:
    """A module's entry in the figure shape (older free-form entries are wrapped)."""
    if all(k in entry for k in KEYS):
        return {**entry, "details": _finite(entry.get("details", {})), "module": module}
    print(
        f"bench: {module}: entry {entry.get('name')!r} has no value/goal (see bench/run.py)",
        file=sys.stderr,
    )
    rest = {k: v for k, v in entry.items() if k != "name"}
    return {
        "name": entry.get("name", module),
        "value": None,
        "unit": "",
        "goal": None,
        "met": None,
        "measured_with": "free-form entry (no goal stated)",
        "details": _finite(rest),
        "module": module,
    }


def summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    with_goal = [r for r in results if r["goal"] is not None]
    return {
        "figures": len(results),
        "with_goal": len(with_goal),
        "met": sum(r["met"] is True for r in with_goal),
        "missed": [r["name"] for r in with_goal if r["met"] is False],
        "not_measured": [r["name"] for r in with_goal if r["met"] is None],
    }


def table(results: list[dict[str, Any]]) -> str:
    """One line per figure: value, goal, met — what a reader checks first."""
    lines = []
    for r in results:
        value = "—" if r["value"] is None else f"{r['value']:.4g} {r['unit']}".strip()
        goal = "" if r["goal"] is None else f"goal {r['goal']['op']} {r['goal']['value']:g}"
        met = {True: "met", False: "NOT MET", None: ""}[r["met"]]
        lines.append(f"{r['name']:<48} {value:>14}  {goal:<14} {met}")
    return "\n".join(lines)


def machine() -> dict[str, Any]:
    import torch

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "cpus": os.cpu_count(),
        "cuda": torch.cuda.is_available(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def _updated(before: dict[str, Any], now: dict[str, Any], ran: list[str]) -> dict[str, Any]:
    """``before``'s figures with those of the modules in ``ran`` replaced by ``now``'s, in
    the order of ``BENCHES``; the runs each figure came from listed in ``runs``."""
    kept = [r for r in before.get("results", []) if r.get("module") not in ran]
    order = {name: i for i, name in enumerate(BENCHES)}
    merged = sorted([*kept, *now["results"]], key=lambda r: order.get(r.get("module"), len(order)))
    earlier = before.get("runs") or [  # a file written before runs were listed: one run
        {**before.get("machine", {}), "modules": sorted({r.get("module") for r in kept})}
    ]
    runs = [{**r, "modules": [m for m in r.get("modules", []) if m not in ran]} for r in earlier]
    return {**now, "runs": [r for r in runs if r["modules"]] + now["runs"], "results": merged}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="bench/results.json")
    parser.add_argument("--only", nargs="*", help="module names to run (default: all)")
    parser.add_argument(
        "--update",
        action="store_true",
        help="keep the other modules' figures already in --out (each run is listed in 'runs')",
    )
    args = parser.parse_args(argv)

    results: list[dict[str, Any]] = []
    failed: list[str] = []
    ran: list[str] = []
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for name in BENCHES:
        if args.only and name.split(".")[-1] not in args.only and name not in args.only:
            continue
        ran.append(name)
        print(f"bench: {name} …", file=sys.stderr, flush=True)
        try:
            entries = importlib.import_module(name).run()
        except Exception:  # one broken module must not hide every other figure
            traceback.print_exc()
            failed.append(name)
            continue
        results.extend(normalise(e, name) for e in entries)
    run = {"started": started, "modules": ran, **machine()}
    doc = {"machine": run, "runs": [run], "results": results}
    if args.update and Path(args.out).is_file():
        doc = _updated(json.loads(Path(args.out).read_text(encoding="utf-8")), doc, ran)
    doc["summary"] = summary(doc["results"])
    if failed:
        doc["summary"]["failed_modules"] = failed
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(doc, indent=2, allow_nan=False) + "\n"
    Path(args.out).write_text(text, encoding="utf-8")
    print(table(results))
    print(f"bench: wrote {args.out}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
