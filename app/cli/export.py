"""``lexlens export``: a stored collection (and its queries) for Anserini, Seismic or as a
TREC run."""

from __future__ import annotations

import argparse

from lexlens.analysis.benchmark.export import (
    DEFAULT_SCALE,
    FORMATS,
    MANIFEST,
    SCALE_RULE,
    TOP_RULE,
    check_scale,
    check_top,
    export_index,
)
from lexlens.analysis.core.gating import DEFAULT_GATE_K
from lexlens.app.cli.common import add_common_args, emit, format_table, progress_printer
from lexlens.models.base import InputError


def _scale(text: str) -> float:
    """``--scale`` parsed and checked by the export's own rule (argparse names the option)."""
    try:
        return check_scale(float(text))
    except (ValueError, InputError):
        raise argparse.ArgumentTypeError(f"must be {SCALE_RULE}, not {text!r}") from None


def _top(text: str) -> int:
    """``--top`` parsed and checked by the export's own rule."""
    try:
        return check_top(int(text))
    except (ValueError, InputError):
        raise argparse.ArgumentTypeError(f"must be {TOP_RULE}, not {text!r}") from None


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "export",
        help="write a stored collection for Anserini, Seismic, or as a TREC run",
        description="anserini: JsonVectorCollection (integer impacts = weight × --scale) and "
        "its queries; seismic: Seismic's JSONL for items and queries; trec-run: the "
        "collection searched with every query.",
    )
    parser.add_argument("--index", required=True, help="a stored collection (lexlens index)")
    parser.add_argument("--format", required=True, choices=FORMATS, dest="fmt")
    parser.add_argument("--out", required=True, help="folder for the exported files")
    parser.add_argument("--queries", help="queries (default: the ones the collection keeps)")
    parser.add_argument(
        "--scale",
        type=_scale,
        default=DEFAULT_SCALE,
        help=f"anserini: weight × scale, rounded ({SCALE_RULE}; default 100)",
    )
    parser.add_argument("--top", type=_top, default=100, help="trec-run: items per query")
    parser.add_argument("--query-encoder", help="default: the collection's own query encoder")
    parser.add_argument("--query-mode", choices=["parametric", "bow"], default="parametric")
    parser.add_argument(
        "--topk", dest="gate_k", type=int, default=DEFAULT_GATE_K, help="gate k of the queries"
    )
    parser.add_argument("--progress", action="store_true", help="progress lines on stderr")
    add_common_args(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    result = export_index(
        args.index, args.fmt, args.out, queries=args.queries, scale=args.scale, top=args.top,
        query_encoder=args.query_encoder, mode=args.query_mode, gate_k=args.gate_k,
        device=args.device, progress=progress_printer(args),
    )  # fmt: skip
    table = format_table([[n, c] for n, c in result.written.items()], ["file", "lines"])
    notes = "".join(f"\nnote: {n}" for n in result.notes)
    head = f"{result.format} export in {result.out} (the files listed in {MANIFEST})"
    emit(args, result, f"{head}\n{table}{notes}")
