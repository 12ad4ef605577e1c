"""``lexlens contrib``: which terms make a query–document score (q ⊙ d)."""

from __future__ import annotations

import argparse

import numpy as np

from lexlens.analysis.cli.common import add_common_args, emit, format_table
from lexlens.analysis.contrib import bag_of_words, contributions, gate
from lexlens.models import load_encoder
from lexlens.models.base import InputError


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("contrib", help="per-term contributions to a query–document score")
    parser.add_argument("--encoder", required=True, help="query encoder (name or directory)")
    parser.add_argument("--doc-encoder", help="document encoder (default: --encoder)")
    parser.add_argument("--query", required=True)
    doc = parser.add_mutually_exclusive_group(required=True)
    doc.add_argument("--doc", help="document text")
    doc.add_argument("--doc-image", help="document image file")
    parser.add_argument(
        "--query-mode",
        choices=["parametric", "bow"],
        default="parametric",
        help="parametric: E_q = V_q ⊙ G_q; bow: E_q = binary bag of the query's tokens",
    )
    parser.add_argument(
        "--topk", type=int, default=768, help="gate k: top-k dims kept (-1 all, 0 own tokens only)"
    )
    parser.add_argument("--show", type=int, default=20, help="rows in the table (JSON has all)")
    add_common_args(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    q_encoder = load_encoder(args.encoder, device=args.device)
    d_encoder = (
        load_encoder(args.doc_encoder, device=args.device) if args.doc_encoder else q_encoder
    )
    if q_encoder.vocab != d_encoder.vocab:
        raise InputError("the query and document encoders use different vocabularies")
    query = q_encoder.encode_texts([args.query], side="query")[0]
    if args.doc is not None:
        doc = d_encoder.encode_texts([args.doc], side="document")[0]
    else:
        from lexlens.models.images import load_image

        doc = d_encoder.encode_images([load_image(args.doc_image)])[0]
    if args.query_mode == "bow":
        q_vec = bag_of_words(query, q_encoder.vocab)
    else:
        q_vec = gate(query, q_encoder.vocab, args.topk)
    d_vec = gate(doc, d_encoder.vocab, args.topk)
    score, rows = contributions(q_vec, d_vec, q_encoder.vocab)
    notes = [
        f"{side} truncated to {enc_.max_length} tokens"
        for side, enc, enc_ in (("query", query, q_encoder), ("document", doc, d_encoder))
        if enc.truncated
    ]
    payload = {
        "score": score,
        "contributions": [r.to_dict() for r in rows],
        "query_mode": args.query_mode,
        "topk": args.topk,
        "notes": notes,
    }
    shown = rows[: max(args.show, 0)]
    table = format_table(
        [[r.token, r.query_weight, r.doc_weight, r.contribution] for r in shown],
        ["token", "query", "doc", "contribution"],
    )
    covered = float(np.sum([r.contribution for r in shown])) if shown else 0.0
    summary = (
        f"score {score:.4f}: {len(rows)} shared terms; the {len(shown)} shown sum to {covered:.4f}"
    )
    emit(args, payload, "\n".join([*(f"note: {n}" for n in notes), summary, table]))
