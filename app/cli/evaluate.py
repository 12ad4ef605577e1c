"""``lexlens evaluate``: a stored collection on its queries and judgements — metrics, why
each query fails, which words are to blame."""

from __future__ import annotations

import argparse

from lexlens.analysis.benchmark.evaluate import (
    DEFAULT_TOP,
    MEASURES,
    EvaluationResult,
    evaluate_benchmark,
)
from lexlens.analysis.core.gating import DEFAULT_GATE_K
from lexlens.analysis.core.outputs import check_out_dir, write_files
from lexlens.app.cli.common import add_common_args, emit, format_table, progress_printer

#: Rows of each table in the text view (the JSON and --out files hold all).
SHOWN = 10


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "evaluate",
        help="metrics, per-query failures and term blame of a stored collection",
        description="Search the collection with every query (or read another system's run) "
        "and report nDCG@10, RR@10, R@1/5/10/100 and AP@100 (ir-measures), each failing "
        "query's top non-relevant and best relevant item with their q ⊙ d decompositions and "
        "the decisive words, and the words to blame across the benchmark.",
    )
    parser.add_argument("--index", required=True, help="a stored collection (lexlens index)")
    parser.add_argument("--queries", help="queries: BEIR queries.jsonl or a qid<TAB>text TSV")
    parser.add_argument("--qrels", help="judgements: TREC (qid 0 docid rel) or BEIR TSV")
    parser.add_argument("--run", help="explain this TREC run instead of searching")
    parser.add_argument(
        "--top", type=int, default=DEFAULT_TOP, help=f"items per query (default {DEFAULT_TOP})"
    )
    parser.add_argument("--query-encoder", help="default: the collection's own query encoder")
    parser.add_argument("--query-mode", choices=["parametric", "bow"], default="parametric")
    parser.add_argument(
        "--topk", dest="gate_k", type=int, default=DEFAULT_GATE_K, help="gate k of the queries"
    )
    parser.add_argument("--out", help="folder for evaluation.json, the CSV tables and run.trec")
    parser.add_argument("--progress", action="store_true", help="progress lines on stderr")
    add_common_args(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    if args.out:
        check_out_dir(args.out)
    result = evaluate_benchmark(
        args.index, queries=args.queries, qrels=args.qrels, run=args.run, top=args.top,
        query_encoder=args.query_encoder, mode=args.query_mode, gate_k=args.gate_k,
        device=args.device, progress=progress_printer(args),
    )  # fmt: skip
    if args.out:
        write_files(args.out, result.files())
    emit(args, result, render(result))


def render(result: EvaluationResult) -> str:
    """The text view: metrics, the worst queries, failures and blame."""
    aggregate = result.metrics["aggregate"]
    per_query = result.metrics["per_query"]
    blocks = [
        f"{result.settings['queries']} queries, {result.index.get('items', '?')} items, "
        f"query encoder {result.encoder}",
        format_table([[aggregate[m] for m in MEASURES]], list(MEASURES)),
    ]
    worst = sorted(per_query, key=lambda q: (q["nDCG@10"], q["id"]))[:SHOWN]
    blocks.append(
        format_table(
            [
                [q["id"], q["nDCG@10"], q["first_relevant_rank"] or "-", q["text"][:50]]
                for q in worst
            ],
            ["worst queries", "nDCG@10", "first relevant", "text"],
        )
    )
    rows = []
    for f in result.failures[:SHOWN]:
        top = f.nonrelevant.id if f.nonrelevant else "-"
        rel = f"{f.relevant.id} @ {f.relevant.rank}" if f.relevant else "-"
        rows.append([f.query_id, top, rel, " ".join(d["word"] for d in f.decisive[:5])])
    blocks.append(
        format_table(rows, ["failing query", "first item", "relevant @ rank", "decisive words"])
    )
    blocks.append(
        format_table(
            [[b["word"], b["pushed"], b["amount"], b["mismatch"]] for b in result.blame[:SHOWN]],
            ["word", "pushed a wrong item up", "by", "missing from the relevant item"],
        )
    )
    blocks += [f"note: {n}" for n in result.notes]
    return "\n\n".join(blocks)
