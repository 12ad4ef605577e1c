"""Faithfulness over a benchmark: every failure's explanation tested by re-encoding
(:mod:`.failures`), summed up — the explanations' comprehensiveness, flip rate and AOPC
against the random baseline's (robust: medians and capped means,
:class:`FaithfulnessSummary`), a paired Wilcoxon signed-rank test (scipy) of
comprehensiveness, and the median deletion curves — and written as JSON, CSV and an HTML
section; ``lexlens evaluate --faithfulness`` adds it to the evaluation as a section
(:mod:`lexlens.analysis.evaluation.sections`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from lexlens.analysis.collections.stored import StoredCollection, reencoding_notes
from lexlens.analysis.core.arguments import device_argument, progress_argument
from lexlens.analysis.core.counts import counted, figure
from lexlens.analysis.core.curves import MEASURED_BY
from lexlens.analysis.core.outputs import csv_bytes, json_bytes
from lexlens.analysis.core.results import Progress, Record, Result
from lexlens.analysis.evaluation.result import Evaluation, evaluation_argument
from lexlens.analysis.faithfulness.failures import (
    EMPTIED,
    TIED,
    FailureFaithfulness,
    measure_failures,
)
from lexlens.analysis.faithfulness.options import FaithfulnessOptions
from lexlens.analysis.faithfulness.report import faithfulness_html, faithfulness_section
from lexlens.analysis.retrieval.queries import query_encoder_for
from lexlens.models.base import Encoder, InputError

#: faithfulness.csv's columns, one row per failure measured.
CSV_COLUMNS = (
    "query_id",
    "query",
    "nonrelevant",
    "relevant",
    "gap",
    "words",
    "edited_query",
    "gap_after",
    "comprehensiveness",
    "flipped",
    "random_comprehensiveness",
    "random_flip_rate",
    "aopc",
    "random_aopc",
)


@dataclass(frozen=True)
class FaithfulnessSummary(Record):
    """The explanations of a benchmark's failures against the random baseline.

    A failure's share of the gap closed is unbounded (a gap of 0.01 that a deletion moves by
    1 closes "100 gaps"), so the summary is robust: ``comprehensiveness`` and ``aopc`` are
    *medians* over the failures measured (with their random baselines'), ``capped_*`` the
    means of each share capped at 1 (a flip counts as the whole gap closed), ``beats_random``
    the share of failures whose explanation closes more of the gap than its random draws do
    on average, ``wilcoxon_p`` a paired Wilcoxon signed-rank test (scipy) of the two
    comprehensiveness values; ``curve``/``random_curve`` are the median share of the gap
    closed after ``k`` words (``curve_counts[k]`` failures have a k-th word). ``flip_rate``
    is the share whose relevant item ends strictly ahead, over ``flip_failures``; the
    degenerate deletions are counted in ``excluded``."""

    failures: int
    comprehensiveness: float | None
    random_comprehensiveness: float | None
    capped_comprehensiveness: float | None
    capped_random_comprehensiveness: float | None
    beats_random: float | None
    flip_rate: float | None
    random_flip_rate: float | None
    aopc: float | None
    random_aopc: float | None
    wilcoxon_p: float | None
    words_deleted: float | None  # mean number of the explanation's words
    curve: list[float] = field(default_factory=list)
    random_curve: list[float] = field(default_factory=list)
    curve_counts: list[int] = field(default_factory=list)
    skipped: dict = field(default_factory=dict)  # reason → failures not measured
    model_calls: int = 0
    seconds: float = 0.0
    measured_by: str = MEASURED_BY
    #: reason → failures measured but counted apart (a deletion emptying the query is left
    #: out of every number above, ``failures`` included; one leaving a tie out of the flip
    #: rates)
    excluded: dict = field(default_factory=dict)
    flip_failures: int = 0  # the failures the flip rates rest on


def _kept(values: list[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None and np.isfinite(v)]


def _mean(values: list[float | None]) -> float | None:
    kept = _kept(values)
    return float(np.mean(kept)) if kept else None


def _median(values: list[float | None]) -> float | None:
    kept = _kept(values)
    return float(np.median(kept)) if kept else None


def _capped(values: list[float | None]) -> float | None:
    kept = _kept(values)
    return float(np.mean(np.minimum(kept, 1.0))) if kept else None


def _median_curves(rows: list[FailureFaithfulness]) -> tuple[list[float], list[float], list[int]]:
    """The median share of the gap closed after k words, explanation and random orders."""
    k = max((len(r.curve.explained) for r in rows), default=0)
    mean, rand, counts = [], [], []
    for j in range(k):
        held = [r for r in rows if len(r.curve.explained) > j]
        mean.append(float(np.median([(r.gap - r.curve.explained[j]) / r.gap for r in held])))
        rand.append(float(np.median([(r.gap - r.curve.random[j]) / r.gap for r in held])))
        counts.append(len(held))
    return mean, rand, counts


def summarize(
    rows: list[FailureFaithfulness], skipped: dict[str, int], calls: int, seconds: float
) -> FaithfulnessSummary:
    """The summary of the failures measured: a deletion that empties the query is counted
    apart and left out of every number (it closes the gap whatever the explanation), one
    that leaves a tie is left out of the flip rates (neither item is ahead)."""
    from scipy.stats import wilcoxon  # heavy: scipy loads on first use

    excluded: dict[str, int] = {}
    for r in rows:
        if r.degenerate:
            excluded[r.degenerate] = excluded.get(r.degenerate, 0) + 1
    rows = [r for r in rows if r.degenerate != EMPTIED]
    flips = [r for r in rows if not r.degenerate]

    paired = [
        (r.comprehensiveness, r.random_comprehensiveness)
        for r in rows
        if r.random_comprehensiveness is not None
    ]
    p = None
    if len(paired) >= 2 and any(a != b for a, b in paired):
        p = float(wilcoxon([a for a, _ in paired], [b for _, b in paired]).pvalue)
    curve, random_curve, counts = _median_curves(rows)
    own = [r.comprehensiveness for r in rows]
    rand = [r.random_comprehensiveness for r in rows]
    return FaithfulnessSummary(
        failures=len(rows),
        comprehensiveness=_median(own),
        random_comprehensiveness=_median(rand),
        capped_comprehensiveness=_capped(own),
        capped_random_comprehensiveness=_capped(rand),
        beats_random=_mean([float(a > b) for a, b in paired]),
        flip_rate=_mean([float(r.flipped) for r in flips]),
        random_flip_rate=_mean([r.random_flip_rate for r in flips]),
        aopc=_median([r.curve.normalized_aopc for r in rows]),
        random_aopc=_median([r.curve.normalized_random_aopc for r in rows]),
        wilcoxon_p=p,
        words_deleted=_mean([float(len(r.words)) for r in rows]),
        curve=curve,
        random_curve=random_curve,
        curve_counts=counts,
        skipped=dict(skipped),
        model_calls=int(calls),
        seconds=float(seconds),
        excluded=excluded,
        flip_failures=len(flips),
    )


def csv_row(r: FailureFaithfulness) -> list[Any]:
    """One failure under :data:`CSV_COLUMNS`."""
    return [
        r.query_id,
        r.query,
        r.nonrelevant,
        r.relevant,
        r.gap,
        " ".join(r.words),
        r.edited_query,
        r.gap_after,
        r.comprehensiveness,
        r.flipped,
        r.random_comprehensiveness,
        r.random_flip_rate,
        r.curve.normalized_aopc,
        r.curve.normalized_random_aopc,
    ]


@dataclass(frozen=True)
class FailuresFaithfulness(Result):
    """The faithfulness of every failure's explanation of one evaluation (see
    :mod:`lexlens.analysis.faithfulness.failures`), and its summary; a section of the
    evaluation (:class:`~lexlens.analysis.evaluation.sections.Section`) under
    ``faithfulness``."""

    file_stem = "faithfulness"
    key: ClassVar[str] = "faithfulness"

    encoder: str
    settings: dict
    summary: FaithfulnessSummary
    failures: list[FailureFaithfulness]
    notes: list[str] = field(default_factory=list)

    def csv(self) -> bytes:
        """faithfulness.csv: one row per failure measured."""
        return csv_bytes(CSV_COLUMNS, [csv_row(r) for r in self.failures])

    def html(self) -> str:
        """The summary, the deletion-curve chart and the failures as an HTML section (to
        place inside evaluation.html)."""
        return faithfulness_section(self)

    def files(self) -> dict[str, bytes]:
        """faithfulness.json, faithfulness.csv and faithfulness.html."""
        return {
            "faithfulness.json": json_bytes(self),
            "faithfulness.csv": self.csv(),
            "faithfulness.html": faithfulness_html(self).encode("utf-8"),
        }

    def section_files(self) -> dict[str, bytes]:
        """Beside the evaluation's files: faithfulness.csv (its document is in
        evaluation.json, its section in evaluation.html)."""
        return {"faithfulness.csv": self.csv()}

    def text(self) -> str:
        """The command line's view: the summary against random, and the notes."""
        s = self.summary

        lines = [
            "",
            "",
            f"faithfulness (measured by {s.measured_by}): {counted(s.failures, 'failure')}, "
            f"{s.model_calls} edited queries re-encoded in {s.seconds:.1f} s",
            "                     explanation  random",
            f"comprehensiveness    {figure(s.comprehensiveness):>11}  "
            f"{figure(s.random_comprehensiveness)}"
            "  (median share of the gap closed)",
            f"capped mean          {figure(s.capped_comprehensiveness):>11}  "
            f"{figure(s.capped_random_comprehensiveness)}",
            f"pairs flipped        {figure(s.flip_rate):>11}  {figure(s.random_flip_rate)}",
            f"AOPC (median)        {figure(s.aopc):>11}  {figure(s.random_aopc)}",
            f"beats random {figure(s.beats_random)}, Wilcoxon p {figure(s.wilcoxon_p)}",
        ]
        lines += [f"note: {note}" for note in self.notes]
        return "\n".join(lines)


