"""``lexlens terms``: the top vocabulary terms of a text, an image or an image region."""

from __future__ import annotations

import argparse

from analysis.cli.common import add_common_args, emit, format_table
from analysis.terms import term_rows
from models import load_encoder
from models.base import InputError


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("terms", help="top terms of a text or an image (region)")
    parser.add_argument("--encoder", required=True, help="registry name or checkpoint directory")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--text", help="text to encode")
    source.add_argument("--image", help="image file to encode")
    parser.add_argument("--box", help="X0,Y0,X1,Y1 region of the image in fractions (0..1)")
    parser.add_argument("--side", choices=["query", "document"], default="query")
    parser.add_argument("--top", type=int, default=20, help="how many terms (default 20)")
    parser.add_argument("--merge-pieces", action="store_true", help="join ##word pieces")
    add_common_args(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    if args.top <= 0:
        raise InputError("--top must be a positive number")
    if args.box and not args.image:
        raise InputError("--box applies to --image only")
    encoder = load_encoder(args.encoder, device=args.device)
    notes: list[str] = []
    if args.text is not None:
        encoding = encoder.encode_texts([args.text], side=args.side)[0]
        units = None
    else:
        from analysis.patches import box_to_patches, parse_box
        from models.images import load_image

        encoding = encoder.encode_images([load_image(args.image)])[0]
        units = None
        if args.box:
            box = parse_box(args.box)
            units = box_to_patches(encoding.grid, box, crop_box=encoding.crop_box)
    if encoding.truncated:
        notes.append(f"input truncated to the encoder's limit of {encoder.max_length} tokens")
    notes.extend(encoding.notes)
    rows = term_rows(
        encoding,
        encoder.vocab,
        args.top,
        units=units,
        merge_pieces=args.merge_pieces,
        words=encoder.known_words,
    )
    payload = {"encoder": encoder.name, "terms": rows, "notes": notes}
    if args.box:
        payload["box"] = args.box
    table = format_table(
        [[r["token"], r["weight"], r.get("from_unit", "")] for r in rows],
        ["token", "weight", "from"],
    )
    emit(args, payload, "\n".join([*(f"note: {n}" for n in notes), table]))
