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
from lexlens.app.cli import common

COMMAND = common.Command(
    "write an HTML + JSON + CSV report into a folder", options=ReportOptions, progress=True
)


def add_flags(parser: argparse.ArgumentParser) -> None:
    """The encoder, the texts and the folder the report goes into."""
    common.add_encoder(parser)
    common.add_texts(parser)
    parser.add_argument("--out", required=True, help="output folder (created if missing)")


def run(args: argparse.Namespace) -> None:
    """Build the report the encoder gets, write its files, print them (or ``--json``)."""
    options = common.options_from_args(ReportOptions, args)
    result, written = common.run_on_texts(args, build_report, options)
    table = "\n".join(
        [*(f"note: {n}" for n in result.notes), *(f"{n:<22} {p}" for n, p in written.items())]
    )
    common.emit(args, result, table)
