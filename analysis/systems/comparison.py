"""Is B better than A, on which queries, and why: two or more systems on one benchmark.

:func:`evaluate_systems` is what ``lexlens evaluate`` calls; it returns an
:class:`~lexlens.analysis.evaluation.result.Evaluation` for one system or several (a
comparison of one is a list of one): one system's evaluation
(:func:`~lexlens.analysis.evaluation.evaluate.evaluate_benchmark`), or, for several, the
baseline's with the comparison (:func:`compare_systems`) added as its section:

- each system evaluated on the same queries and judgements
  (:mod:`lexlens.analysis.systems.systems`: which systems, queries a run misses scored 0);
- per measure, each system's mean and, for every pair compared (each against the baseline,
  or every pair), the difference with its bootstrap interval, the paired t-test, Wilcoxon
  signed-rank and randomization tests with p-values corrected over every comparison ×
  measure, the effect size, wins/ties/losses, URisk and TRisk; GeoRisk with three or more
  systems (:mod:`lexlens.analysis.systems.table`);
- failures across systems: per pair, the queries B fixes and breaks (success: the first
  relevant item first), McNemar's exact test on them, the causes of the fixed and of the new
  failures, and which causes B reduced (:mod:`lexlens.analysis.systems.fixes`);
- what each system costs beside what it finds: FLOPs, mean postings touched per query, the
  exact scorer's mean latency, the index's bytes (:mod:`lexlens.analysis.systems.efficiency`);
- where: every query's values, the largest wins and losses of each pair on the first
  measure (nDCG@10);
- why: each of those explained (:mod:`lexlens.analysis.systems.why`), and the blame shift
  across the benchmark; an outside run paired with its collection's exact ranking also gets
  what the engine changed (:mod:`lexlens.analysis.systems.engine`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from lexlens.analysis.collections.arguments import index_argument
from lexlens.analysis.collections.stored import StoredCollection
from lexlens.analysis.core.arguments import device_argument, progress_argument
from lexlens.analysis.core.metrics import is_relevant
from lexlens.analysis.core.results import Progress, progress_part
from lexlens.analysis.counterfactual.evaluation import with_counterfactuals
from lexlens.analysis.counterfactual.options import CounterfactualOptions
from lexlens.analysis.evaluation.evaluate import evaluate_benchmark
from lexlens.analysis.evaluation.options import EvaluationOptions
from lexlens.analysis.evaluation.result import MEASURES, Evaluation
from lexlens.analysis.faithfulness.benchmark import with_faithfulness
from lexlens.analysis.faithfulness.options import FaithfulnessOptions
from lexlens.analysis.systems.efficiency import efficiency_of
from lexlens.analysis.systems.engine import engine_comparison
from lexlens.analysis.systems.engine_loss import (
    EngineOptions,
    check_engine,
    check_engine_systems,
    with_engine_losses,
)
from lexlens.analysis.systems.engine_sweep import (
    SweepOptions,
    check_sweep,
    sweep_over,
    sweep_system,
)
from lexlens.analysis.systems.fixes import pair_fixes
from lexlens.analysis.systems.options import ComparisonOptions
from lexlens.analysis.systems.result import SystemsComparison
from lexlens.analysis.systems.systems import (
    BM25,
    LEXLENS,
    RUN,
    Benchmark,
    Evaluated,
    System,
    SystemsSpec,
    check_spec,
    collection_key,
    evaluate_each,
    read_benchmark,
    system_collection,
    systems_of,
)
from lexlens.analysis.systems.table import (
    extremes,
    georisk_table,
    pairs_of,
    significance_rows,
    with_efficiency,
)
from lexlens.analysis.systems.why import Explaining, QueryWhy, blame_shift, explain_query
from lexlens.models.base import InputError

#: Why a pair with BM25 has no blame shift (the pair's note and the comparison's).
UNSHIFTED = "BM25's failures are explained by its own terms in the why, never by the collection's"


def evaluate_systems(
    spec: SystemsSpec,
    *,
    queries: str | Path | Mapping | None = None,
    qrels: str | Path | Mapping | None = None,
    device: str | None = None,
    progress: Progress | None = None,
    evaluation: EvaluationOptions | None = None,
    options: ComparisonOptions | None = None,
    faithfulness: FaithfulnessOptions | None = None,
    counterfactuals: CounterfactualOptions | None = None,
    query_vectors: str | Path | None = None,
    engine: EngineOptions | None = None,
    sweep: SweepOptions | None = None,
) -> Evaluation:
    """The systems ``spec`` describes evaluated on one benchmark, as one
    :class:`~lexlens.analysis.evaluation.result.Evaluation`: one system's as
    ``evaluate_benchmark`` gives it, or for several the baseline's with their comparison
    (:func:`compare_systems`) as its ``comparison`` section. With ``faithfulness`` or
    ``counterfactuals`` (their options; ``None``: not asked), the one system's evaluation
    gets them as sections (:func:`~lexlens.analysis.faithfulness.benchmark.
    with_faithfulness`, :func:`~lexlens.analysis.counterfactual.evaluation.
    with_counterfactuals`). Each collection is opened once. Every argument is checked
    before anything is evaluated: the additions' options, and that they have one system
    of Lexlens's own ranking to test. ``query_vectors`` (queries encoded elsewhere) rank
    one collection instead of encoding its queries. With ``engine`` (the engine that made a
    run and its declared pruning), each item the run lost from the exact ranking gets its
    reason (:func:`~lexlens.analysis.systems.engine_loss.with_engine_losses`). With
    ``sweep`` (an engine and its settings), the engine itself runs at each setting over the
    collection of Lexlens's own ranking, beside the exact scorer
    (:mod:`~lexlens.analysis.systems.engine_sweep`): the comparison's ``sweep``, or one
    system's evaluation's ``engine_sweep`` section."""
    if not isinstance(spec, SystemsSpec):
        raise InputError(f"spec must be a SystemsSpec, not {type(spec).__name__}")
    evaluation, options = _checked_options(evaluation, options)
    additions = _checked_additions(faithfulness, counterfactuals)
    check_spec(spec)
    engine = engine or EngineOptions()
    check_engine(engine)
    sweep = sweep or SweepOptions()
    check_sweep(sweep)
    opened = [index_argument(ix, "index") for ix in spec.indexes]
    systems = systems_of(replace(spec, indexes=opened), evaluation.gate_k)
    if additions and (len(systems) > 1 or systems[0].kind == RUN):
        asked = " and ".join(additions)
        if len(systems) > 1:
            raise InputError(
                f"{asked} test one system's failures: {len(systems)} systems are given "
                f"({', '.join(s.name for s in systems)})"
            )
        raise InputError(f"{asked} re-encode Lexlens's own queries: not another system's run")
    if query_vectors is not None and (len(systems) > 1 or additions):
        also = f"{len(systems)} systems" if len(systems) > 1 else " and ".join(additions)
        raise InputError(f"--query-vectors rank one collection as given: not with {also}")
    if len(systems) == 1:
        if engine.engine is not None:
            raise InputError(f"--engine {engine.engine}: give the run with --with-exact")
        if sweep.sweep is not None:
            sweep_system(systems)
            if query_vectors is not None:
                raise InputError(
                    "--sweep encodes the queries as the collection's own query encoder does: "
                    "not with --query-vectors"
                )
        if options != ComparisonOptions():
            changed = [
                d.flag
                for d in ComparisonOptions.declared()
                if getattr(options, d.name) != d.default
            ]
            raise InputError(f"{', '.join(changed)}: a comparison needs two or more systems")
        one = systems[0]
        progress = progress_argument(progress)
        steps = 1 + len(additions)
        result = evaluate_benchmark(
            system_collection(one, {one.index: opened[0]}),
            queries=queries,
            qrels=qrels,
            run=spec.runs[0] if spec.runs else None,
            query_encoder=one.query_encoder,
            query_vectors=query_vectors,
            device=device,
            progress=progress_part(progress, 0.0, 1 / steps),
            options=evaluation,
        )
        result = _with_additions(result, faithfulness, counterfactuals, device, progress, steps)
        if sweep.sweep is None:
            return result
        benchmark = read_benchmark(opened[0], queries, qrels)
        texts = {q["id"]: q["text"] for q in result.metrics["per_query"]}
        swept = sweep_over(
            one,
            texts,
            benchmark.qrels,
            sweep,
            evaluation.query_mode,
            device,
            {str(ix.path): ix for ix in opened},
        )
        return result.with_section(swept)
    evaluated, comparison = _evaluated_and_compared(
        systems,
        {str(ix.path): ix for ix in opened},
        queries=queries,
        qrels=qrels,
        device=device,
        progress=progress,
        evaluation=evaluation,
        options=options,
        engine=engine,
        sweep=sweep,
    )
    baseline = next(e for e in evaluated if e.system.name == comparison.baseline)
    return baseline.evaluation.with_section(comparison)


def _checked_additions(faithfulness: Any, counterfactuals: Any) -> list[str]:
    """The additions asked for (``faithfulness``, ``counterfactuals``), each refused naming
    itself when its options are of another type."""
    if faithfulness is not None and not isinstance(faithfulness, FaithfulnessOptions):
        raise InputError(
            f"faithfulness must be FaithfulnessOptions (or None), not {type(faithfulness).__name__}"
        )
    if counterfactuals is not None and not isinstance(counterfactuals, CounterfactualOptions):
        raise InputError(
            "counterfactuals must be CounterfactualOptions (or None), not "
            f"{type(counterfactuals).__name__}"
        )
    asked = (("faithfulness", faithfulness), ("counterfactuals", counterfactuals))
    return [name for name, value in asked if value is not None]


def _with_additions(
    result: Evaluation,
    faithfulness: FaithfulnessOptions | None,
    counterfactuals: CounterfactualOptions | None,
    device: str | None,
    progress: Progress | None,
    steps: int,
) -> Evaluation:
    """One system's evaluation with the faithfulness and counterfactuals asked for, each
    on the evaluation's own collection."""
    done = 1
    if faithfulness is not None:
        part = progress_part(progress, done / steps, (done + 1) / steps)
        result = with_faithfulness(result, device=device, progress=part, options=faithfulness)
        done += 1
    if counterfactuals is not None:
        part = progress_part(progress, done / steps, 1.0)
        result = with_counterfactuals(result, device=device, progress=part, options=counterfactuals)
    return result


