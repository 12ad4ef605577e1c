"""``lexlens mot-eval``: the masking table of RepMoT ("Interpreting Dense Retrieval as Mixture
of Topics", Table 3) on a corpus.

Parses the arguments (the flags are the declared
:class:`~lexlens.analysis.attribution.options.MotOptions`), calls
:func:`lexlens.analysis.attribution.mot.mot_evaluate` and renders
the result (``--json``: exactly ``result.to_dict()``); ``--out`` writes ``result.files()``:
mot.json, the CSVs and an HTML view (the folder is checked before any work starts).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from lexlens.analysis.attribution.display import display_tables
from lexlens.analysis.attribution.mot import mot_evaluate
from lexlens.analysis.attribution.mot_result import MotResult
from lexlens.analysis.attribution.options import MotOptions
from lexlens.app.cli import common

COMMAND = common.Command(
    "MoT masking evaluation (RepMoT Table 3)",
    options=MotOptions,
    out="write mot.json, the CSVs and report.html into this folder",
    progress=True,
)


def add_flags(parser: argparse.ArgumentParser) -> None:
    """The encoder and the corpus."""
    common.add_encoder(parser, "a dense+PQ encoder (e.g. minilm-pq)")
    parser.add_argument("--corpus", required=True, help="texts: .txt, .csv or .jsonl ('text')")


def run(args: argparse.Namespace) -> None:
    """Run the masking evaluation; print it (``--json``) or its tables, write ``--out``."""
    options = common.options_from_args(MotOptions, args)
    result, written = common.run_on_texts(args, mot_evaluate, options)
    common.emit(args, result, table(result, written))


def table(result: MotResult, written: dict[str, Path]) -> str:
    """The masking table, the tests and the IG completeness; then the files written."""
    s = result.settings
    lines = [f"note: {n}" for n in result.notes]
    lines.append(
        f"{s['n_docs']} documents of {s['n_corpus']}, keep {s['keep']:.0%}, IG steps {s['steps']}, "
        f"mask [{s['mask'].upper()}] — mean ||d̂_i − f_i(mask(d))||² (lower is better)"
    )
    shown, tests = display_tables(result)
    lines.append(common.format_table(shown.to_numpy().tolist(), list(shown.columns)))
    lines.append("MoT vs baseline: Wilcoxon p, Benjamini–Hochberg q, share of documents MoT wins")
    lines.append(common.format_table(tests.to_numpy().tolist(), list(tests.columns)))
    conv = result.convergence()
    lines.append("IG completeness at the steps used: |delta_i| / |F_i(x) − F_i(x')|")
    lines.append(
        common.format_table(
            [
                [
                    f"M={r.m}",
                    f"{r.steps_min}–{r.steps_max}",
                    f"{r.relative_delta_mean:.2%}",
                    f"{r.relative_delta_max:.2%}",
                ]
                for r in conv.itertuples()
            ],
            ["M", "steps", "mean", "max"],
        )
    )
    lines.extend(f"{name:<22} {path}" for name, path in written.items())
    return "\n".join(lines)
