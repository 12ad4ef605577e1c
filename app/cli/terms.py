"""``lexlens terms``: the top vocabulary terms of a text, an image or an image region."""

from __future__ import annotations

import argparse

from lexlens.analysis.collections.feature_files import read_features
from lexlens.analysis.lexical.terms import TERMS_NEEDS, TermsOptions, terms
from lexlens.app.cli import common
from lexlens.models.base import InputError
from lexlens.models.images import load_image

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
        "--ids", help="with --features: ids, one per line (default: FILE.ids.txt or row numbers)"
    )
    parser.add_argument(
        "--raw-pieces", action="store_true", help="table shows raw word pieces, not words"
    )


def run(args: argparse.Namespace) -> None:
    # Every input is checked before the model loads.
    options = common.options_from_args(TermsOptions, args)
    if options.box and not args.image:
        raise InputError("--box applies to --image only")
    if args.text is not None and not args.text.strip():
        raise InputError("the text is empty: type some words to encode")
    if (args.item is not None or args.ids is not None) and args.features is None:
        raise InputError("--item and --ids apply to --features only")
    picture = load_image(args.image, name=args.image) if args.image is not None else None
    table = read_features(args.features, ids=args.ids) if args.features is not None else None
    if table is not None and args.item is not None:
        table.position(args.item)  # an unknown id fails before the model loads
    encoder = common.encoder_of(args)
    TERMS_NEEDS.check(encoder)
    result = terms(
        encoder, text=args.text, image=picture, name=args.image, features=table,
        item=args.item, options=options,
    )  # fmt: skip
    rows = result.terms if args.raw_pieces else result.merged_terms
    table = common.format_table(
        [[r["token"], r["weight"], r.get("from_unit", "")] for r in rows],
        ["token", "weight", "from"],
    )
    lines = [f"note: {n}" for n in result.notes]
    if "cells" in result.input:
        lines.append(f"cells: {' '.join(result.input['cells'])}")
    common.emit(args, result, "\n".join([*lines, table]))
