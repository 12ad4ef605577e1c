"""Every failure of a benchmark evaluation with its counterfactual: what it would take for
the query's best relevant item to rank first (``lexlens evaluate --counterfactuals``, the
Evaluation page's job), and the summary — FlipRate (the share of failures fixed within the
budget, by a verified text edit), the mean number of edits of those fixed and the mean model
calls spent per failure — in evaluation.json, counterfactuals.csv and evaluation.html."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from lexlens.analysis.collections.stored import StoredCollection
from lexlens.analysis.core.arguments import device_argument, progress_argument
from lexlens.analysis.core.counts import counted
from lexlens.analysis.core.outputs import csv_bytes, json_bytes
from lexlens.analysis.core.results import Progress, Record, Result, plain
from lexlens.analysis.counterfactual.counterfactual import answer, prepare
from lexlens.analysis.counterfactual.options import CounterfactualOptions
from lexlens.analysis.counterfactual.result import Counterfactual
from lexlens.analysis.evaluation.result import (
    LISTED_FAILURES,
    BenchmarkEvaluationResult,
    evaluated_index,
)
from lexlens.analysis.faithfulness.benchmark import EvaluationWithFaithfulness
from lexlens.analysis.retrieval.queries import query_encoder_for
from lexlens.models.base import Encoder, InputError

#: counterfactuals.csv's columns.
CSV_COLUMNS = (
    "query_id",
    "query",
    "target",
    "rival_before",
    "rank_before",
    "found",
    "verified",
    "rank_after",
    "edits",
    "n_edits",
    "model_calls",
    "search",
    "searched",
    "space",
    "exhaustive",
    "seconds",
    "edited_query",
    "edited_document",
    "terms_found",
    "terms_exact",
    "terms_removed",
)


@dataclass(frozen=True)
class FailureCounterfactual(Record):
    """One failure's counterfactuals: its query, the relevant item to rank first, the
    text-level answer and the term-level one."""

    query_id: str
    query: str
    target: str
    text: Counterfactual
    terms: Counterfactual


@dataclass(frozen=True)
class CounterfactualSummary(Record):
    """Over the failures tried: FlipRate (found by a verified text edit within the budget)
    with its bound — ``flip_rate_upper`` counts every failure not searched exhaustively
    ("none found") as if a fix existed, ``exhaustive_share`` the failures whose whole edit
    space fit the budget, ``none_exists`` and ``none_found`` the two kinds of "no fix" —
    the found fixes by side (query-only, document-only, both), the mean edits of those
    found, the mean model calls per failure, the term level's own flip rate and mean set
    size, the median seconds per failure."""

    failures: int
    tried: int
    flip_rate: float | None
    found: int
    flip_rate_upper: float | None = None
    exhaustive_share: float | None = None
    none_exists: int = 0
    none_found: int = 0
    shortest_proven: int = 0
    by_side: dict = field(default_factory=dict)
    mean_edits: float | None = None
    mean_model_calls: float | None = None
    term_flip_rate: float | None = None
    mean_terms: float | None = None
    median_seconds: float | None = None
    seconds: float = 0.0
    skipped: dict = field(default_factory=dict)

    def flip_rate_text(self) -> str:
        """The headline, as "FlipRate 0.74 (at most 0.76; exhaustive for 88 % of failures)"."""
        if self.flip_rate is None:
            return "FlipRate - (no failure tried)"
        upper = self.flip_rate_upper if self.flip_rate_upper is not None else self.flip_rate
        share = round(100 * (self.exhaustive_share or 0.0))
        return (
            f"FlipRate {self.flip_rate:.2f} (at most {upper:.2f}; exhaustive for {share} % "
            "of failures)"
        )


def _mean(values: list[float]) -> float | None:
    return float(statistics.fmean(values)) if values else None


def edit_sides(edits: list[dict]) -> str:
    """Which inputs a fix edits: query, document or both."""
    sides = {e["side"] for e in edits}
    return "both" if len(sides) > 1 else next(iter(sides), "none")


def summarize(rows: list[FailureCounterfactual], failures: int, skipped: dict, seconds: float):
    """The summary of the failures' counterfactuals."""
    found = [r for r in rows if r.text.found]
    terms_found = [r for r in rows if r.terms.found]
    open_ = [r for r in rows if not r.text.found and r.text.search != "none exists"]
    by_side = {"query": 0, "document": 0, "both": 0}
    for r in found:
        side = edit_sides(r.text.edits)
        by_side[side] = by_side.get(side, 0) + 1
    return CounterfactualSummary(
        failures=failures,
        tried=len(rows),
        flip_rate=len(found) / len(rows) if rows else None,
        found=len(found),
        flip_rate_upper=(len(found) + len(open_)) / len(rows) if rows else None,
        exhaustive_share=sum(r.text.exhaustive for r in rows) / len(rows) if rows else None,
        none_exists=sum(r.text.search == "none exists" for r in rows),
        none_found=len(open_),
        shortest_proven=sum(r.text.shortest for r in found),
        by_side=by_side,
        mean_edits=_mean([len(r.text.edits) for r in found]),
        mean_model_calls=_mean([r.text.model_calls for r in rows]),
        term_flip_rate=len(terms_found) / len(rows) if rows else None,
        mean_terms=_mean([len(r.terms.edits) for r in terms_found]),
        median_seconds=float(statistics.median([r.text.seconds + r.terms.seconds for r in rows]))
        if rows
        else None,
        seconds=round(seconds, 3),
        skipped=dict(skipped),
    )