def failures_faithfulness(
    index: str | Path | StoredCollection | None,
    evaluation: Evaluation,
    *,
    query_encoder: Encoder | str | None = None,
    device: str | None = None,
    progress: Progress | None = None,
    options: FaithfulnessOptions | None = None,
    **given: Any,
) -> FailuresFaithfulness:
    """The faithfulness of every failure's explanation in ``evaluation`` (the result of
    ``evaluate_benchmark`` on ``index``): its words deleted, the query re-encoded (by the
    evaluation's query encoder unless another is given), both items rescored, against random
    words. Options: :class:`FaithfulnessOptions` (or its fields as keywords). ``index``
    (``None``: the evaluation's own collection) must be the collection evaluated
    (:func:`~lexlens.analysis.evaluation.result.evaluated_index`)."""
    options = FaithfulnessOptions.of(options, **given)
    ix = evaluation_argument(evaluation, "faithfulness").collection_for(index, "faithfulness")
    device_argument(device)
    progress = progress_argument(progress)
    settings, evaluated = evaluation.settings, evaluation.options
    if settings.get("run"):
        raise InputError("faithfulness re-encodes Lexlens's own queries: not another system's run")
    encoder = query_encoder_for(ix, query_encoder or settings.get("query_encoder"), device)
    start = time.perf_counter()
    rows, skipped, calls = measure_failures(
        ix,
        encoder,
        evaluation.failures,
        query_mode=evaluated.query_mode,
        gate_k=evaluated.gate_k,
        options=options,
        progress=progress,
    )
    summary = summarize(rows, skipped, calls, time.perf_counter() - start)
    if progress:
        progress(1.0, f"{len(rows)} explanations measured")
    return FailuresFaithfulness(
        encoder=encoder.name,
        settings={
            **options.to_dict(),
            "query_mode": evaluated.query_mode,
            "gate_k": evaluated.gate_k,
        },
        summary=summary,
        failures=rows,
        notes=[
            *reencoding_notes(ix),
            *(f"{counted(n, 'failure')} not measured: {why}" for why, n in skipped.items()),
            *summary_notes(summary),
        ],
    )


