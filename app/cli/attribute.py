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
from lexlens.analysis.core.inputs import read_texts
from lexlens.analysis.core.outputs import check_out_dir, write_files
from lexlens.app.cli.common import (
    add_common_args,
    add_options,
    emit,
    format_table,
    options_from_args,
    progress_printer,
)
from lexlens.models import load_encoder


def register(sub: argparse._SubParsersAction) -> None:
    """The ``attribute`` subcommand: its flags are :class:`AttributeOptions`'."""
    parser = sub.add_parser(
        "attribute", help="Integrated Gradients: words → product-quantiser sub-vector codes"
    )
    parser.add_argument("--encoder", required=True, help="registry name or a saved dense+PQ dir")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--text", help="one text")
    source.add_argument("--corpus", help="texts: .txt (one per line), .csv or .jsonl ('text')")
    add_options(parser, AttributeOptions)
    parser.add_argument("--out", help="also write an HTML + JSON + CSV report into this folder")
    parser.add_argument("--progress", action="store_true", help="progress lines on stderr")
    add_common_args(parser)
    parser.set_defaults(func=run)


def texts_of(args: argparse.Namespace) -> tuple[list[str], str]:
    """The texts of ``--text`` or ``--corpus`` and the name of their source."""
    if args.text is not None:
        return [args.text], "--text"
    return read_texts(args.corpus).texts, Path(args.corpus).name


def run(args: argparse.Namespace) -> None:
    """Attribute the texts; print the attribution (``--json``) or a table, write ``--out``."""
    # The report (for --out) with the attribution's options: no masking evaluation.
    options = ReportOptions.of(**options_from_args(AttributeOptions, args).to_dict())
    texts, source = texts_of(args)
    out = check_out_dir(args.out) if args.out else None
    report = attribution_report(
        load_encoder(args.encoder, device=args.device),
        texts,
        options=options,
        source=source,
        progress=progress_printer(args),
    )
    written = write_files(out, report.files()) if out is not None else {}
    emit(args, report.attribution, table(report.attribution, written))


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
        lines.append(format_table(rows, ["sub-vector", "code", "delta", "top words"]))
    if len(result.texts) > 20:
        lines.append(f"… {len(result.texts) - 20} more texts (use --json or --out)")
    lines.extend(f"{name:<18} {path}" for name, path in files.items())
    return "\n".join(lines)


def _words(top: list[tuple[str, float]]) -> str:
    return ", ".join(f"{word} {score:+.4f}" for word, score in top)
