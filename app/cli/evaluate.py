"""``lexlens evaluate``: a stored collection on its queries and judgements — metrics, why
each query fails, which words are to blame; with several systems (``--index`` repeated,
``--gate-k`` (the query's gate), ``--doc-gate-k`` (the documents', re-gated from the stored
vectors) or ``--query-encoder`` twice, ``--run`` files, ``--bm25``), is B better than A, on which
queries, and why (:func:`~lexlens.analysis.systems.comparison.evaluate_systems`)."""

from __future__ import annotations

import argparse

from lexlens.analysis.counterfactual.options import CounterfactualOptions
from lexlens.analysis.evaluation.options import EvaluationOptions
from lexlens.analysis.faithfulness.options import FaithfulnessOptions
from lexlens.analysis.systems.bm25 import Bm25Options
from lexlens.analysis.systems.comparison import evaluate_systems
from lexlens.analysis.systems.engine_loss import EngineOptions
from lexlens.analysis.systems.engine_sweep import SweepOptions
from lexlens.analysis.systems.options import ComparisonOptions
from lexlens.analysis.systems.systems import SystemsSpec
from lexlens.app.cli import common
from lexlens.app.cli.evaluate_view import view
from lexlens.models.base import InputError

COMMAND = common.Command(
    "metrics, per-query failures and term blame of a stored collection; several systems compared",
    description="Search the collection with every query (or read another system's run) "
    "and report nDCG@10, RR@10, R@1/5/10/100 and AP@100 (ir-measures), each failing "
    "query's top non-relevant and best relevant item with their q ⊙ d decompositions and "
    "the decisive words, and the words to blame across the benchmark. With two or more "
    "systems (--index twice, --gate-k, --doc-gate-k or --query-encoder twice, --run files, "
    "--bm25): each against "
    "the baseline with bootstrap intervals, paired t, Wilcoxon and randomization tests "
    "(corrected), effect size, wins/ties/losses, URisk/TRisk/GeoRisk, the largest wins and "
    "losses and why, and each system's FLOPs, postings per query, latency and index bytes. "
    "With --sweep seismic: Seismic (pyseismic-lsr) built over the stored vectors and searched "
    "at each --sweep-query-cuts setting, accuracy@10, nDCG@10 and latency beside the exact "
    "scorer's (engine_sweep.csv).",
    out="folder for evaluation.json, the CSV tables and run.trec (several systems: "
    "comparison.json/.csv/.html/.tex and per_query_deltas.csv)",
    progress=True,
)


def add_flags(parser: argparse.ArgumentParser) -> None:
    """The collections, their queries and judgements, runs, gates and query encoders, and
    the options of an evaluation and of a comparison."""
    parser.add_argument(
        "--index",
        required=True,
        action="append",
        help="a stored collection (lexlens index); twice or more: one system each",
    )
    parser.add_argument("--queries", help="queries: BEIR queries.jsonl or a qid<TAB>text TSV")
    parser.add_argument("--qrels", help="judgements: TREC (qid 0 docid rel) or BEIR TSV")
    parser.add_argument(
        "--run",
        action="append",
        help="another system's TREC run (explained instead of searching); several: one "
        "system each, compared",
    )
    parser.add_argument("--name", action="append", help="a run's system name, in order")
    parser.add_argument(
        "--query-vectors",
        metavar="FILE",
        help="queries encoded elsewhere, ranked instead of encoding: Anserini's impact "
        "query TSV (qid<TAB>term term …) or JSON lines {id, vector: {term: weight}}",
    )
    parser.add_argument(
        "--query-encoder",
        action="append",
        help="default: the collection's own query encoder; twice: one system each",
    )
    gate = EvaluationOptions.option("gate_k")
    parser.add_argument(
        gate.flag,
        dest="gate_k",
        action="append",
        metavar="GATE_K",
        help="the query's " + gate.help_line() + "; twice: one system each",
    )
    parser.add_argument(
        "--doc-gate-k",
        dest="doc_gate_k",
        action="append",
        metavar="K",
        help="re-gate the stored document vectors at k (top-k of each item's stored weights "
        "plus its own tokens, as indexing at k; no re-encoding; at most the stored gate); "
        "twice: one system each",
    )
    parser.add_argument(
        "--with-exact",
        action="store_true",
        help="with runs: the collection's own exact ranking is a system too",
    )
    parser.add_argument(
        "--bm25",
        action="store_true",
        help="BM25 (bm25s) over the first collection's item texts is a system too, each "
        "score decomposed into its query terms",
    )
    common.add_options(parser, Bm25Options)
    parser.add_argument(
        "--latex", action="store_true", help="several systems: print the LaTeX table"
    )
    common.add_options(parser, EvaluationOptions, skip=("gate_k",))
    common.add_options(parser, ComparisonOptions)
    common.add_options(parser, EngineOptions)
    common.add_options(parser, SweepOptions)
    parser.add_argument(
        "--faithfulness",
        action="store_true",
        help="test each failure's explanation by re-encoding: its words deleted, "
        "comprehensiveness and AOPC against random words (one system)",
    )
    common.add_options(parser, FaithfulnessOptions, skip=("seed",))
    parser.add_argument(
        "--counterfactuals",
        action="store_true",
        help="for each failure, the shortest verified edit that ranks its relevant item "
        "first (FlipRate, mean edits, mean model calls; one system)",
    )
    common.add_options(parser, CounterfactualOptions, skip=("level", "query_mode", "gate_k"))


