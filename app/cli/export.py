"""``lexlens export``: a stored collection (and its queries) for Anserini, Seismic or as a
TREC run."""

from __future__ import annotations

import argparse

from lexlens.analysis.export.export import MANIFEST, export_index
from lexlens.analysis.export.options import ExportOptions
from lexlens.app.cli import common

COMMAND = common.Command(
    "write a stored collection for Anserini, Seismic, as a TREC run, or training data",
    description="anserini: JsonVectorCollection (integer impacts = weight × --scale) and "
    "its queries; seismic: Seismic's JSONL for items and queries; trec-run: the "
    "collection searched with every query; hard-negatives and expansions: what a stored "
    "evaluation's failures teach the next training run (--evaluation, the folder "
    "`lexlens evaluate --out` wrote; nothing ranked again).",
    options=ExportOptions,
    progress=True,
)


def add_flags(parser: argparse.ArgumentParser) -> None:
    """The collection, the folder, the queries and their encoder."""
    parser.add_argument("--index", required=True, help="a stored collection (lexlens index)")
    parser.add_argument("--out", required=True, help="folder for the exported files")
    parser.add_argument("--queries", help="queries (default: the ones the collection keeps)")
    parser.add_argument("--query-encoder", help="default: the collection's own query encoder")
    parser.add_argument(
        "--evaluation",
        help="hard-negatives, expansions: the folder `lexlens evaluate --out` wrote (one system)",
    )


def run(args: argparse.Namespace) -> None:
    result = export_index(
        args.index,
        args.out,
        queries=args.queries,
        query_encoder=args.query_encoder,
        evaluation=args.evaluation,
        device=args.device,
        progress=common.progress_printer(args),
        options=common.options_from_args(ExportOptions, args),
    )
    table = common.format_table([[n, c] for n, c in result.written.items()], ["file", "lines"])
    notes = "".join(f"\nnote: {n}" for n in result.notes)
    head = f"{result.format} export in {result.out} (the files listed in {MANIFEST})"
    common.emit(args, result, f"{head}\n{table}{notes}")
