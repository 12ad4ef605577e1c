"""``lexlens evaluate``: a stored collection on its queries and judgements — metrics, why
each query fails, which words are to blame; with several systems (``--index`` repeated,
``--gate-k`` or ``--query-encoder`` twice, ``--run`` files), is B better than A, on which
queries, and why (:func:`~lexlens.analysis.systems.compare.evaluate_systems`)."""

from __future__ import annotations

import argparse

from lexlens.analysis.benchmark.evaluation_result import (
    BLAME_COLUMNS,
    MEASURES,
    BenchmarkEvaluationResult,
    worst_first,
)
from lexlens.analysis.benchmark.options import EvaluationOptions
from lexlens.analysis.counterfactual.evaluation import counterfactuals_text, with_counterfactuals
from lexlens.analysis.counterfactual.options import CounterfactualOptions
from lexlens.analysis.faithfulness.benchmark import (
    FaithfulnessOptions,
    faithfulness_text,
    with_faithfulness,
)
from lexlens.analysis.systems.compare import evaluate_systems
from lexlens.analysis.systems.options import ComparisonOptions
from lexlens.analysis.systems.result import SystemsComparison
from lexlens.analysis.systems.systems import SystemsSpec
from lexlens.app.cli import common
from lexlens.models.base import InputError

#: Rows of each table in the text view (the JSON and --out files hold all).
SHOWN = 10


COMMAND = common.Command(
    "metrics, per-query failures and term blame of a stored collection; several systems compared",
    description="Search the collection with every query (or read another system's run) "
    "and report nDCG@10, RR@10, R@1/5/10/100 and AP@100 (ir-measures), each failing "
    "query's top non-relevant and best relevant item with their q ⊙ d decompositions and "
    "the decisive words, and the words to blame across the benchmark. With two or more "
    "systems (--index twice, --gate-k or --query-encoder twice, --run files): each against "
    "the baseline with bootstrap intervals, paired t, Wilcoxon and randomization tests "
    "(corrected), effect size, wins/ties/losses, URisk/TRisk/GeoRisk, the largest wins and "
    "losses and why.",
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
        help=gate.help_line() + "; twice: one system each",
    )
    parser.add_argument(
        "--with-exact",
        action="store_true",
        help="with runs: the collection's own exact ranking is a system too",
    )
    parser.add_argument(
        "--latex", action="store_true", help="several systems: print the LaTeX table"
    )
    common.add_options(parser, EvaluationOptions, skip=("gate_k",))
    common.add_options(parser, ComparisonOptions)
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
    "counterfactuals": ["side", "max_edits", "max_calls"],
}


def _check_tuning(args: argparse.Namespace) -> None:
    """A flag of --faithfulness or --counterfactuals given without it is an error."""
    for switch, names in TUNING.items():
        given = [n for n in names if getattr(args, n, None) is not None]
        if given and not getattr(args, switch):
            flag = "--" + given[0].replace("_", "-")
            raise InputError(f"{flag} applies with --{switch}, which was not given")


