"""``lexlens export``: a stored collection (and its queries) for Anserini, Seismic or as a
TREC run."""

from __future__ import annotations

import argparse

from lexlens.analysis.benchmark.export import MANIFEST, export_index
from lexlens.analysis.benchmark.options import ExportOptions
from lexlens.app.cli.common import (
    add_common_args,
    add_options,
    emit,
    format_table,
    options_from_args,
    progress_printer,
)


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "export",
        help="write a stored collection for Anserini, Seismic, or as a TREC run",
        description="anserini: JsonVectorCollection (integer impacts = weight × --scale) and "
        "its queries; seismic: Seismic's JSONL for items and queries; trec-run: the "
        "collection searched with every query.",
    )
    parser.add_argument("--index", required=True, help="a stored collection (lexlens index)")
    parser.add_argument("--out", required=True, help="folder for the exported files")
    parser.add_argument("--queries", help="queries (default: the ones the collection keeps)")
    parser.add_argument("--query-encoder", help="default: the collection's own query encoder")
    add_options(parser, ExportOptions)
    parser.add_argument("--progress", action="store_true", help="progress lines on stderr")
    add_common_args(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    result = export_index(
        args.index, args.out, queries=args.queries, query_encoder=args.query_encoder,
        device=args.device, progress=progress_printer(args),
        options=options_from_args(ExportOptions, args),
    )  # fmt: skip
    table = format_table([[n, c] for n, c in result.written.items()], ["file", "lines"])
    notes = "".join(f"\nnote: {n}" for n in result.notes)
    head = f"{result.format} export in {result.out} (the files listed in {MANIFEST})"
    emit(args, result, f"{head}\n{table}{notes}")
