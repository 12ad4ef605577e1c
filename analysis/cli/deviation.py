"""``lexlens deviation``: Exact@k, Semantic@k, FLOPs and vocabulary statistics over captions."""

from __future__ import annotations

import argparse
from pathlib import Path

from lexlens.analysis.cli.common import add_common_args, emit, format_table
from lexlens.analysis.deviation import (
    DEFAULT_GATE_K,
    DEFAULT_K,
    DEFAULT_MAX_ROWS,
    DENOMINATORS,
    DEVIATION_NEEDS,
    DeviationResult,
    check_glove,
    check_options,
    deviation,
    read_captions,
    result_files,
)
from lexlens.analysis.outputs import check_out_dir, write_files
from lexlens.models import load_encoder


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "deviation",
        help="semantic deviation (Exact@k, Semantic@k), FLOPs, vocabulary statistics",
        description=(
            "D2S's semantic deviation of a caption set: Exact@k, Semantic@k (per caption, "
            "with its positive-term count and the cap it puts on Exact@k), FLOPs between "
            "different captions, and the dataset view of the vocabulary (mean weight, "
            "activation rate, lazy terms)."
        ),
    )
    parser.add_argument("--encoder", required=True, help="registry name or checkpoint directory")
    parser.add_argument(
        "--captions", required=True, help=".txt (one per line), or .csv/.jsonl with a text column"
    )
    parser.add_argument("--k", type=int, default=DEFAULT_K, help="top-k terms (default 20)")
    parser.add_argument(
        "--gate-k",
        "--topk",
        dest="gate_k",
        type=int,
        default=DEFAULT_GATE_K,
        help=(
            f"gate E = V ⊙ G before every metric: top GATE_K dims + own tokens (default "
            f"{DEFAULT_GATE_K}, VDR's text default; -1 = ungated)"
        ),
    )
    parser.add_argument(
        "--denominator",
        choices=DENOMINATORS,
        default="k",
        help="k (the paper's, default) or active = min(k, the caption's positive terms)",
    )
    parser.add_argument(
        "--glove", help="GloVe-format static embeddings for Semantic@k (default: the encoder's own)"
    )
    parser.add_argument(
        "--rows",
        type=int,
        default=DEFAULT_MAX_ROWS,
        help=f"per-caption rows kept in the output (default {DEFAULT_MAX_ROWS})",
    )
    parser.add_argument("--out", help="folder for deviation.json, captions.csv, vocabulary.csv")
    add_common_args(parser)
    parser.set_defaults(func=run)


def render(result: DeviationResult) -> str:
    """The plain-text view of a result."""
    c, k = result.captions, result.k
    pos = c.positive_terms
    flops = "n/a (one caption)" if c.flops is None else f"{c.flops:.3f}"
    lines = [
        f"{c.n} captions, k = {k}, gate k = {result.gate_k}, denominator {result.denominator}",
        f"Exact@{k} {c.exact:.3f}  Semantic@{k} {c.semantic:.3f}   "
        f"(denominator k: {c.by_denominator['k']['exact_at_k']:.3f} / "
        f"{c.by_denominator['k']['semantic_at_k']:.3f}; min(k, active): "
        f"{c.by_denominator['active']['exact_at_k']:.3f} / "
        f"{c.by_denominator['active']['semantic_at_k']:.3f})",
        f"positive terms per caption: mean {pos['mean']:.1f}, min {pos['min']}, max "
        f"{pos['max']}; {pos['below_k']} of {c.n} below k; cap on Exact@{k} (denominator k) "
        f"{pos['cap_exact_at_k']:.3f}",
        f"FLOPs {flops} (pairs of different captions; with self-pairs "
        f"{c.flops_with_self_pairs:.3f})  mean active dims {c.mean_active_dims:.1f}",
    ]
    if c.vocabulary is not None:
        lazy = c.vocabulary.lazy_terms
        lines.append(
            f"lazy terms (active in ≥ {c.vocabulary.lazy_rate:.0%} of captions): "
            + (" ".join(t.token for t in lazy[:20]) if lazy else "none")
        )
    lines += [f"note: {n}" for n in result.notes]
    table = format_table(
        [
            [
                r.text[:44],
                r.positive_terms,
                f"{r.cap:.2f}",
                f"{r.exact:.3f}",
                f"{r.semantic:.3f}",
                " ".join(r.top_terms[:6]),
            ]
            for r in c.rows[:50]
        ],
        ["caption", "positive", "cap", f"exact@{k}", f"semantic@{k}", "top terms"],
    )
    more = f"\n({len(c.rows) - 50} more rows in --json / --out)" if len(c.rows) > 50 else ""
    return "\n".join(lines) + "\n" + table + more


def run(args: argparse.Namespace) -> None:
    # Every input is checked before the model loads.
    check_options(k=args.k, gate_k=args.gate_k, denominator=args.denominator, max_rows=args.rows)
    table = read_captions(args.captions)
    glove = check_glove(args.glove) if args.glove else None
    if args.out:
        check_out_dir(args.out)
    encoder = load_encoder(args.encoder, device=args.device)
    DEVIATION_NEEDS.check(encoder)
    result = deviation(
        encoder,
        table,
        name=Path(args.captions).name,
        k=args.k,
        gate_k=args.gate_k,
        denominator=args.denominator,
        glove=glove,
        glove_name=args.glove,
        max_rows=args.rows,
    )
    if args.out:
        write_files(args.out, result_files(result))
    emit(args, result, render(result))