def _edits_text(answer: Counterfactual) -> str:
    return "; ".join(
        f"{e['op']} {e['side']}: {e.get('word', e.get('term', e.get('cell')))}"
        for e in answer.edits
    )


def csv_row(r: FailureCounterfactual) -> list[Any]:
    """One failure under :data:`CSV_COLUMNS`."""
    t = r.text
    return [
        r.query_id,
        r.query,
        r.target,
        t.rival_before,
        t.rank_before,
        t.found,
        t.verified,
        t.rank_after,
        _edits_text(t),
        len(t.edits),
        t.model_calls,
        t.search,
        t.searched,
        t.space,
        t.exhaustive,
        t.seconds,
        t.edited_query,
        t.edited_document,
        r.terms.found,
        r.terms.exact,
        " ".join(e["term"] for e in r.terms.edits),
    ]


@dataclass(frozen=True)
class EvaluationCounterfactuals(Result):
    """Every failure's counterfactual in one evaluation, and their summary."""

    file_stem = "counterfactuals"

    summary: CounterfactualSummary
    failures: list[FailureCounterfactual]
    settings: dict
    notes: list[str] = field(default_factory=list)

    def csv(self) -> bytes:
        """counterfactuals.csv: one row per failure tried."""
        return csv_bytes(CSV_COLUMNS, [csv_row(r) for r in self.failures])

    def html(self) -> str:
        """The summary and each failure's edits as an HTML section (autoescaped)."""
        from lexlens.analysis.counterfactual.report import counterfactual_section

        return counterfactual_section(self)

    def files(self) -> dict[str, bytes]:
        """counterfactuals.json and counterfactuals.csv."""
        return {"counterfactuals.json": json_bytes(self), "counterfactuals.csv": self.csv()}


def failures_counterfactuals(
    index: str | Path | StoredCollection,
    evaluation: BenchmarkEvaluationResult,
    *,
    query_encoder: Encoder | str | None = None,
    device: str | None = None,
    progress: Progress | None = None,
    options: CounterfactualOptions | None = None,
    **given: Any,
) -> EvaluationCounterfactuals:
    """The counterfactual of every failure in ``evaluation`` (the result of
    ``evaluate_benchmark`` on ``index``, which must be the collection evaluated:
    :func:`evaluated_index`) whose relevant
    item the collection holds: its queries encoded as the evaluation encoded them (its query
    encoder, mode and gate)."""
    ix = evaluated_index(index, evaluation, "counterfactuals")
    settings = evaluation.settings
    options = CounterfactualOptions.of(
        options, **{"query_mode": settings["query_mode"], "gate_k": settings["gate_k"], **given}
    )
    device_argument(device)
    progress = progress_argument(progress)
    if settings.get("run"):
        raise InputError(
            "counterfactuals re-encode Lexlens's own queries: not another system's run"
        )
    encoder = query_encoder_for(ix, query_encoder or settings.get("query_encoder"), device)
    started = time.perf_counter()
    rows: list[FailureCounterfactual] = []
    skipped: dict[str, int] = {}
    for n, failure in enumerate(evaluation.failures):
        if failure.relevant is None:
            why = failure.relevant_status or "no relevant item in the collection"
            skipped[why] = skipped.get(why, 0) + 1
            continue
        prepared = prepare(
            ix,
            failure.query,
            failure.relevant.id,
            query_encoder=encoder,
            device=device,
            options=options,
        )
        result = answer(prepared, options)
        assert result.counterfactual is not None
        rows.append(
            FailureCounterfactual(
                failure.query_id,
                failure.query,
                failure.relevant.id,
                result.counterfactual,
                result.terms,
            )
        )
        if progress:
            progress((n + 1) / len(evaluation.failures), f"{n + 1} failures tried")
    summary = summarize(rows, len(evaluation.failures), skipped, time.perf_counter() - started)
    return EvaluationCounterfactuals(
        summary=summary,
        failures=rows,
        settings={"query_encoder": encoder.name, **options.to_dict()},
        notes=[f"{counted(n, 'failure')} not tried: {why}" for why, n in skipped.items()],
    )