#: Flags that tune one addition, refused without it (they would be ignored silently).
TUNING = {
    "faithfulness": [d.name for d in FaithfulnessOptions.declared() if d.name != "seed"],
    "counterfactuals": ["side", "max_edits", "max_calls", "insert_at", "allow_stop_words"],
    "bm25": [d.name for d in Bm25Options.declared()],
}


def _check_tuning(args: argparse.Namespace) -> None:
    """A flag of --faithfulness, --counterfactuals or --bm25 given without it is an error."""
    for switch, names in TUNING.items():
        given = [n for n in names if getattr(args, n, None) is not None]
        if given and not getattr(args, switch):
            flag = "--" + given[0].replace("_", "-")
            raise InputError(f"{flag} applies with --{switch}, which was not given")


def _doc_gate_k(text: str) -> int:
    """A --doc-gate-k value as an integer (its range is the analysis's to check)."""
    try:
        return int(text)
    except ValueError:
        raise InputError(f"--doc-gate-k must be an integer gate k, not {text!r}") from None


def run(args: argparse.Namespace) -> None:
    _check_tuning(args)
    gates = args.gate_k or []
    texts = {d.name: getattr(args, d.name, None) for d in EvaluationOptions.declared()}
    evaluation = EvaluationOptions.from_texts({**texts, "gate_k": gates[0] if gates else None})
    gate_ks = [EvaluationOptions.from_texts({**texts, "gate_k": g}).gate_k for g in gates]
    doc_gate_ks = [_doc_gate_k(k) for k in args.doc_gate_k or []]
    faithfulness = (
        common.options_from_args(FaithfulnessOptions, args) if args.faithfulness else None
    )
    counterfactuals = (
        CounterfactualOptions.from_texts(
            {n: getattr(args, n, None) for n in TUNING["counterfactuals"]}
        )
        if args.counterfactuals
        else None
    )
    spec = SystemsSpec(
        indexes=args.index,
        runs=args.run or [],
        names=args.name or [],
        gate_ks=gate_ks,
        query_encoders=args.query_encoder or [],
        with_exact=args.with_exact,
        bm25=common.options_from_args(Bm25Options, args) if args.bm25 else None,
        doc_gate_ks=doc_gate_ks,
    )
    out = common.out_folder(args)
    result = evaluate_systems(
        spec,
        queries=args.queries,
        qrels=args.qrels,
        device=args.device,
        progress=common.progress_printer(args),
        evaluation=evaluation,
        options=common.options_from_args(ComparisonOptions, args),
        faithfulness=faithfulness,
        counterfactuals=counterfactuals,
        query_vectors=args.query_vectors,
        engine=common.options_from_args(EngineOptions, args),
        sweep=common.options_from_args(SweepOptions, args),
    )
    reported = result.reported()
    common.write_out(out, reported)
    common.emit(args, reported, result.latex() if args.latex else view(result))
