"""Every failure of a benchmark evaluation with its counterfactual: what it would take for
the query's best relevant item to rank first (``lexlens evaluate --counterfactuals``, the
Evaluation page's job), and the summary — FlipRate (the share of failures fixed within the
budget, by a verified text edit), the mean number of edits of those fixed and the mean model
calls spent per failure — a section of the evaluation
(:mod:`lexlens.analysis.evaluation.sections`): in evaluation.json, counterfactuals.csv and
evaluation.html."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from lexlens.analysis.collections.stored import StoredCollection, reencoding_notes
from lexlens.analysis.core.arguments import device_argument, progress_argument
from lexlens.analysis.core.counts import counted, figure
from lexlens.analysis.core.outputs import csv_bytes, json_bytes
from lexlens.analysis.core.results import Progress, Record, Result
from lexlens.analysis.counterfactual.counterfactual import answer, prepare
from lexlens.analysis.counterfactual.options import CounterfactualOptions
from lexlens.analysis.counterfactual.report import counterfactual_section
from lexlens.analysis.counterfactual.result import Counterfactual
from lexlens.analysis.evaluation.result import Evaluation, evaluation_argument
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
    """Every failure's counterfactual in one evaluation, and their summary; a section of
    the evaluation (:class:`~lexlens.analysis.evaluation.sections.Section`) under
    ``counterfactuals``."""

    file_stem = "counterfactuals"
    key: ClassVar[str] = "counterfactuals"

    summary: CounterfactualSummary
    failures: list[FailureCounterfactual]
    settings: dict
    notes: list[str] = field(default_factory=list)

    def csv(self) -> bytes:
        """counterfactuals.csv: one row per failure tried."""
        return csv_bytes(CSV_COLUMNS, [csv_row(r) for r in self.failures])

    def html(self) -> str:
        """The summary and each failure's edits as an HTML section (autoescaped)."""

        return counterfactual_section(self)

    def files(self) -> dict[str, bytes]:
        """counterfactuals.json and counterfactuals.csv."""
        return {"counterfactuals.json": json_bytes(self), "counterfactuals.csv": self.csv()}

    def section_files(self) -> dict[str, bytes]:
        """Beside the evaluation's files: counterfactuals.csv (its document is in
        evaluation.json, its section in evaluation.html)."""
        return {"counterfactuals.csv": self.csv()}

    def text(self) -> str:
        """The command line's view: the summary and the first failures' edits."""
        s = self.summary

        lines = [
            "",
            "",
            f"counterfactuals: {s.flip_rate_text()}: {s.found} of {counted(s.tried, 'failure')} "
            f"fixed by a verified edit (query only {s.by_side.get('query', 0)}, document only "
            f"{s.by_side.get('document', 0)}, both {s.by_side.get('both', 0)}), none exists for "
            f"{s.none_exists}, none found for {s.none_found}; mean edits "
            f"{figure(s.mean_edits)}, mean model calls {figure(s.mean_model_calls)}; term level "
            f"{figure(s.term_flip_rate)} (mean {figure(s.mean_terms)} terms); {s.seconds:.1f} s",
        ]
        for r in self.failures[:10]:
            t = r.text
            state = "fixed" if t.found else f"{t.search or 'none found'}, closest"
            lines.append(
                f"  {r.query_id} → {r.target}: {state}, rank {t.rank_before} → "
                f"{t.rank_after}: {_edits_text(t) or '(no edit)'}"
            )
        lines += [f"  note: {x}" for x in self.notes]
        return "\n".join(lines)


def failures_counterfactuals(
    index: str | Path | StoredCollection | None,
    evaluation: Evaluation,
    *,
    query_encoder: Encoder | str | None = None,
    device: str | None = None,
    progress: Progress | None = None,
    options: CounterfactualOptions | None = None,
    **given: Any,
) -> EvaluationCounterfactuals:
    """The counterfactual of every failure in ``evaluation`` (the result of
    ``evaluate_benchmark``) whose relevant item its collection holds (``index``, when
    given, must be that collection:
    :func:`~lexlens.analysis.evaluation.result.evaluated_index`): its queries encoded as
    the evaluation encoded them (its query encoder, mode and gate)."""
    what = "counterfactuals"
    ix = evaluation_argument(evaluation, what).collection_for(index, what)
    settings, evaluated = evaluation.settings, evaluation.options
    options = CounterfactualOptions.of(
        options, **{"query_mode": evaluated.query_mode, "gate_k": evaluated.gate_k, **given}
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
        notes=[
            *reencoding_notes(ix),
            *(f"{counted(n, 'failure')} not tried: {why}" for why, n in skipped.items()),
        ],
    )


def with_counterfactuals(
    evaluation: Evaluation,
    *,
    index: str | Path | StoredCollection | None = None,
    device: str | None = None,
    progress: Progress | None = None,
    options: CounterfactualOptions | None = None,
    **given: Any,
) -> Evaluation:
    """``evaluation`` with every failure's counterfactual (:func:`failures_counterfactuals`,
    on its own collection; ``index``, when given, must be that collection) added as a
    section: in its JSON, counterfactuals.csv and its HTML."""
    found = failures_counterfactuals(
        index, evaluation, device=device, progress=progress, options=options, **given
    )
    return evaluation.with_section(found)
