"""``lexlens search``: search a stored index or a small file, exclusion "A but not B",
evaluation over label pairs."""

from __future__ import annotations

import argparse

from lexlens.analysis.core.counts import counted
from lexlens.analysis.search.exclusion import set_labels
from lexlens.analysis.search.hits import hit_summary
from lexlens.analysis.search.options import SearchOptions
from lexlens.analysis.search.search import SearchResult, search_file, search_index
from lexlens.analysis.search.table_evaluation import (
    MEASURES,
    TableEvaluationOptions,
    TableEvaluationResult,
    evaluate_index,
)
from lexlens.app.cli import common
from lexlens.models.base import InputError

COMMAND = common.Command(
    "search a collection (with --exclude: A but not B; --eval: a table of pairs)"
)


def add_flags(parser: argparse.ArgumentParser) -> None:
    """Where to search, what to find, then the options of a search and of ``--eval``."""
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--index", help="a stored index folder (lexlens index)")
    where.add_argument("--collection", help="a small .txt/.csv/.jsonl of texts, encoded now")
    common.add_encoder(
        parser, "encoder of --collection (with --index: the query encoder)", required=False
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
    parser.add_argument("--exclude", help="what to exclude (B)")
    common.add_options(parser, SearchOptions)
    common.add_options(  # --eval's own (--min-relevant); the rest are search's
        parser, TableEvaluationOptions, skip=tuple(d.name for d in SearchOptions.declared())
    )


def run(args: argparse.Namespace) -> None:
    if args.collection and not args.encoder:
        raise InputError("--collection needs --encoder (the collection is encoded now)")
    if args.collection and args.eval:
        raise InputError("--eval needs a stored --index")
    options = common.options_from_args(SearchOptions, args)
    if args.eval:
        result = evaluate_index(
            args.index,
            args.eval,
            args.query_encoder or args.encoder,
            device=args.device,
            options=common.options_from_args(TableEvaluationOptions, args),
        )
        common.emit(args, result, _eval_table(result))
        return
    inputs = {
        "query": args.query,
        "query_image": args.query_image,
        "exclude": args.exclude,
        "device": args.device,
        "options": options,
    }
    if args.index:
        result = search_index(args.index, args.query_encoder or args.encoder, **inputs)
    else:
        result = search_file(args.collection, args.encoder, **inputs)
    common.emit(args, result, _table(result))


def _table(result: SearchResult) -> str:
    lines = [f"{counted(result.collection['items'], 'item')} searched ({result.method})"]
    if result.dimensions:
        d = result.dimensions
        lines.append(f"D1: {', '.join(set_labels(d, 'include')[:15])}")
        lines.append(f"D2: {', '.join(set_labels(d, 'exclude')[:15])}")
        lines.append(f"D = D1 \\ D2: {', '.join(set_labels(d, 'kept')[:15]) or '(empty)'}")
    lines.extend(f"note: {m}" for m in result.notes)
    rows = [
        [h.rank, h.id, h.score, (h.text or h.image)[:50], hit_summary(h)] for h in result.results
    ]
    if rows:
        lines.append(
            common.format_table(rows, ["#", "id", "score", "item", "contributions (sum = score)"])
        )
    if result.metrics:
        lines.append(
            common.format_table(
                [[m, *(v[k] for k in MEASURES)] for m, v in result.metrics.items()],
                ["method", *MEASURES],
            )
        )
    return "\n".join(lines)


def _eval_table(result: TableEvaluationResult) -> str:
    table = result.metrics["per_query"]
    lines = [f"{result.index['items']} items; {len(table)} {result.kind} evaluated"]
    lines.append(
        common.format_table(
            [[m, *(v[k] for k in MEASURES)] for m, v in result.metrics["aggregate"].items()],
            ["method", *MEASURES],
        )
    )
    if result.kind == "pairs":
        methods = list(result.metrics["aggregate"])
        lines.append(
            common.format_table(
                [[r["a"], r["b"], r["A_not_B"], *(r[m]["AP@10"] for m in methods)] for r in table],
                ["A", "B", "A∧¬B", *(f"AP@10 {m}" for m in methods)],
            )
        )
    else:
        lines.append(
            common.format_table(
                [
                    [r["query"], " ".join(r["relevant"]), " ".join(r["top"]), r["RR@10"]]
                    for r in table
                ],
                ["query", "relevant", "top 3", "RR@10"],
            )
        )
    lines.extend(f"skipped: {s}" for s in result.skipped)
    return "\n".join(lines)
