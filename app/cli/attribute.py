"""``lexlens attribute``: Integrated Gradients of a text's words onto each PQ sub-vector code.

Parses the arguments (the flags are the declared
:class:`~lexlens.analysis.attribution.options.AttributeOptions`), calls
:func:`~lexlens.analysis.attribution.report.attribution_report` and renders its attribution
(``--json``: exactly ``report.attribution.to_dict()``); ``--out`` also writes the report's
files, HTML + JSON + CSV (the folder is checked before any work starts).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from lexlens.analysis.attribution.attribution import AttributionResult
from lexlens.analysis.attribution.display import top_words
from lexlens.analysis.attribution.options import AttributeOptions, ReportOptions
from lexlens.analysis.attribution.report import attribution_report
from lexlens.app.cli import common

COMMAND = common.Command(
    "Integrated Gradients: words → product-quantiser sub-vector codes",
    options=AttributeOptions,
    out="also write an HTML + JSON + CSV report into this folder",
    progress=True,
)


def add_flags(parser: argparse.ArgumentParser) -> None:
    """The encoder and the texts."""
    common.add_encoder(parser, "registry name or a saved dense+PQ dir")
    common.add_texts(parser)


def run(args: argparse.Namespace) -> None:
    """Attribute the texts; print the attribution (``--json``) or a table, write ``--out``."""
    # The report (for --out) with the attribution's options: no masking evaluation.
    options = ReportOptions.of(**common.options_from_args(AttributeOptions, args).to_dict())
    report, written = common.run_on_texts(args, attribution_report, options)
    common.emit(args, report.attribution, table(report.attribution, written))


def table(result: AttributionResult, files: dict[str, Path]) -> str:
    """Per text: each sub-vector's code, delta and top words; then the files written."""
    lines = [f"note: {n}" for n in result.notes]
    lines.append(
        f"{result.encoder}: M = {result.m}, K = {result.k}, steps {result.settings['steps']}"
    )
    for a in result.texts[:20]:
        lines.append(f"text: {a.text[:100]}  ({a.steps} nodes)")
        rows = [
            [i, int(a.codes[i]), float(a.delta[r]), _words(top_words(a, i))]
            for r, i in enumerate(a.subvectors)
        ]
        rows.append(["global", "", float(a.global_delta), _words(top_words(a, None))])
        lines.append(common.format_table(rows, ["sub-vector", "code", "delta", "top words"]))
    if len(result.texts) > 20:
        lines.append(f"… {len(result.texts) - 20} more texts (use --json or --out)")
    lines.extend(f"{name:<18} {path}" for name, path in files.items())
    return "\n".join(lines)


def _words(top: list[tuple[str, float]]) -> str:
    return ", ".join(f"{word} {score:+.4f}" for word, score in top)
