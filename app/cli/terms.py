"""``lexlens terms``: the top vocabulary terms of a text, an image or an image region."""

from __future__ import annotations

import argparse

from lexlens.analysis.lexical.terms import TermsOptions, terms
from lexlens.app.cli import common

COMMAND = common.Command("top terms of a text or an image (region)", options=TermsOptions)


def add_flags(parser: argparse.ArgumentParser) -> None:
    """The encoder, what it encodes, and how the table shows it."""
    common.add_encoder(parser)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--text", help="text to encode")
    source.add_argument("--image", help="image file to encode")
    source.add_argument(
        "--features",
        help="dense features (.npy [N, d], .safetensors, or .parquet with id/emb) for a D2S head",
    )
    parser.add_argument("--item", help="with --features: the id of the vector to show")
    parser.add_argument(
        "--raw-pieces", action="store_true", help="table shows raw word pieces, not words"
    )


def run(args: argparse.Namespace) -> None:
    # terms() checks every input and reads it before the encoder loads.
    result = terms(
        args.encoder,
        text=args.text,
        image=args.image,
        features=args.features,
        item=args.item,
        device=args.device,
        options=common.options_from_args(TermsOptions, args),
    )
    rows = result.terms if args.raw_pieces else result.merged_terms
    table = common.format_table(
        [[r["token"], r["weight"], r.get("from_unit", "")] for r in rows],
        ["token", "weight", "from"],
    )
    lines = [f"note: {n}" for n in result.notes]
    if "cells" in result.input:
        lines.append(f"cells: {' '.join(result.input['cells'])}")
    common.emit(args, result, "\n".join([*lines, table]))