def summary_notes(summary: FaithfulnessSummary) -> list[str]:
    """What the summary leaves out and why, and how many failures each point of the deletion
    curve rests on."""
    notes = []
    if n := summary.excluded.get(EMPTIED):
        notes.append(
            f"{counted(n, 'failure')} counted apart: {EMPTIED} (both items score 0 whatever "
            "was deleted): left out of every number"
        )
    if n := summary.excluded.get(TIED):
        notes.append(
            f"{counted(n, 'failure')} counted apart: {TIED} (neither ahead): left out of the "
            f"flip rates, which rest on {counted(summary.flip_failures, 'failure')}"
        )
    if summary.curve_counts:
        points = ", ".join(f"k={k}: {n}" for k, n in enumerate(summary.curve_counts))
        notes.append(f"Failures behind each point of the deletion curve: {points}")
    return notes


def with_faithfulness(
    evaluation: Evaluation,
    *,
    index: str | Path | StoredCollection | None = None,
    device: str | None = None,
    progress: Progress | None = None,
    options: FaithfulnessOptions | None = None,
    **given: Any,
) -> Evaluation:
    """``evaluation`` with the faithfulness of its failures' explanations
    (:func:`failures_faithfulness`, on its own collection; ``index``, when given, must be
    that collection) added as a section: in its JSON, faithfulness.csv and its HTML."""
    found = failures_faithfulness(
        index, evaluation, device=device, progress=progress, options=options, **given
    )
    return evaluation.with_section(found)
