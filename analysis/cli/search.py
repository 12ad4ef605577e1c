"""``lexlens search``: search a collection, with exclusion queries "A but not B"."""

from __future__ import annotations

import argparse

from lexlens.analysis.cli.common import add_common_args, emit, format_table
from lexlens.analysis.contrib import gate
from lexlens.analysis.search import (
    average_embedding_query,
    encode_collection,
    exclusion_search,
    read_labelled_csv,
    search,
)
from lexlens.models import load_encoder
from lexlens.models.base import InputError


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("search", help="search a collection (with --exclude: A but not B)")
    parser.add_argument("--encoder", required=True)
    parser.add_argument("--collection", required=True, help=".txt or .csv (text[, id, labels])")
    parser.add_argument("--query", required=True, help="what to find (A)")
    parser.add_argument("--exclude", help="what to exclude (B): dimension-set exclusion")
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--topk", type=int, default=768, help="gate k for the vectors")
    parser.add_argument("--k-items", type=int, default=10, help="items used to extract dimensions")
    parser.add_argument("--coverage", type=float, default=0.5, help="share of magnitude per set")
    parser.add_argument(
        "--method",
        choices=["sr", "avg", "text"],
        default="sr",
        help="exclusion by dimension sets (sr), emb(A) - emb(B) (avg), or 'A without B' (text)",
    )
    add_common_args(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    if args.top <= 0:
        raise InputError("--top must be a positive number")
    ids, texts, labels = read_labelled_csv(args.collection)
    encoder = load_encoder(args.encoder, device=args.device)
    collection = encode_collection(encoder, texts, ids=ids, labels=labels, k=args.topk)
    query = gate(encoder.encode_texts([args.query])[0], encoder.vocab, args.topk)
    if args.exclude and args.method != "sr":
        if args.method == "avg":
            other = gate(encoder.encode_texts([args.exclude])[0], encoder.vocab, args.topk)
            query = average_embedding_query(query, other)
        else:
            text = f"{args.query} without {args.exclude}"
            query = gate(encoder.encode_texts([text])[0], encoder.vocab, args.topk)
        hits = search(collection, query, encoder.vocab, top=args.top)
        payload = {"method": args.method, "results": [h.to_dict() for h in hits]}
        head = f"baseline '{args.method}' for: {args.query} but not {args.exclude}"
    elif args.exclude:
        other = gate(encoder.encode_texts([args.exclude])[0], encoder.vocab, args.topk)
        result = exclusion_search(
            collection, query, other, encoder.vocab, top=args.top,
            k_items=args.k_items, coverage=args.coverage,
        )  # fmt: skip
        payload = {"method": "sr", **result.to_dict(encoder.vocab)}
        head = f"kept dimensions: {' '.join(payload['kept_terms'][:15])}"
        hits = result.hits
    else:
        hits = search(collection, query, encoder.vocab, top=args.top)
        payload = {"results": [h.to_dict() for h in hits]}
        head = f"{len(collection.ids)} items searched"
    table = format_table(
        [
            [h.id, h.score, h.text[:60], " ".join(c["token"] for c in h.top_contributions[:4])]
            for h in hits
        ],
        ["id", "score", "text", "top terms"],
    )
    emit(args, payload, head + "\n" + table)
