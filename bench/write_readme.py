"""Write bench/README.md from bench/results.json: every figure, its goal and whether it is met.

``make bench`` runs it after ``bench.run``; the page is never edited by hand (a test checks
the committed README equals what this script writes from the committed results.json).
``python -m bench.write_readme [--results FILE] [--scale-results FILE] [--out FILE]
[--check]``. When ``bench/results-scale.json`` exists (``make bench-scale`` writes it; its run
may take an hour, so ``make bench`` does not), its figures follow in a section of their own.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results.json"
SCALE_RESULTS = HERE / "results-scale.json"
README = HERE / "README.md"

INTRO = """# Benchmarks

Written by `bench/write_readme.py` from `bench/results.json` (do not edit by hand: `make bench`
measures and rewrites both; `python -m bench.write_readme` rewrites this page alone). Each
figure is measured the way a user meets it, with its goal beside it; the machine is shared, so
a goal is stated on a same-run ratio or a wall time, never against a number from another run.
`python -m bench.run --only MODULE… --update` re-runs some modules and keeps the others'
figures; the runs below say which run each module's figures came from. `bench/run.py`
documents the JSON shape.
"""


def _number(value: float | None, unit: str) -> str:
    """A figure's value with its unit, to four significant digits."""
    if value is None:
        return "not measured"
    return f"{value:.4g} {unit}".strip()


def _goal(goal: dict[str, Any] | None, unit: str) -> str:
    """A goal as 'op value unit', or '—' when the figure states none."""
    if goal is None:
        return "—"
    return f"{goal['op']} {goal['value']:g} {unit}".strip()


def _cell(text: object) -> str:
    """Text safe inside a Markdown table cell, on one line."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _run_line(run: dict[str, Any]) -> str:
    """One run: when it started, on what, under which load, and its modules."""
    load = run.get("load_average")
    load_text = ", ".join(f"{x:.2f}" for x in load) if load else "unknown"
    modules = ", ".join(f"`{m}`" for m in run.get("modules", [])) or "none"
    return (
        f"- {run.get('started', 'unknown start')}: {run.get('cpus', '?')} CPUs, "
        f"torch {run.get('torch', '?')} ({run.get('threads', '?')} threads), "
        f"CUDA {'yes' if run.get('cuda') else 'no'}, load average {load_text} — {modules}"
    )


def _figure_table(results: list[dict[str, Any]]) -> list[str]:
    """The figures as Markdown table rows, a header first."""
    lines = [
        "| figure | module | value | goal | met | measured with |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        met = {True: "yes", False: "**no**", None: "—"}[r.get("met")]
        lines.append(
            f"| `{r['name']}` | {_cell(r.get('module', ''))} | "
            f"{_cell(_number(r.get('value'), r.get('unit', '')))} | "
            f"{_cell(_goal(r.get('goal'), r.get('unit', '')))} | {met} | "
            f"{_cell(r.get('measured_with', ''))} |"
        )
    return lines


def _scale_section(scale: dict[str, Any]) -> list[str]:
    """The section of ``make bench-scale``'s figures: its run, its size, then the table."""
    run = scale.get("machine", {})
    after = run.get("load_average_after")
    summary = scale.get("summary", {})
    lines = [
        "## At MS MARCO scale (`make bench-scale`)",
        "",
        "Written from `bench/results-scale.json` (`python -m bench.scale`, documented in "
        "`bench/scale.py`): a synthetic collection with the sparsity of SPLADE on MS MARCO, "
        "imported through `lexlens index --vectors`, with PISA, scipy and Seismic beside it "
        "in the same run.",
        "",
        _run_line(run),
        f"- {run.get('items', 0):,} items, {run.get('queries', 0):,} queries"
        + (f"; load average after {', '.join(f'{x:.2f}' for x in after)}" if after else ""),
        "",
        f"{summary.get('met', 0)} of {summary.get('with_goal', 0)} goals met "
        f"({summary.get('figures', len(scale.get('results', [])))} figures).",
        "",
    ]
    return lines + _figure_table(scale.get("results", []))


def readme(doc: dict[str, Any], scale: dict[str, Any] | None = None) -> str:
    """The Markdown page of one results document (and of ``make bench-scale``'s, if any)."""
    results = doc.get("results", [])
    summary = doc.get("summary", {})
    lines = [INTRO, "## Runs", ""]
    lines += [_run_line(run) for run in doc.get("runs") or [doc.get("machine", {})]]
    lines += ["", "## Summary", ""]
    lines.append(
        f"{summary.get('met', 0)} of {summary.get('with_goal', 0)} goals met "
        f"({summary.get('figures', len(results))} figures)."
    )
    for key, label in (
        ("missed", "Missed"),
        ("not_measured", "Not measured"),
        ("failed_modules", "Modules that failed"),
    ):
        if summary.get(key):
            lines.append(f"{label}: " + ", ".join(f"`{name}`" for name in summary[key]) + ".")
    lines += ["", "## Figures", "", *_figure_table(results)]
    if scale is not None:
        lines += ["", *_scale_section(scale)]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write the README from the results, or with ``--check`` say whether it is current."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--scale-results", type=Path, default=SCALE_RESULTS)
    parser.add_argument("--out", type=Path, default=README)
    parser.add_argument("--check", action="store_true", help="exit 1 when the file differs")
    args = parser.parse_args(argv)
    scale = None
    if args.scale_results.is_file():
        scale = json.loads(args.scale_results.read_text(encoding="utf-8"))
    text = readme(json.loads(args.results.read_text(encoding="utf-8")), scale)
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
        if current != text:
            print(f"{args.out} is out of date: run python -m bench.write_readme", file=sys.stderr)
            return 1
        return 0
    args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
