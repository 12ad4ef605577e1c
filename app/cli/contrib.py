"""``lexlens contrib``: which terms make a query–document score (q ⊙ d); either side may be
a text or an image."""

from __future__ import annotations

import argparse

from lexlens.analysis.core.gating import check_gate_k
from lexlens.analysis.lexical.contrib import contrib, partner_for
from lexlens.app.cli.common import add_common_args, emit, format_table
from lexlens.models import load_encoder
from lexlens.models.base import Capability, InputError


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("contrib", help="per-term contributions to a query–document score")
    parser.add_argument("--encoder", required=True, help="query encoder (name or directory)")
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
    parser.add_argument(
        "--query-mode",
        choices=["parametric", "bow"],
        default="parametric",
        help="parametric: E_q = V_q ⊙ G_q; bow: binary bag of the query's own tokens",
    )
    parser.add_argument(
        "--topk", type=int, default=768, help="gate k: top-k dims kept (-1 all, 0 own tokens only)"
    )
    parser.add_argument("--show", type=int, default=20, help="rows in the table (JSON has all)")
    add_common_args(parser)
    parser.set_defaults(func=run)


def _encoder_for(name: str, kind: str, device: str | None):
    """``name``, or its partner in the same vocabulary when ``name`` cannot read ``kind``."""
    encoder = load_encoder(name, device=device)
    wanted = Capability.TEXT_LEXICAL if kind == "text" else Capability.IMAGE_LEXICAL
    partner = partner_for(encoder.name, kind)
    if not encoder.can(wanted) and partner:
        return load_encoder(partner, device=device)
    return encoder


def run(args: argparse.Namespace) -> None:
    check_gate_k(args.topk)
    if args.show < 0:
        raise InputError("--show must be 0 or more")
    if args.query is not None and not args.query.strip():
        raise InputError("the query is empty: type some words")
    if args.doc is not None and not args.doc.strip():
        raise InputError("the document is empty: type some words")
    if args.query_mode == "bow" and args.query_image:
        raise InputError("the bag-of-words query mode needs a text query (an image has no words)")
    q_kind = "image" if args.query_image else "text"
    d_kind = "image" if args.doc_image else "text"
    from lexlens.models.images import load_image

    q_image = load_image(args.query_image) if args.query_image else None
    d_image = load_image(args.doc_image) if args.doc_image else None
    q_encoder = _encoder_for(args.encoder, q_kind, args.device)
    d_encoder = _encoder_for(args.doc_encoder or args.encoder, d_kind, args.device)
    result = contrib(
        q_encoder, d_encoder, query=args.query, query_image=q_image, query_name=args.query_image,
        doc=args.doc, doc_image=d_image, doc_name=args.doc_image, mode=args.query_mode,
        topk=args.topk,
    )  # fmt: skip
    rows = result.contributions
    shown = rows[: args.show]
    table = format_table(
        [[r.token, r.query_weight, r.doc_weight, r.contribution] for r in shown],
        ["token", "query", "doc", "contribution"],
    )
    covered = sum(r.contribution for r in shown)
    summary = (
        f"score {result.score:.4f} ({result.query['encoder']} ⊙ {result.document['encoder']}): "
        f"{len(rows)} shared terms; the {len(shown)} shown sum to {covered:.4f}"
    )
    emit(args, result, "\n".join([*(f"note: {n}" for n in result.notes), summary, table]))
