"""``lexlens evaluate``: a stored collection on its queries and judgements — metrics, why
each query fails, which words are to blame."""

from __future__ import annotations

import argparse

from lexlens.analysis.benchmark.evaluate import evaluate_benchmark
from lexlens.analysis.benchmark.evaluation_result import (
    BLAME_COLUMNS,
    MEASURES,
    BenchmarkEvaluationResult,
    worst_first,
)
from lexlens.analysis.benchmark.options import EvaluationOptions
from lexlens.app.cli import common

#: Rows of each table in the text view (the JSON and --out files hold all).
SHOWN = 10


COMMAND = common.Command(
    "metrics, per-query failures and term blame of a stored collection",
    description="Search the collection with every query (or read another system's run) "
    "and report nDCG@10, RR@10, R@1/5/10/100 and AP@100 (ir-measures), each failing "
    "query's top non-relevant and best relevant item with their q ⊙ d decompositions and "
    "the decisive words, and the words to blame across the benchmark.",
    options=EvaluationOptions,
    out="folder for evaluation.json, the CSV tables and run.trec",
    progress=True,
)


def add_flags(parser: argparse.ArgumentParser) -> None:
    """The collection, its queries and judgements (or a run), the query encoder."""
    parser.add_argument("--index", required=True, help="a stored collection (lexlens index)")
    parser.add_argument("--queries", help="queries: BEIR queries.jsonl or a qid<TAB>text TSV")
    parser.add_argument("--qrels", help="judgements: TREC (qid 0 docid rel) or BEIR TSV")
    parser.add_argument("--run", help="explain this TREC run instead of searching")
    parser.add_argument("--query-encoder", help="default: the collection's own query encoder")


def run(args: argparse.Namespace) -> None:
    options = common.options_from_args(EvaluationOptions, args)
    out = common.out_folder(args)
    result = evaluate_benchmark(
        args.index, queries=args.queries, qrels=args.qrels, run=args.run,
        query_encoder=args.query_encoder, device=args.device,
        progress=common.progress_printer(args), options=options,
    )  # fmt: skip
    common.write_out(out, result)
    common.emit(args, result, render(result))


#: The text view's columns (named as in per_query.csv and failures.csv).
WORST_COLUMNS = ["query_id", "nDCG@10", "first_relevant_rank", "relevant_rank", "relevant_status"]
FAILURE_COLUMNS = ["query_id", "nonrelevant", "relevant", "relevant_rank", "relevant_status"]


def _rank(rank: int | None) -> int | str:
    return "-" if rank is None else rank


def render(result: BenchmarkEvaluationResult) -> str:
    """The text view: metrics, the worst queries, failures and blame (columns named as in
    the CSV files; an absent rank is "-", relevant_status says why)."""
    aggregate = result.metrics["aggregate"]
    blocks = [
        f"{result.settings['queries']} queries, {result.index.get('items', '?')} items, "
        f"query encoder {result.encoder}",
        common.format_table([[aggregate[m] for m in MEASURES]], list(MEASURES)),
    ]
    worst = [
        [q["id"], q["nDCG@10"], _rank(q["first_relevant_rank"]), _rank(q["relevant_rank"]),
         q["relevant_status"], q["text"][:50]]
        for q in worst_first(result.metrics["per_query"])[:SHOWN]
    ]  # fmt: skip
    blocks.append(common.format_table(worst, [*WORST_COLUMNS, "query"]))
    failures = [
        [f.query_id, f.nonrelevant.id if f.nonrelevant else "-",
         f.relevant.id if f.relevant else "-", _rank(f.relevant.rank if f.relevant else None),
         f.relevant_status, " ".join(d["word"] for d in f.decisive[:5])]
        for f in result.failures[:SHOWN]
    ]  # fmt: skip
    blocks.append(common.format_table(failures, [*FAILURE_COLUMNS, "decisive_words"]))
    blocks.append(
        common.format_table(
            [[b["word"], b["pushed"], b["amount"], b["mismatch"]] for b in result.blame[:SHOWN]],
            [c for c in BLAME_COLUMNS if not c.endswith("_queries")],
        )
    )
    blocks += [f"note: {n}" for n in result.notes]
    return "\n\n".join(blocks)