@dataclass(frozen=True)
class EvaluationWithCounterfactuals(EvaluationWithFaithfulness):
    """An evaluation with every failure's counterfactual (and, when measured, its
    explanations' faithfulness): evaluation.json holds them under ``counterfactuals``,
    counterfactuals.csv lists each failure, evaluation.html shows their section."""

    counterfactuals: EvaluationCounterfactuals | None = None

    def to_dict(self) -> dict:
        """The evaluation's document (with its faithfulness, when measured) and
        ``counterfactuals``."""
        return {**super().to_dict(), "counterfactuals": plain(self.counterfactuals)}

    def files(self) -> dict[str, bytes]:
        """The evaluation's files, counterfactuals.csv beside them."""
        out = super().files()
        if self.counterfactuals is not None:
            out["counterfactuals.csv"] = self.counterfactuals.csv()
        return out

    def html(self, max_failures: int = LISTED_FAILURES) -> str:
        """evaluation.html with the counterfactuals' section before its end."""
        page = super().html(max_failures)
        if self.counterfactuals is None:
            return page
        section = self.counterfactuals.html()
        cut = page.rfind("</body>")
        return page[:cut] + section + page[cut:] if cut >= 0 else page + section


def with_counterfactuals(
    index: str | Path | StoredCollection,
    evaluation: BenchmarkEvaluationResult,
    *,
    device: str | None = None,
    progress: Progress | None = None,
    options: CounterfactualOptions | None = None,
    **given: Any,
) -> EvaluationWithCounterfactuals:
    """``evaluation`` (with its faithfulness, when measured) and every failure's
    counterfactual (:func:`failures_counterfactuals`) in its JSON, CSV and HTML."""
    found = failures_counterfactuals(
        index, evaluation, device=device, progress=progress, options=options, **given
    )
    values = {f.name: getattr(evaluation, f.name) for f in fields(evaluation) if f.init}
    return EvaluationWithCounterfactuals(**values, counterfactuals=found)


def counterfactuals_text(result: Any) -> str:
    """The command line's view of an evaluation's counterfactuals (empty without them): the
    summary and the first failures' edits."""
    found = getattr(result, "counterfactuals", None)
    if not isinstance(found, EvaluationCounterfactuals):
        return ""
    s = found.summary

    def n(value: float | None) -> str:
        return "-" if value is None else f"{value:.4g}"

    lines = [
        "",
        "",
        f"counterfactuals: {s.flip_rate_text()}: {s.found} of {counted(s.tried, 'failure')} "
        f"fixed by a verified edit (query only {s.by_side.get('query', 0)}, document only "
        f"{s.by_side.get('document', 0)}, both {s.by_side.get('both', 0)}), none exists for "
        f"{s.none_exists}, none found for {s.none_found}; mean edits {n(s.mean_edits)}, mean model calls "
        f"{n(s.mean_model_calls)}; term level {n(s.term_flip_rate)} (mean {n(s.mean_terms)} "
        f"terms); {s.seconds:.1f} s",
    ]
    for r in found.failures[:10]:
        t = r.text
        state = "fixed" if t.found else f"{t.search or 'none found'}, closest"
        lines.append(
            f"  {r.query_id} → {r.target}: {state}, rank {t.rank_before} → "
            f"{t.rank_after}: {_edits_text(t) or '(no edit)'}"
        )
    lines += [f"  note: {x}" for x in found.notes]
    return "\n".join(lines)
