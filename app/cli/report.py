"""``lexlens report``: a self-contained HTML report (+ JSON and CSV) for texts or a corpus.

A quantised, differentiable encoder (``minilm-pq`` or a saved dense+PQ folder) gets the
attribution report (IG per sub-vector, GlobalT, completeness, and with ``--mot`` the masking
evaluation); a lexical encoder gets a terms report. The command parses the arguments (the
flags are the declared :class:`~lexlens.analysis.attribution.options.ReportOptions`),
calls :func:`~lexlens.analysis.attribution.report.build_report`, writes ``result.files()`` into
``--out`` (checked before any work) and prints the file list, or ``result.to_dict()`` with
``--json``.
"""

from __future__ import annotations

import argparse

from lexlens.analysis.attribution.options import ReportOptions
from lexlens.analysis.attribution.report import build_report
from lexlens.analysis.core.outputs import check_out_dir, write_files
from lexlens.app.cli.attribute import texts_of
from lexlens.app.cli.common import (
    add_common_args,
    add_options,
    emit,
    options_from_args,
    progress_printer,
)
from lexlens.models import load_encoder


def register(sub: argparse._SubParsersAction) -> None:
    """The ``report`` subcommand: its flags are :class:`ReportOptions`'."""
    parser = sub.add_parser("report", help="write an HTML + JSON + CSV report into a folder")
    parser.add_argument("--encoder", required=True, help="registry name or checkpoint directory")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--text", help="one text")
    source.add_argument("--corpus", help="texts: .txt (one per line), .csv or .jsonl ('text')")
    parser.add_argument("--out", required=True, help="output folder (created if missing)")
    add_options(parser, ReportOptions)
    parser.add_argument("--progress", action="store_true", help="progress lines on stderr")
    add_common_args(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    """Build the report the encoder gets, write its files, print them (or ``--json``)."""
    options = options_from_args(ReportOptions, args)
    texts, source = texts_of(args)
    out = check_out_dir(args.out)
    result = build_report(
        load_encoder(args.encoder, device=args.device),
        texts,
        options=options,
        source=source,
        progress=progress_printer(args),
    )
    written = write_files(out, result.files())
    table = "\n".join(
        [*(f"note: {n}" for n in result.notes), *(f"{n:<22} {p}" for n, p in written.items())]
    )
    emit(args, result, table)
