"""``lexlens contrib``: which terms make a query–document score (q ⊙ d); either side may be
a text or an image."""

from __future__ import annotations

import argparse

from lexlens.analysis.lexical.contrib import ContribOptions, contrib
from lexlens.app.cli import common
from lexlens.models.base import InputError

COMMAND = common.Command("per-term contributions to a query–document score", options=ContribOptions)


def add_flags(parser: argparse.ArgumentParser) -> None:
    """The encoders, the query and the document, the rows shown."""
    common.add_encoder(parser, "query encoder (name or directory)")
    parser.add_argument(
        "--doc-encoder",
        help="document encoder (default: --encoder, or its partner in the same vocabulary "
        "when the document is an image and --encoder reads text only)",
    )
    query = parser.add_mutually_exclusive_group(required=True)
    query.add_argument("--query", help="query text")
    query.add_argument("--query-image", help="query image file")
    doc = parser.add_mutually_exclusive_group(required=True)
    doc.add_argument("--doc", help="document text")
    doc.add_argument("--doc-image", help="document image file")
    parser.add_argument("--show", type=int, default=20, help="rows in the table (JSON has all)")


def run(args: argparse.Namespace) -> None:
    if args.show < 0:
        raise InputError("--show must be 0 or more")
    options = common.options_from_args(ContribOptions, args)
    result = contrib(
        args.encoder,
        args.doc_encoder,
        query=args.query,
        query_image=args.query_image,
        doc=args.doc,
        doc_image=args.doc_image,
        device=args.device,
        options=options,
    )
    rows = result.contributions
    shown = rows[: args.show]
    table = common.format_table(
        [[r.token, r.query_weight, r.doc_weight, r.contribution] for r in shown],
        ["token", "query", "doc", "contribution"],
    )
    covered = sum(r.contribution for r in shown)
    summary = (
        f"score {result.score:.4f} ({result.query['encoder']} ⊙ {result.document['encoder']}): "
        f"{len(rows)} shared terms; the {len(shown)} shown sum to {covered:.4f}"
    )
    common.emit(args, result, "\n".join([*(f"note: {n}" for n in result.notes), summary, table]))
