"""``lexlens deviation``: Exact@k, Semantic@k, FLOPs and vocabulary statistics over captions."""

from __future__ import annotations

import argparse

from lexlens.analysis.core.counts import counted
from lexlens.analysis.deviation.deviation import deviation, deviation_of_index
from lexlens.analysis.deviation.flops import FLOPS_LABEL, PAIRS_LABEL
from lexlens.analysis.deviation.options import DeviationOptions
from lexlens.analysis.deviation.result import DeviationResult
from lexlens.analysis.deviation.sets import SetDeviation
from lexlens.app.cli import common
from lexlens.models.base import InputError

COMMAND = common.Command(
    "semantic deviation (Exact@k, Semantic@k), FLOPs, vocabulary statistics",
    description=(
        "D2S's semantic deviation of a caption set or a stored collection: Exact@k, "
        "Semantic@k (per item, with its positive-term count and the cap it puts on "
        "Exact@k), FLOPs between different items (and between captions and images), and "
        "the dataset view of the vocabulary (mean weight, activation rate, lazy terms)."
    ),
    options=DeviationOptions,
    out="folder for deviation.json and the CSV tables",
)


def add_flags(parser: argparse.ArgumentParser) -> None:
    """The encoder and the captions or the stored collection."""
    common.add_encoder(
        parser,
        "text encoder: registry name or checkpoint directory (with --index: default the "
        "encoder of the index's text queries: its own, or an image encoder's text partner)",
        required=False,
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--captions", help=".txt (one per line), or .csv/.jsonl with a text column")
    source.add_argument("--index", help="a stored collection (folder made by `lexlens index`)")


def _set_lines(part: SetDeviation, k: int) -> list[str]:
    pos = part.positive_terms
    pairs = "n/a (one item)" if part.flops is None else f"{part.flops:.3f}"
    lines = [f"[{part.kind}] {counted(part.n, 'item')}, {part.n_measured} measured"]
    if part.exact is not None:
        den = part.by_denominator
        lines += [
            f"  Exact@{k} {part.exact:.3f}  Semantic@{k} {part.semantic:.3f}   "
            f"(denominator k: {den['k']['exact_at_k']:.3f} / {den['k']['semantic_at_k']:.3f};"
            f" min(k, active): {den['active']['exact_at_k']:.3f} / "
            f"{den['active']['semantic_at_k']:.3f})",
            f"  positive terms per item: mean {pos['mean']:.1f}, min {pos['min']}, max "
            f"{pos['max']}; {pos['below_k']} of {part.n_measured} below k; cap on Exact@{k} "
            f"(denominator k) {pos['cap_exact_at_k']:.3f}",
        ]
    self_pairs = part.flops_with_self_pairs
    lines.append(
        f"  {FLOPS_LABEL}: {'n/a' if self_pairs is None else f'{self_pairs:.3f}'}; "
        f"{PAIRS_LABEL}: {pairs}; mean active dims {part.mean_active_dims:.1f}"
    )
    if part.vocabulary is not None:
        lazy = part.vocabulary.lazy_terms
        lines.append(
            f"  lazy terms (active in ≥ {part.vocabulary.lazy_rate:.0%} of items): "
            + (" ".join(t.token for t in lazy[:20]) if lazy else "none")
            + (f" … ({len(lazy)} in all)" if len(lazy) > 20 else "")
        )
    return lines


def _set_table(part: SetDeviation, k: int) -> str:
    table = common.format_table(
        [
            [
                r.text[:44],
                r.positive_terms,
                f"{r.cap:.2f}",
                f"{r.exact_at_k:.3f}",
                f"{r.semantic_at_k:.3f}",
                " ".join(r.top_terms[:6]),
            ]
            for r in part.rows[:50]
        ],
        [part.kind[:-1], "positive", "cap", f"exact@{k}", f"semantic@{k}", "top terms"],
    )
    more = f"\n({len(part.rows) - 50} more rows in --json / --out)" if len(part.rows) > 50 else ""
    return table + more


def render(result: DeviationResult) -> str:
    """The plain-text view of a result."""
    k = result.k
    where = ", ".join(f"{key} {value}" for key, value in result.input.items())
    lines = [
        f"{where}; encoder {result.encoder}, k = {k}, gate k = {result.gate_k}, "
        f"denominator {result.denominator}"
    ]
    for part in result.sets:
        lines += _set_lines(part, k)
    if result.flops_captions_images is not None:
        lines.append(
            f"FLOPs captions × images (D2S, every pair): {result.flops_captions_images:.3f}"
        )
    lines += [f"note: {n}" for n in result.notes]
    tables = [_set_table(p, k) for p in result.sets if p.rows]
    return "\n".join(lines) + "\n" + "\n\n".join(tables)


def run(args: argparse.Namespace) -> None:
    out = common.out_folder(args)
    options = common.options_from_args(DeviationOptions, args)
    if args.index:
        result = deviation_of_index(args.index, args.encoder, device=args.device, options=options)
    else:
        if not args.encoder:
            raise InputError("--encoder is required with --captions")
        result = deviation(args.encoder, args.captions, device=args.device, options=options)
    common.write_out(out, result)
    common.emit(args, result, render(result))