def _checked_options(evaluation: Any, options: Any) -> tuple[EvaluationOptions, ComparisonOptions]:
    """The evaluation's and the comparison's options (their defaults for ``None``), each
    refused naming itself when of another type."""
    if evaluation is not None and not isinstance(evaluation, EvaluationOptions):
        raise InputError(f"evaluation must be EvaluationOptions, not {type(evaluation).__name__}")
    if options is not None and not isinstance(options, ComparisonOptions):
        raise InputError(f"options must be ComparisonOptions, not {type(options).__name__}")
    return evaluation or EvaluationOptions(), options or ComparisonOptions()


def compare_systems(
    systems: Sequence[System],
    *,
    queries: str | Path | Mapping | None = None,
    qrels: str | Path | Mapping | None = None,
    device: str | None = None,
    progress: Progress | None = None,
    evaluation: EvaluationOptions | None = None,
    options: ComparisonOptions | None = None,
    engine: EngineOptions | None = None,
    sweep: SweepOptions | None = None,
    **given: Any,
) -> SystemsComparison:
    """Two or more ``systems`` (see :func:`~lexlens.analysis.systems.systems.systems_of`)
    compared on the queries and judgements given, else the first system's collection's:
    see the module docstring (``engine``: the engine that made a run, whose lost items get
    their reasons; ``sweep``: an engine to run at several settings beside the exact
    scorer)."""
    return _evaluated_and_compared(
        systems,
        {},
        queries=queries,
        qrels=qrels,
        device=device,
        progress=progress,
        evaluation=evaluation,
        options=options,
        engine=engine,
        sweep=sweep,
        **given,
    )[1]