def run(args: argparse.Namespace) -> None:
    _check_tuning(args)
    gates = args.gate_k or []
    texts = {d.name: getattr(args, d.name, None) for d in EvaluationOptions.declared()}
    evaluation = EvaluationOptions.from_texts({**texts, "gate_k": gates[0] if gates else None})
    gate_ks = [EvaluationOptions.from_texts({**texts, "gate_k": g}).gate_k for g in gates]
    spec = SystemsSpec(
        indexes=args.index,
        runs=args.run or [],
        names=args.name or [],
        gate_ks=gate_ks,
        query_encoders=args.query_encoder or [],
        with_exact=args.with_exact,
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
    )
    if args.faithfulness:
        result = with_faithfulness(
            args.index[0],
            result,
            device=args.device,
            progress=common.progress_printer(args),
            options=common.options_from_args(FaithfulnessOptions, args),
        )
    if args.counterfactuals:
        result = with_counterfactuals(
            args.index[0],
            result,
            device=args.device,
            progress=common.progress_printer(args),
            options=CounterfactualOptions.from_texts(
                {"side": args.side, "max_edits": args.max_edits, "max_calls": args.max_calls}
            ),
        )
    common.write_out(out, result)
    if isinstance(result, SystemsComparison):
        text = result.files()["comparison.tex"].decode() if args.latex else compared(result)
        common.emit(args, result, text)
    elif args.latex:
        raise InputError("--latex: a LaTeX table compares two or more systems")
    else:
        text = render(result) + faithfulness_text(result) + counterfactuals_text(result)
        common.emit(args, result, text)


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
        [
            q["id"],
            q["nDCG@10"],
            _rank(q["first_relevant_rank"]),
            _rank(q["relevant_rank"]),
            q["relevant_status"],
            q["text"][:50],
        ]
        for q in worst_first(result.metrics["per_query"])[:SHOWN]
    ]
    blocks.append(common.format_table(worst, [*WORST_COLUMNS, "query"]))
    failures = [
        [
            f.query_id,
            f.nonrelevant.id if f.nonrelevant else "-",
            f.relevant.id if f.relevant else "-",
            _rank(f.relevant.rank if f.relevant else None),
            f.relevant_status,
            " ".join(d["word"] for d in f.decisive[:5]),
        ]
        for f in result.failures[:SHOWN]
    ]
    blocks.append(common.format_table(failures, [*FAILURE_COLUMNS, "decisive_words"]))
    blocks.append(
        common.format_table(
            [[b["word"], b["pushed"], b["amount"], b["mismatch"]] for b in result.blame[:SHOWN]],
            [c for c in BLAME_COLUMNS if not c.endswith("_queries")],
        )
    )
    blocks += [f"note: {n}" for n in result.notes]
    return "\n\n".join(blocks)


def _p(value: float) -> str:
    return f"{value:.3g}"


def compared(result: SystemsComparison) -> str:
    """The text view of several systems: means (†: significant against the baseline), the
    significance table, the largest wins and losses, notes."""
    from lexlens.analysis.systems.report import marks

    significant = marks(result)
    means = [
        [
            s.name + (" *" if s.name == result.baseline else ""),
            s.kind,
            *(
                f"{result.means[s.name][m]:.4f}" + ("†" if significant.get((s.name, m)) else "")
                for m in result.measures
            ),
        ]
        for s in result.systems
    ]
    settings = result.settings
    blocks = [
        f"{settings['queries']} queries, {len(result.systems)} systems, baseline * "
        f"{result.baseline}; † {settings['test']} {settings['correction']}-corrected p < "
        f"{settings['significance']}",
        common.format_table(means, ["system", "kind", *result.measures]),
    ]
    rows = [
        [
            f"{t['system_b']} vs {t['system_a']}",
            t["measure"],
            f"{t['delta']:+.4f}" + ("†" if t["significant"] else ""),
            f"[{t['ci_low']:+.3f}, {t['ci_high']:+.3f}]",
            _p(t["p_t_corrected"]),
            _p(t["p_wilcoxon_corrected"]),
            _p(t["p_randomization_corrected"]),
            "-" if t["effect_size"] is None else f"{t['effect_size']:.2f}",
            f"{t['wins']}/{t['ties']}/{t['losses']}",
            f"{t['urisk_1']:+.4f}",
            "-" if t["trisk_1"] is None else f"{t['trisk_1']:.2f}",
        ]
        for t in result.table
    ]
    blocks.append(
        common.format_table(
            rows,
            [
                "comparison",
                "measure",
                "delta",
                "95% CI",
                "p_t",
                "p_wilcoxon",
                "p_rand",
                "d",
                "W/T/L",
                "urisk_1",
                "trisk_1",
            ],
        )
    )
    for e in result.extremes:
        listed = [
            [kind, q["query_id"], f"{q['delta']:+.3f}", q["query"][:50]]
            for kind in ("wins", "losses")
            for q in e[kind][: SHOWN // 2]
        ]
        if listed:
            title = f"{e['system_b']} vs {e['system_a']}, {e['measure']}"
            blocks.append(
                title + "\n" + common.format_table(listed, ["", "query_id", "delta", "query"])
            )
    blocks += [f"note: {n}" for n in result.notes]
    return "\n\n".join(blocks)
