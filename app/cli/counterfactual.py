"""``lexlens counterfactual``: what it takes for an item to rank first for a query — the
smallest set of query terms to remove (exact) and the shortest word edits, re-encoded by the
model and ranked against the whole collection."""

from __future__ import annotations

import argparse
from pathlib import Path

from lexlens.analysis.counterfactual.counterfactual import counterfactual
from lexlens.analysis.counterfactual.options import CounterfactualOptions
from lexlens.analysis.counterfactual.result import Counterfactual, CounterfactualResult
from lexlens.app.cli import common

COMMAND = common.Command(
    "the smallest edit that ranks an item first, verified by re-encoding",
    description="Term level (exact): the smallest set of vocabulary terms whose removal from "
    "the query vector ranks the target first among all items. Text level: the shortest "
    "sequence of edits (delete query words, or occlude cells of an image query; insert query "
    "words, in order, into the target's text) whose re-encoded inputs rank the target "
    "first against the whole collection, within --max-edits and --max-calls. When none is "
    "found the closest one is shown, marked not found, with which holds: none exists in the "
    "edit space (every candidate ranked) or none found (N of M candidates searched).",
    options=CounterfactualOptions,
    out="folder for counterfactual.json and edits.csv",
)


def add_flags(parser: argparse.ArgumentParser) -> None:
    """The collection, the query (text, a kept query's id or an image), the target."""
    parser.add_argument("--index", required=True, help="a stored collection (lexlens index)")
    query = parser.add_mutually_exclusive_group(required=True)
    query.add_argument("--query", help="query text")
    query.add_argument("--query-id", help="the id of a query the collection keeps")
    query.add_argument("--query-image", help="query image file")
    parser.add_argument("--target", required=True, help="the id of the item to rank first")
    parser.add_argument("--query-encoder", help="default: the collection's own query encoder")


def run(args: argparse.Namespace) -> None:
    options = common.options_from_args(CounterfactualOptions, args)
    out = common.out_folder(args)
    result = counterfactual(
        args.index,
        args.query if args.query_image is None else Path(args.query_image),
        args.target,
        query_id=args.query_id,
        query_encoder=args.query_encoder,
        device=args.device,
        options=options,
    )
    common.write_out(out, result)
    common.emit(args, result, render(result))


def _answer_lines(answer: Counterfactual) -> list[str]:
    """One level's answer in words, then its edits."""
    rank = "none" if answer.rank_after is None else answer.rank_after
    before = "not retrieved" if answer.rank_before is None else f"rank {answer.rank_before}"
    state = "found" if answer.found else "NOT found — closest tried"
    lines = [
        f"{answer.level}: {state}; {before} → rank {rank} (score {answer.score_after:.4f}, "
        f"first rival {answer.rival_after}), verified {str(answer.verified).lower()}, "
        f"{answer.model_calls} model calls, {answer.seconds:.2f} s"
    ]
    for edit in answer.edits:
        what = edit.get("word", edit.get("term", edit.get("cell")))
        at = f" ({edit['at']}, {edit['order']})" if edit["op"] == "insert" else ""
        lines.append(f"  {edit['op']} {edit['side']}: {what}{at}")
    if answer.level == "text" and answer.edits:
        lines.append(f"  edited query: {answer.edited_query}")
        if answer.edited_document is not None:
            lines.append(f"  edited document: {answer.edited_document}")
    lines += [f"  note: {n}" for n in answer.notes]
    return lines


def render(result: CounterfactualResult) -> str:
    """The text view: the target, each level's answer and its edits."""
    lines = [f"target {result.target} for query {result.query!r}"]
    if result.counterfactual is not None:
        lines += _answer_lines(result.counterfactual)
    lines += _answer_lines(result.terms)
    lines += [f"note: {n}" for n in result.notes]
    return "\n".join(lines)