def _evaluated_and_compared(
    systems: Sequence[System],
    opened: Mapping[str, StoredCollection],
    *,
    queries: str | Path | Mapping | None,
    qrels: str | Path | Mapping | None,
    device: str | None,
    progress: Progress | None,
    evaluation: EvaluationOptions | None,
    options: ComparisonOptions | None,
    engine: EngineOptions | None = None,
    sweep: SweepOptions | None = None,
    **given: Any,
) -> tuple[list[Evaluated], SystemsComparison]:
    """Every system evaluated and their comparison (every argument checked first), each
    collection opened once (one in ``opened``, by the folder a system names, not again)."""
    evaluation, options = _checked_options(evaluation, options)
    options = ComparisonOptions.of(options, **given)
    engine = engine or EngineOptions()
    check_engine(engine)
    sweep = sweep or SweepOptions()
    check_sweep(sweep)
    device_argument(device)
    progress = progress_argument(progress)
    if not isinstance(systems, Sequence) or not all(isinstance(s, System) for s in systems):
        raise InputError("systems must be a list of System (systems_of makes them)")
    if len(systems) < 2:
        raise InputError(f"systems: {len(systems)} given, a comparison needs two or more")
    names = [s.name for s in systems]
    baseline = options.baseline or names[0]
    if baseline not in names:
        raise InputError(f"baseline {baseline!r} is not a system: one of {', '.join(names)}")
    check_engine_systems(engine, systems)
    swept = sweep_system(systems, (baseline,)) if sweep.sweep is not None else None
    opened = dict(opened)
    for path in dict.fromkeys(s.index for s in systems):
        if path not in opened:
            opened[path] = index_argument(path)
    benchmark = read_benchmark(opened[systems[0].index], queries, qrels)
    share = 0.8 if swept is not None else 1.0  # the sweep's part of the progress
    evaluated = evaluate_each(
        systems, benchmark, evaluation, device, progress_part(progress, 0.0, 0.9 * share), opened
    )
    comparison = compare_evaluated(
        evaluated,
        benchmark,
        evaluation,
        options,
        device,
        progress_part(progress, 0.9 * share, share),
    )
    comparison = with_engine_losses(comparison, engine, device, opened)
    if swept is None:
        return evaluated, comparison
    exact = [e["exact"] for e in comparison.engine]
    if exact:
        swept = sweep_system(systems, (exact[0],))
    result = sweep_over(
        swept,
        {q["id"]: q["text"] for q in comparison.per_query},
        comparison.judged,
        sweep,
        comparison.settings["query_mode"],
        device,
        opened,
        progress_part(progress, share, 1.0),
    )
    return evaluated, replace(comparison, sweep=result)


