"""``lexlens compare``: two encoders (or one at two gate k) on a text, an image or a stored
collection, side by side."""

from __future__ import annotations

import argparse

from lexlens.analysis.compare.compare import compare
from lexlens.analysis.compare.compare_collections import compare_indexes
from lexlens.analysis.compare.options import CompareIndexOptions, CompareOptions
from lexlens.analysis.core.options import names
from lexlens.app.cli import common
from lexlens.app.cli.compare_view import render
from lexlens.models.base import InputError

#: Options of one comparison only: refused with the other kind of input.
IMAGE_ONLY = [n for n in names(CompareOptions) if n not in names(CompareIndexOptions)]
INDEX_ONLY = [n for n in names(CompareIndexOptions) if n not in names(CompareOptions)]


COMMAND = common.Command(
    "two encoders (or one at two gate k) side by side on a text, an image or an index",
    description=(
        "Compare A and B: terms shared, only in A, only in B and the rank correlation of "
        "the shared weights (on E = V ⊙ G at each side's gate k); for an image also a patch "
        "group (--box) and one term's heatmap on both grids; for stored collections "
        "deviation, FLOPs and vocabulary statistics side by side and a query's hits: which "
        "moved and which terms moved them. Encoders with different vocabularies are "
        "compared on the tokens they share."
    ),
    out="folder for compare.html, compare.json and the CSV tables",
)


def add_flags(parser: argparse.ArgumentParser) -> None:
    """A and B, what they encode, then the options (--gate-k twice, --top for both kinds)."""
    parser.add_argument(
        "--encoder",
        action="append",
        default=[],
        help="A, then B (registry name or checkpoint folder); once = the same encoder on both "
        "sides (then give two --gate-k). With --index: the text encoders of the queries "
        "(default: each index's own, or its partner in the same vocabulary)",
    )
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--text", help="a text to encode with both")
    what.add_argument("--image", help="an image file to encode with both")
    what.add_argument(
        "--index",
        action="append",
        help="a stored collection (lexlens index); twice = A's and B's, built from one source",
    )
    gate = CompareOptions.option("gate_k")
    parser.add_argument(
        gate.flag,
        action="append",
        dest=gate.name,
        metavar=gate.spec.metavar,
        help=gate.spec.help,
    )
    top, hits = CompareOptions.option("top"), CompareIndexOptions.option("top")
    parser.add_argument(
        top.flag,
        dest=top.name,
        metavar="N",
        help=f"{top.help_line()}; with --index: {hits.help_line()}",
    )
    common.add_options(parser, CompareOptions, skip=("gate_k", "top"))
    common.add_options(parser, CompareIndexOptions, skip=tuple(names(CompareOptions)))


def _check_flags(args: argparse.Namespace, specs: list[str], indexes: list[str]) -> None:
    """Each flag with the input it applies to, A and B given at most once each."""
    if len(specs) > 2:
        raise InputError(f"give --encoder at most twice (A and B), not {len(specs)} times")
    if len(indexes) > 2:
        raise InputError(f"give --index at most twice (A and B), not {len(indexes)} times")
    for name in IMAGE_ONLY:
        if getattr(args, name) is not None and args.image is None:
            raise InputError(f"{CompareOptions.option(name).flag} applies to --image only")
    for name in INDEX_ONLY:
        declared = CompareIndexOptions.option(name)
        if declared.spec.cli and getattr(args, name) is not None and not indexes:
            raise InputError(
                f"{declared.flag} applies to --index only (a text or an image is compared with "
                "--text or --image)"
            )
    if not specs and not indexes:
        raise InputError("give --encoder A (and --encoder B, or two --gate-k)")


def run(args: argparse.Namespace) -> None:
    specs, indexes = list(args.encoder), args.index or []
    _check_flags(args, specs, indexes)
    out = common.out_folder(args)
    a, b = (specs[0], specs[-1]) if specs else (None, None)
    if indexes:
        result = compare_indexes(
            indexes[0],
            indexes[-1] if len(indexes) == 2 else None,
            encoder_a=a,
            encoder_b=b,
            device=args.device,
            options=common.options_from_args(CompareIndexOptions, args),
        )
    else:
        result = compare(
            a,
            b,
            text=args.text,
            image=args.image,
            name=args.image,
            device=args.device,
            options=common.options_from_args(CompareOptions, args),
        )
    common.write_out(out, result)
    common.emit(args, result, render(result))
