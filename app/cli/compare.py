"""``lexlens compare``: two encoders (or one at two gate k) on a text, an image or a stored
collection, side by side."""

from __future__ import annotations

import argparse

from lexlens.analysis.compare.compare import compare
from lexlens.analysis.compare.compare_collections import compare_indexes
from lexlens.analysis.compare.options import CompareIndexOptions, CompareOptions
from lexlens.analysis.compare.result import CompareResult, TermComparison
from lexlens.analysis.core.options import names
from lexlens.app.cli import common
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


def _terms_table(c: TermComparison) -> str:
    n = c.counts
    rc = c.rank_correlation
    rho = "not defined" if rc["rho"] is None else f"{rc['rho']:.4f}"
    lines = [
        f"active terms: A {n['active_a']}, B {n['active_b']}; shared {n['shared']}, only in A "
        f"{n['only_a']} ({n['only_a_no_counterpart']} not in B's vocabulary), only in B "
        f"{n['only_b']} ({n['only_b_no_counterpart']} not in A's vocabulary)",
        f"Spearman's rho of the shared weights: {rho} (n = {rc['n']})"
        + (f" — {rc['note']}" if rc.get("note") else ""),
    ]
    m = c.merged
    lines.append(
        common.format_table(
            [[r["token"], r["weight_a"], r["weight_b"], r["difference"]] for r in m["shared"]],
            ["shared (words)", "A", "B", "B - A"],
        )
    )
    lines.append(
        common.format_table([[r["token"], r["weight_a"]] for r in m["only_a"]], ["only in A", "A"])
    )
    lines.append(
        common.format_table([[r["token"], r["weight_b"]] for r in m["only_b"]], ["only in B", "B"])
    )
    return "\n\n".join(lines)


def render(result: CompareResult) -> str:
    """The plain-text view of a result."""
    a, b = result.a, result.b
    lines = [
        f"A: {a['encoder']} (gate k {a['gate_k']})" + (f", {a['index']}" if "index" in a else ""),
        f"B: {b['encoder']} (gate k {b['gate_k']})" + (f", {b['index']}" if "index" in b else ""),
    ]
    lines += [f"note: {n}" for n in result.notes]
    blocks = ["\n".join(lines)]
    if result.terms is not None:
        blocks.append(_terms_table(result.terms))
    if result.group is not None:
        g = result.group
        blocks.append(
            f"patch group: A cells {' '.join(g['cells_a'])}; B cells {' '.join(g['cells_b'])}\n"
            + _terms_table(g["terms"])
        )
    if result.heatmap is not None:
        h = result.heatmap
        parts = [
            f"{s.upper()}: max {h[s]['max']:.4f} at {h[s]['argmax']} of "
            f"{h[s]['grid'][0]}x{h[s]['grid'][1]}"
            for s in ("a", "b")
            if h[s] is not None
        ]
        blocks.append(f"heatmap of {h['word']!r}: " + "; ".join(parts))
    if result.collection is not None:
        blocks += _collection_blocks(result.collection)
    return "\n\n".join(blocks)


def _collection_blocks(col: dict) -> list[str]:
    rows = []
    dev_a, dev_b = col["deviation"]["a"], col["deviation"]["b"]
    for kind, pa in dev_a["sets"].items():
        pb = dev_b["sets"].get(kind) or {}
        for key, label in (
            ("exact_at_k", f"Exact@{col['k']}"),
            ("semantic_at_k", f"Semantic@{col['k']}"),
            ("flops", "FLOPs"),
            ("mean_active_dims", "mean active dims"),
        ):
            rows.append([kind, label, _num(pa.get(key)), _num(pb.get(key))])
    if dev_a["flops_captions_images"] is not None:
        rows.append(
            [
                "captions x images",
                "FLOPs (D2S)",
                _num(dev_a["flops_captions_images"]),
                _num(dev_b["flops_captions_images"]),
            ]
        )
    blocks = [common.format_table(rows, ["set", "measure", "A", "B"])]
    vocab = col["vocabulary"]
    blocks.append(
        common.format_table(
            [
                [
                    t["token"],
                    _num(t["mean_weight_a"]),
                    _num(t["mean_weight_b"]),
                    _num(t["activation_rate_a"]),
                    _num(t["activation_rate_b"]),
                ]
                for t in vocab["top_terms"]
            ],
            ["term", "mean A", "mean B", "rate A", "rate B"],
        )
    )
    for s in ("a", "b"):
        if vocab[s] is not None:
            lazy = vocab[s]["lazy_terms"]
            blocks.append(f"lazy terms in {s.upper()}: " + (" ".join(lazy[:30]) or "none"))
    if col["search"] is not None:
        blocks += _search_blocks(col["search"])
    return blocks


def _search_blocks(search: dict) -> list[str]:
    """A query's metrics (when it has judgements or names a label) and its moved hits."""
    blocks, metrics = [], search["metrics"]
    if metrics:
        by = "kept judgements" if metrics.get("judged") == "kept" else "label"
        blocks.append(
            f"metrics of {search['query']!r} ({metrics['relevant']} relevant, by {by}): "
            + "; ".join(
                f"{s.upper()} " + " ".join(f"{m} {v:.4f}" for m, v in metrics[s].items())
                for s in ("a", "b")
            )
        )
    judged = any("relevance" in h for h in search["hits"])
    rows = [
        [
            *([h["relevance"] or "-"] if judged else []),
            h["id"],
            h["status"],
            h["rank_a"] or "-",
            h["rank_b"] or "-",
            h["score_a"],
            h["score_b"],
            " ".join(f"{c['token']}:{c['change']:+.3f}" for c in h["changed_terms"][:5]),
        ]
        for h in search["hits"]
    ]
    header = [
        *(["relevance"] if judged else []),
        "hit",
        "status",
        "rank A",
        "rank B",
        "score A",
        "score B",
        "changed terms",
    ]
    return [*blocks, common.format_table(rows, header)]


def _num(value: object) -> str:
    return "-" if value is None else f"{value:.4f}"


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