def compare_evaluated(
    evaluated: Sequence[Evaluated],
    benchmark: Benchmark,
    evaluation: EvaluationOptions,
    options: ComparisonOptions,
    device: str | None = None,
    progress: Progress | None = None,
) -> SystemsComparison:
    """The comparison of systems already evaluated on ``benchmark``: the statistics, where
    they differ, and the largest wins and losses explained."""
    names = [e.system.name for e in evaluated]
    baseline = options.baseline or names[0]
    if baseline not in names:
        raise InputError(f"baseline {baseline!r} is not a system: one of {', '.join(names)}")
    result = _compared(evaluated, baseline, benchmark, evaluation, options)
    opened = {collection_key(e.system): e.evaluation.collection for e in evaluated}
    return replace(result, why=_explained(result, device, progress, opened))


def _values(evaluated: Sequence[Evaluated]) -> tuple[list[str], dict, dict]:
    """The judged queries in order, their texts, and {system: {measure: per-query array}}."""
    first = evaluated[0].evaluation.metrics["per_query"]
    order = [q["id"] for q in first]
    texts = {q["id"]: q["text"] for q in first}
    values = {}
    for e in evaluated:
        rows = {q["id"]: q for q in e.evaluation.metrics["per_query"]}
        values[e.system.name] = {
            m: np.array([rows[q][m] for q in order], np.float64) for m in MEASURES
        }
    return order, texts, values


def _notes(evaluated: Sequence[Evaluated], first: list[str]) -> list[str]:
    """The notes: reading, those every system shares once, each system's own prefixed (a
    run's names the judged queries it misses, scored 0)."""
    notes = list(first)
    every = [e.evaluation.notes for e in evaluated]
    shared = [n for n in every[0] if all(n in other for other in every[1:])]
    notes += shared
    for e in evaluated:
        notes += [f"{e.system.name}: {n}" for n in e.evaluation.notes if n not in shared]
    return notes


