"""The reports of ``lexlens report`` and the Attribution page.

- :func:`attribution_report` (quantised, differentiable encoders): IG of every text and,
  optionally, the MoT masking evaluation over them with the same codebook. Its
  :class:`AttributionReport`'s ``files()`` are report.html
  (:mod:`~lexlens.analysis.attribution.report_html`), report.json (exactly ``to_dict()``,
  every number unrounded), attributions.csv and, with the masking evaluation, its CSV tables.
- :func:`build_report`: the report an encoder gets — the attribution report for a dense + PQ
  encoder, else the terms report of a lexical text encoder
  (:func:`lexlens.analysis.lexical.report.terms_report`).

The CLI writes the files with :func:`lexlens.analysis.core.outputs.write_files`; the
Attribution page offers them as downloads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from lexlens.analysis.attribution.arguments import source_argument
from lexlens.analysis.attribution.attribution import (
    AttributionResult,
    attribute,
    attribution_inputs,
    with_subvectors,
)
from lexlens.analysis.attribution.ig_curves import IgCurves, ig_faithfulness
from lexlens.analysis.attribution.mot import mot_evaluate
from lexlens.analysis.attribution.mot_result import MotResult
from lexlens.analysis.attribution.options import ATTRIBUTION_NEEDS, ReportOptions
from lexlens.analysis.attribution.report_html import (
    ATTRIBUTION_CSV_HEADER,
    attribution_csv_rows,
    render_attribution_html,
)
from lexlens.analysis.core.arguments import (
    device_argument,
    encoder_argument,
    progress_argument,
    texts_argument,
)
from lexlens.analysis.core.outputs import csv_bytes, json_bytes
from lexlens.analysis.core.results import Progress, Result, internal, progress_part
from lexlens.analysis.lexical.report import TermsReport, terms_report
from lexlens.models.base import Encoder, InputError


@dataclass(frozen=True, kw_only=True)
class AttributionReport(Result):
    """An attribution (and optionally masking) report: the numbers and where they came from."""

    file_stem = "report"

    kind: str = field(default="attribution-report", init=False)
    meta: dict = field(default_factory=dict)
    attribution: AttributionResult
    mot: MotResult | None = None
    #: IG deletion and insertion curves measured for some texts, by text number (from 0):
    #: drawn in report.html; report.json stays the document ``lexlens report --json`` prints
    #: (each text's curves are ``IgCurves.files()``'s ig_curves.json).
    ig_curves: dict[int, IgCurves] = internal(default_factory=dict)

    @property
    def notes(self) -> list[str]:
        """The notes of the attribution and of the masking evaluation, each once."""
        both = list(self.attribution.notes) + ([] if self.mot is None else list(self.mot.notes))
        return list(dict.fromkeys(both))

    def html(self) -> str:
        """report.html: the settings, the masking table (if run) and a heatmap per text
        (with its IG deletion and insertion curves when they were measured)."""
        a = self.attribution
        meta = {
            "M": a.m,
            "K": a.k,
            "IG steps": a.settings.get("steps"),
            "baseline": a.settings.get("baseline"),
            "tolerance": a.settings.get("tolerance"),
            **self.meta,
            "notes": list(a.notes) + ([] if self.mot is None else list(self.mot.notes)),
        }
        return render_attribution_html(
            a.texts, encoder_name=a.encoder, mot=self.mot, meta=meta, curves=self.ig_curves
        )

    def files(self) -> dict[str, bytes]:
        """report.html, report.json (``to_dict``), attributions.csv and the MoT CSVs."""
        files = {
            "report.html": self.html().encode("utf-8"),
            "report.json": json_bytes(self),
            "attributions.csv": csv_bytes(
                ATTRIBUTION_CSV_HEADER, attribution_csv_rows(self.attribution.texts)
            ),
        }
        if self.mot is not None:
            files.update(self.mot.csv_files())
        return files


def with_ig_curves(report: AttributionReport, curves: Mapping[int, IgCurves]) -> AttributionReport:
    """``report`` carrying ``curves`` too (text number → the :class:`IgCurves` measured for that
    text by :func:`~lexlens.analysis.attribution.ig_curves.ig_faithfulness`, as a page shows
    them): its report.html draws them below the text's heatmap. Each is checked to be of
    the text it is filed under."""
    if not isinstance(report, AttributionReport):
        raise InputError(f"report must be an AttributionReport, not {type(report).__name__}")
    if not isinstance(curves, Mapping):
        raise InputError(f"curves must map text numbers to IgCurves, not {type(curves).__name__}")
    texts = report.attribution.texts
    for i, found in curves.items():
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(texts):
            raise InputError(f"text number {i!r} is not one of the report's 0…{len(texts) - 1}")
        if not isinstance(found, IgCurves) or found.text != texts[i].text:
            raise InputError(f"the curves filed under text {i} are not that text's IG curves")
    return replace(report, ig_curves={**report.ig_curves, **dict(curves)})


def report_ig_curves(
    encoder: Encoder,
    report: AttributionReport,
    texts: Sequence[int] | None = None,
    *,
    k: int = 10,
    seed: int = 0,
) -> AttributionReport:
    """``report`` with the IG deletion and insertion curves of ``texts`` (text numbers; all
    texts when ``None``) measured by re-encoding (:func:`ig_faithfulness`, ``k`` words at
    most, RandT's draw seeded by ``seed``); texts that have curves already keep them."""
    if not isinstance(report, AttributionReport):
        raise InputError(f"report must be an AttributionReport, not {type(report).__name__}")
    if texts is not None and not isinstance(texts, (list, tuple, range)):
        raise InputError(f"texts must be a list of text numbers, not {type(texts).__name__}")
    wanted = range(len(report.attribution.texts)) if texts is None else texts
    found = {
        i: ig_faithfulness(encoder, report, i, k=k, seed=seed)
        for i in wanted
        if i not in report.ig_curves
    }
    return with_ig_curves(report, found)


def _mot_texts(texts: list[str], options: ReportOptions) -> None:
    """The masking evaluation compares documents: a report with it needs two texts or more."""
    if options.mot and len(texts) < 2:
        raise InputError(
            "the MoT masking evaluation needs at least two texts: give a corpus or untick MoT"
        )


def report_inputs(
    encoder: Any, texts: Any, options: ReportOptions, device: str | None = None
) -> tuple[Encoder, list[str]]:
    """The encoder and the texts of an attribution report, checked with its options against
    each other before any model loads (a page checks them before it starts the job)."""
    texts = texts_argument(texts)
    _mot_texts(texts, options)
    return attribution_inputs(encoder, texts, options.attribute_options(), device)


def attribution_report(
    encoder: Encoder,
    texts: list[str] | str,
    *,
    options: ReportOptions | None = None,
    source: str = "",
    progress: Progress | None = None,
    device: str | None = None,
    **given: Any,
) -> AttributionReport:
    """IG of every text (and the MoT table over them with the same codebook): the use case.

    Options: :class:`~lexlens.analysis.attribution.options.ReportOptions` (or its fields as
    keywords; ``top`` applies to the terms report only). ``source`` names where the texts
    came from. Checked before any model runs: the texts, every option, and that the masking
    evaluation has at least two texts.
    """
    options = ReportOptions.of(options, **given)
    source = source_argument(source)
    progress = progress_argument(progress)
    encoder, texts = report_inputs(encoder, texts, options, device_argument(device))
    split = 0.7 if options.mot or options.ig_curves else 1.0  # IG, then MoT, then curves
    mot_end = 0.85 if options.mot and options.ig_curves else 1.0 if options.mot else split
    result = attribute(
        encoder,
        texts,
        options=options.attribute_options(),
        progress=progress_part(progress, 0.0, split),
    )
    mot_result = None
    if options.mot:
        mot_result = mot_evaluate(
            with_subvectors(encoder, result.m, options.seed),
            texts,
            options=options.mot_options(),
            attributions=result.texts,
            progress=progress_part(progress, split, mot_end, "masking: "),
        )
    meta: dict[str, Any] = {"source": source, "texts": len(texts)}
    if mot_result is not None:
        meta["MoT"] = {
            "keep": mot_result.settings["keep"],
            "mask": mot_result.settings["mask"],
            "documents": mot_result.settings["n_docs"],
            "codebook": mot_result.settings["codebook"],
        }
    report = AttributionReport(attribution=result, mot=mot_result, meta=meta)
    if options.ig_curves:
        if progress is not None:
            progress(mot_end, "IG curves: re-encoding the edited texts…")
        report = report_ig_curves(encoder, report, seed=options.seed)
    return report


def build_report(
    encoder: Encoder,
    texts: list[str] | str,
    *,
    options: ReportOptions | None = None,
    source: str = "",
    progress: Progress | None = None,
    device: str | None = None,
    **given: Any,
) -> AttributionReport | TermsReport:
    """The attribution report for a dense + PQ encoder, else the terms report (the use case).

    Options: :class:`~lexlens.analysis.attribution.options.ReportOptions` (or its fields as
    keywords): ``m``, the IG options, ``mot`` and ``keep`` apply to the attribution report,
    ``top`` to the terms report; every option is checked whichever report runs, and
    sub-vectors or the masking evaluation on an encoder without them are refused before
    any model runs.
    """
    options = ReportOptions.of(options, **given)
    source = source_argument(source)
    progress = progress_argument(progress)
    texts = texts_argument(texts)
    _mot_texts(texts, options)
    encoder = encoder_argument(encoder, device=device_argument(device))
    if ATTRIBUTION_NEEDS.is_compatible(encoder):
        return attribution_report(encoder, texts, options=options, source=source, progress=progress)
    if options.m is not None or options.mot or options.ig_curves or options.subvectors is not None:
        raise InputError(
            "sub-vectors, IG curves and the MoT masking evaluation need a dense+PQ encoder "
            f"(e.g. minilm-pq); {encoder.name} is not one"
        )
    return terms_report(encoder, texts, top=options.top, source=source)
