"""``lexlens search``: search a stored index or a small file, exclusion "A but not B",
evaluation over label pairs."""

from __future__ import annotations

import argparse

from lexlens.analysis.core.gating import DEFAULT_GATE_K
from lexlens.analysis.search.evaluation import METRICS, EvalResult, evaluate_index
from lexlens.analysis.search.exclusion import METHODS
from lexlens.analysis.search.search import SearchResult, hit_summary, search_file, search_index
from lexlens.app.cli.common import add_common_args, emit, format_table
from lexlens.models.base import InputError


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "search",
        help="search a collection (with --exclude: A but not B; --eval: a table of pairs)",
    )
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--index", help="a stored index folder (lexlens index)")
    where.add_argument("--collection", help="a small .txt/.csv/.jsonl of texts, encoded now")
    parser.add_argument(
        "--encoder", help="encoder of --collection (with --index: the query encoder)"
    )
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--query", help="what to find (A)")
    what.add_argument("--query-image", help="an image as the query")
    what.add_argument(
        "--eval", help="a CSV of label pairs (columns a, b) or of queries (query, relevant ids)"
    )
    parser.add_argument(
        "--query-encoder",
        help="query encoder (default: the index's encoder, or its partner in the same "
        "vocabulary, e.g. splade-tiny for an efficientnet-lite0-lexical image index)",
    )
    parser.add_argument(
        "--query-mode", choices=["parametric", "bow"], default="parametric",
        help="parametric: E_q = V_q ⊙ G_q; bow: the bag of the query's own tokens (VDR^α)",
    )  # fmt: skip
    parser.add_argument("--exclude", help="what to exclude (B)")
    parser.add_argument(
        "--method", choices=list(METHODS), default="sr",
        help="sr: D = D1 \\ D2 (SR, the exclusion method of 'Answering Multimodal Exclusion "
        "Queries with Lightweight Sparse Disentangled Representations'); avg: E(A) - E(B); "
        "text: one query 'A without B'",
    )  # fmt: skip
    parser.add_argument("--top", type=int, default=10, help="results shown")
    parser.add_argument(
        "--topk",
        dest="gate_k",
        type=int,
        default=DEFAULT_GATE_K,
        help="gate k of the query vectors",
    )
    parser.add_argument(
        "--k-items", type=int, default=None, help="sr: top items per dimension set (default 10)"
    )
    parser.add_argument(
        "--coverage", type=float, default=None,
        help="sr: share of the top items' magnitude each set covers (default 0.5)",
    )  # fmt: skip
    parser.add_argument(
        "--magnitude", choices=["sum", "l2"], default="sum",
        help="sr: a dimension's magnitude is its weight (sum) or squared weight (l2)",
    )  # fmt: skip
    parser.add_argument(
        "--no-normalize", action="store_true",
        help="sr: do not L2-normalise the items' vectors before extracting and ranking",
    )  # fmt: skip
    parser.add_argument(
        "--slq-template", help="text baseline wording (default 'images of {a} without {b}' for "
        "image collections, '{a} without {b}' for texts)",
    )  # fmt: skip
    parser.add_argument(
        "--min-relevant", type=int, default=1, help="--eval: skip pairs with fewer A∧¬B items"
    )
    add_common_args(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    if args.collection and not args.encoder:
        raise InputError("--collection needs --encoder (the collection is encoded now)")
    if args.collection and args.eval:
        raise InputError("--eval needs a stored --index")
    if args.min_relevant < 1:
        raise InputError("--min-relevant must be at least 1")
    sr_options = {
        "k_items": args.k_items, "coverage": args.coverage, "magnitude": args.magnitude,
        "normalize": not args.no_normalize, "slq_template": args.slq_template,
    }  # fmt: skip
    common = {"device": args.device, "mode": args.query_mode, "gate_k": args.gate_k}
    if args.eval:
        result = evaluate_index(
            args.index, args.eval, args.query_encoder or args.encoder,
            min_relevant=args.min_relevant, **common, **sr_options,
        )  # fmt: skip
        emit(args, result, _eval_table(result))
        return
    options = {
        "query": args.query, "query_image": args.query_image, "exclude": args.exclude,
        "method": args.method, "top": args.top, **sr_options,
    }  # fmt: skip
    if args.index:
        result = search_index(args.index, args.query_encoder or args.encoder, **common, **options)
    else:
        result = search_file(args.collection, args.encoder, **common, **options)
    emit(args, result, _table(result))


def _table(result: SearchResult) -> str:
    lines = [f"{result.collection['items']} items searched ({result.method})"]
    if result.dimensions:
        d = result.dimensions
        lines.append(f"D1: {' '.join(d['include_words'][:15])}")
        lines.append(f"D2: {' '.join(d['exclude_words'][:15])}")
        lines.append(f"D = D1 \\ D2: {' '.join(d['kept_words'][:15]) or '(empty)'}")
    lines.extend(f"note: {m}" for m in result.notes)
    rows = [[h.rank, h.id, h.score, (h.text or h.image)[:50], hit_summary(h)] for h in result.hits]
    if rows:
        lines.append(
            format_table(rows, ["#", "id", "score", "item", "contributions (sum = score)"])
        )
    if result.metrics:
        lines.append(
            format_table(
                [[m, *(v[k] for k in METRICS)] for m, v in result.metrics.items()],
                ["method", *METRICS],
            )
        )
    return "\n".join(lines)


def _eval_table(result: EvalResult) -> str:
    lines = [f"{result.collection['items']} items; {len(result.rows)} {result.kind} evaluated"]
    lines.append(
        format_table(
            [[m, *(v[k] for k in METRICS)] for m, v in result.methods.items()],
            ["method", *METRICS],
        )
    )
    if result.kind == "pairs":
        methods = list(result.methods)
        lines.append(
            format_table(
                [
                    [r["a"], r["b"], r["A_not_B"], *(r[m]["AP@10"] for m in methods)]
                    for r in result.rows
                ],
                ["A", "B", "A∧¬B", *(f"AP@10 {m}" for m in methods)],
            )
        )
    else:
        lines.append(
            format_table(
                [
                    [r["query"], " ".join(r["relevant"]), " ".join(r["top"]), r["MRR@10"]]
                    for r in result.rows
                ],
                ["query", "relevant", "top 3", "MRR@10"],
            )
        )
    lines.extend(f"skipped: {s}" for s in result.skipped)
    return "\n".join(lines)