def _extremes(
    pairs: Sequence[tuple[str, str]],
    values: Mapping,
    order: Sequence[str],
    texts: Mapping[str, str],
    count: int,
) -> list[dict]:
    """Each pair's largest wins and losses on the first measure, with both values."""
    measure = MEASURES[0]
    index = {q: i for i, q in enumerate(order)}
    out = []
    for a, b in pairs:
        wins, losses = extremes(values, order, (a, b), measure, count)
        rows = {}
        for q in wins + losses:
            x, y = values[a][measure][index[q]], values[b][measure][index[q]]
            rows[q] = {
                "query_id": q,
                "query": texts[q],
                "a": float(x),
                "b": float(y),
                "delta": float(y - x),
            }
        out.append(
            {
                "system_a": a,
                "system_b": b,
                "measure": measure,
                "wins": [rows[q] for q in wins],
                "losses": [rows[q] for q in losses],
            }
        )
    return out


def _compared(
    evaluated: Sequence[Evaluated],
    baseline: str,
    benchmark: Benchmark,
    evaluation: EvaluationOptions,
    options: ComparisonOptions,
) -> SystemsComparison:
    """Everything but the explanations of the largest wins and losses."""
    systems = [e.system for e in evaluated]
    names = [s.name for s in systems]
    order, texts, values = _values(evaluated)
    pairs = pairs_of(names, baseline, options.all_pairs)
    by_name = {e.system.name: e for e in evaluated}
    shifts, unshifted = [], []
    for a, b in pairs:
        if BM25 in (by_name[a].system.kind, by_name[b].system.kind):
            # its evaluation's failures carry the collection's q ⊙ d, not BM25's terms
            unshifted.append(f"{a} vs {b}")
            shifts.append(
                {"system_a": a, "system_b": b, "a_not_b": [], "b_not_a": [], "note": UNSHIFTED}
            )
            continue
        a_not_b, b_not_a = blame_shift(
            by_name[a].evaluation.failures, by_name[b].evaluation.failures
        )
        note = (
            None if a_not_b or b_not_a else "no word decides a failure under one and not the other"
        )
        shifts.append(
            {"system_a": a, "system_b": b, "a_not_b": a_not_b, "b_not_a": b_not_a, "note": note}
        )
    engine = []
    for a, b in pairs:
        sa, sb = by_name[a].system, by_name[b].system
        if {sa.kind, sb.kind} == {LEXLENS, RUN} and sa.index == sb.index:
            exact, run = (sa, sb) if sa.kind == LEXLENS else (sb, sa)
            same = exact.gate_k == run.gate_k and exact.query_encoder == run.query_encoder
            if same and exact.doc_gate_k is None:
                found = engine_comparison(
                    by_name[exact.name].evaluation.run, by_name[run.name].evaluation.run, order
                )
                engine.append({"exact": exact.name, "run": run.name, **found})
    qrels_of = {q: {d: r for d, r in benchmark.qrels[q].items() if is_relevant(r)} for q in order}
    fixes = [
        pair_fixes(
            a,
            b,
            by_name[a].evaluation,
            by_name[b].evaluation,
            (by_name[a].system.kind, by_name[b].system.kind),
        )
        for a, b in pairs
    ]
    efficiency = efficiency_of(
        [(e.system.name, e.system.kind, e.evaluation) for e in evaluated], evaluation.top
    )
    return SystemsComparison(
        systems=systems,
        baseline=baseline,
        measures=list(MEASURES),
        settings={
            **evaluation.to_dict(),
            **options.to_dict(),
            "queries": len(order),
            "systems": len(systems),
        },
        means={
            n: {m: float(values[n][m].mean()) if len(order) else 0.0 for m in MEASURES}
            for n in names
        },
        table=with_efficiency(
            _with_fixes(significance_rows(values, pairs, MEASURES, options), fixes), efficiency
        ),
        georisk=georisk_table(values, names, MEASURES),
        per_query=[
            {
                "id": q,
                "text": texts[q],
                "values": {n: {m: float(values[n][m][i]) for m in MEASURES} for n in names},
            }
            for i, q in enumerate(order)
        ],
        extremes=_extremes(pairs, values, order, texts, options.explain),
        why=[],
        blame_shift=shifts,
        engine=engine,
        missing={
            e.system.name: {"count": len(e.missing), "queries": e.missing[:100]} for e in evaluated
        },
        notes=_notes(evaluated, benchmark.notes) + _unshifted_note(unshifted),
        fixes=fixes,
        efficiency=efficiency,
        runs={e.system.name: e.evaluation.run for e in evaluated},
        judged=qrels_of,
    )


