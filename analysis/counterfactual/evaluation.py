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

from lexlens.analysis.collections.stored import StoredCollection
from lexlens.analysis.core.arguments import device_argument, progress_argument
from lexlens.analysis.core.counts import counted
from lexlens.analysis.core.outputs import csv_bytes, json_bytes
from lexlens.analysis.core.results import Progress, Record, Result
from lexlens.analysis.counterfactual.counterfactual import answer, prepare
from lexlens.analysis.counterfactual.options import CounterfactualOptions
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
    """Over the failures tried: FlipRate (found by a verified text edit within the budget),
    the mean edits of those found, the mean model calls per failure, the term level's own
    flip rate and mean set size, the median seconds per failure."""

    failures: int
    tried: int
    flip_rate: float | None
    found: int
    mean_edits: float | None
    mean_model_calls: float | None
    term_flip_rate: float | None
    mean_terms: float | None
    median_seconds: float | None
    seconds: float
    skipped: dict = field(default_factory=dict)


def _mean(values: list[float]) -> float | None:
    return float(statistics.fmean(values)) if values else None


def summarize(rows: list[FailureCounterfactual], failures: int, skipped: dict, seconds: float):
    """The summary of the failures' counterfactuals."""
    found = [r for r in rows if r.text.found]
    terms_found = [r for r in rows if r.terms.found]
    return CounterfactualSummary(
        failures=failures,
        tried=len(rows),
        flip_rate=len(found) / len(rows) if rows else None,
        found=len(found),
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
        from lexlens.analysis.counterfactual.report import counterfactual_section

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

        def n(value: float | None) -> str:
            return "-" if value is None else f"{value:.4g}"

        lines = [
            "",
            "",
            f"counterfactuals: FlipRate {n(s.flip_rate)} ({s.found} of "
            f"{counted(s.tried, 'failure')} fixed by a verified edit), mean edits "
            f"{n(s.mean_edits)}, mean model calls {n(s.mean_model_calls)}; term level "
            f"{n(s.term_flip_rate)} (mean {n(s.mean_terms)} terms); {s.seconds:.1f} s",
        ]
        for r in self.failures[:10]:
            t = r.text
            state = "fixed" if t.found else "closest"
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
        notes=[f"{counted(n, 'failure')} not tried: {why}" for why, n in skipped.items()],
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
