"""The report an encoder gets (``lexlens report``): self-contained HTML plus JSON and CSV.

A quantised, differentiable encoder (dense + product quantiser) gets the attribution
report (:mod:`~lexlens.analysis.render.attribution_report`); any other encoder the terms
report of a lexical text encoder (:mod:`~lexlens.analysis.render.terms_report`).
"""

from __future__ import annotations

from lexlens.analysis.attribution.validate import (
    ATTRIBUTION_NEEDS,
    DEFAULT_MAX_STEPS,
    DEFAULT_TOLERANCE,
    check_keep,
)
from lexlens.analysis.core.results import Progress
from lexlens.analysis.render.attribution_report import (
    AttributionReport,
    attribution_report,
    check_mot_texts,
)
from lexlens.analysis.render.terms_report import TermsReport, check_top, terms_report
from lexlens.models.base import InputError, check_texts


def build_report(
    encoder,
    texts: list[str],
    *,
    m: int | None = None,
    steps: int | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    max_steps: int = DEFAULT_MAX_STEPS,
    baseline: str = "unk",
    mot: bool = False,
    keep: float = 0.05,
    top: int = 30,
    source: str = "",
    progress: Progress | None = None,
) -> AttributionReport | TermsReport:
    """The attribution report for a dense + PQ encoder, else the terms report (the use case).

    ``m``, the IG options, ``mot`` and ``keep`` apply to the attribution report, ``top``
    to the terms report; every option is checked whichever report runs, and sub-vectors or
    the masking evaluation on an encoder without them are refused before any model runs.
    """
    check_texts(texts)
    check_keep(keep)
    check_top(top)
    if mot:
        check_mot_texts(texts)
    if ATTRIBUTION_NEEDS.is_compatible(encoder):
        return attribution_report(
            encoder,
            texts,
            m=m,
            steps=steps,
            tolerance=tolerance,
            max_steps=max_steps,
            baseline=baseline,
            mot=mot,
            keep=keep,
            source=source,
            progress=progress,
        )
    if m is not None or mot:
        raise InputError(
            "sub-vectors and the MoT masking evaluation need a dense+PQ encoder "
            f"(e.g. minilm-pq); {encoder.name} is not one"
        )
    return terms_report(encoder, texts, top=top, source=source)