def _with_fixes(table: list[dict], fixes: Sequence[Mapping]) -> list[dict]:
    """The significance rows with their pair's fixed and broken counts and McNemar's exact
    p (one value per pair, on each of its measures' rows)."""
    by_pair = {(f["system_a"], f["system_b"]): f for f in fixes}
    keys = ("fixed", "broken", "p_mcnemar")
    return [{**r, **{k: by_pair[(r["system_a"], r["system_b"])][k] for k in keys}} for r in table]


def _unshifted_note(pairs: Sequence[str]) -> list[str]:
    """The note naming the pairs whose blame shift is left empty (BM25's failures are not
    explained by the collection's terms)."""
    if not pairs:
        return []
    return [f"blame shift not computed for {', '.join(pairs)}: {UNSHIFTED}"]


def _explained(
    result: SystemsComparison,
    device: str | None,
    progress: Progress | None,
    opened: Mapping[str, StoredCollection | None],
) -> list[QueryWhy]:
    """The largest wins and losses of every pair explained, on the collections the
    systems' evaluations opened."""
    wanted = [
        (e["system_a"], e["system_b"], q["query_id"])
        for e in result.extremes
        for q in e["wins"] + e["losses"]
    ]
    return explain_many(result, wanted, device, progress, opened)


def explain_many(
    result: SystemsComparison,
    wanted: Sequence[tuple[str, str, str]],
    device: str | None,
    progress: Progress | None = None,
    opened: Mapping[str, StoredCollection | None] | None = None,
) -> list[QueryWhy]:
    """``(system A, system B, query id)`` explained, each query encoded once per system (a
    collection in ``opened``, by the folder a system names, is not opened again)."""
    if not wanted:
        return []
    explaining = Explaining(device, result.settings["query_mode"], opened)
    systems = {s.name: s for s in result.systems}
    texts = {q["id"]: q["text"] for q in result.per_query}
    rows = {q["id"]: q for q in result.per_query}
    vectors: dict[tuple[str, str], np.ndarray] = {}
    for name in dict.fromkeys(n for a, b, _ in wanted for n in (a, b)):
        queries = list(dict.fromkeys(q for a, b, q in wanted if name in (a, b)))
        for q, v in zip(
            queries, explaining.vectors(systems[name], [texts[q] for q in queries]), strict=True
        ):
            vectors[(name, q)] = v
    measure = result.measures[0]
    out = []
    for i, (a, b, q) in enumerate(wanted):
        sides = [
            explaining.side(systems[n], vectors[(n, q)], result.runs[n].get(q, []), texts[q])
            for n in (a, b)
        ]
        values = (rows[q]["values"][a][measure], rows[q]["values"][b][measure])
        out.append(explain_query(*sides, q, texts[q], result.judged.get(q, {}), values, measure))
        if progress:
            progress((i + 1) / len(wanted), f"{i + 1}/{len(wanted)} queries explained")
    return out


def why_of(
    result: SystemsComparison, query_id: str, pair: tuple[str, str], device: str | None = None
) -> QueryWhy:
    """Why ``query_id``'s value differs between the pair's systems (A, B) of ``result``."""
    if not isinstance(result, SystemsComparison):
        raise InputError(f"result must be a SystemsComparison, not {type(result).__name__}")
    if not isinstance(query_id, str):
        raise InputError(f"query_id must be a query's id (text), not {type(query_id).__name__}")
    if (
        not isinstance(pair, (tuple, list))
        or len(pair) != 2
        or not all(isinstance(n, str) for n in pair)
    ):
        raise InputError(f"pair must be two systems' names (A, B), not {pair!r}")
    device_argument(device)
    names = [s.name for s in result.systems]
    for name in pair:
        if name not in names:
            raise InputError(f"system {name!r} is not in this comparison: {', '.join(names)}")
    if query_id not in {q["id"] for q in result.per_query}:
        raise InputError(f"query {query_id!r} is not one of this comparison's judged queries")
    return explain_many(result, [(pair[0], pair[1], query_id)], device)[0]
