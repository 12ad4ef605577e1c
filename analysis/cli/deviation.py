"""``lexlens deviation``: Exact@k, Semantic@k and FLOPs of an encoder over captions."""

from __future__ import annotations

import argparse

from lexlens.analysis.cli.common import add_common_args, emit, format_table, read_corpus
from lexlens.analysis.deviation import StaticEmbeddings, dataset_deviation
from lexlens.models import load_encoder
from lexlens.models.base import InputError


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("deviation", help="semantic deviation (Exact@k, Semantic@k), FLOPs")
    parser.add_argument("--encoder", required=True)
    parser.add_argument(
        "--captions", required=True, help=".txt (one per line) or .csv (text column)"
    )
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--topk", type=int, default=768, help="gate k before FLOPs (-1 = none)")
    parser.add_argument(
        "--glove", help="GloVe-format static embeddings (default: the encoder's own)"
    )
    add_common_args(parser)
    parser.set_defaults(func=run)


def static_embeddings_for(encoder, glove: str | None) -> StaticEmbeddings:
    """The encoder's own input word embeddings, or a GloVe file when given."""
    if glove:
        return StaticEmbeddings.from_glove(glove)
    table = encoder.static_embeddings()
    if table is None:
        raise InputError(f"{encoder.name} has no input word-embedding table: pass --glove FILE")
    return StaticEmbeddings.from_table(*table)


def run(args: argparse.Namespace) -> None:
    if args.k <= 0:
        raise InputError("--k must be a positive number")
    texts = read_corpus(args.captions)
    encoder = load_encoder(args.encoder, device=args.device)
    static = static_embeddings_for(encoder, args.glove)
    encodings = encoder.encode_texts(texts, keep_units=False)
    result = dataset_deviation(encodings, texts, encoder.vocab, static, args.k, gate_k=args.topk)
    table = format_table(
        [
            [p["text"][:50], p["exact_at_k"], p["semantic_at_k"], " ".join(p["top_terms"][:6])]
            for p in result["per_caption"][:20]
        ],
        ["caption", f"exact@{args.k}", f"semantic@{args.k}", "top terms"],
    )
    head = (
        f"{result['n']} captions: Exact@{args.k} {result['exact_at_k']:.3f}  "
        f"Semantic@{args.k} {result['semantic_at_k']:.3f}  FLOPs {result['flops']:.2f}  "
        f"mean active dims {result['mean_active_dims']:.1f}"
    )
    emit(args, result, head + "\n" + table)
