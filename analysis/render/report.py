"""Self-contained reports: one HTML file (no external assets, no scripts) plus JSON and CSV.

Two kinds, each a use case returning a typed result:

- :func:`attribution_report` (quantised, differentiable encoders): per text a heatmap with
  one row per sub-vector (its code and completeness delta) and one column per word, the
  GlobalT row, and optionally the MoT masking table;
- :func:`terms_report` (lexical encoders): per text an inline word-cloud PNG and its top terms.

A result's ``files()`` gives file name → bytes (the app offers them as downloads, the CLI
writes them with :func:`lexlens.analysis.core.outputs.write_files`). HTML is rendered by the
Jinja2 templates in ``analysis/templates/`` with autoescaping on, so every user string
(texts, tokens, file and encoder names) is escaped; JSON goes through ``outputs.json_bytes``
(never NaN) and CSV through ``outputs.csv_bytes`` (formula-safe cells). The JSON and CSV
hold every number the HTML shows, unrounded; report.json is exactly ``result.to_dict()``.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lexlens.analysis.attribution.attribution import (
    ATTRIBUTION_NEEDS,
    DEFAULT_MAX_STEPS,
    DEFAULT_TOLERANCE,
    AttributionResult,
    SubvectorAttribution,
    attribute,
    progress_part,
)
from lexlens.analysis.core.outputs import csv_bytes, json_bytes, write_files
from lexlens.analysis.render.html import cell_colour, meta_rows, now, num, templates
from lexlens.models.base import InputError, check_texts

#: Texts rendered as heatmaps in the HTML; the rest are in the JSON and CSV only.
MAX_HTML_TEXTS = 50
ProgressFn = Callable[[float, str], None]

ATTRIBUTION_CSV_HEADER = [
    "text_index",
    "subvector",
    "code",
    "word_index",
    "word",
    "attribution",
    "delta",
]
TERMS_CSV_HEADER = ["item_index", "label", "rank", "token", "weight", "index", "kind"]


# ------------------------------------------------------------------ attribution reports


def _heatmap(a: SubvectorAttribution) -> dict[str, Any]:
    """Template data of one text: rows of coloured cells with their exact values as titles."""
    attr = np.asarray(a.attributions, dtype=np.float64)
    glob = np.asarray(a.global_attributions, dtype=np.float64)
    codes = np.asarray(a.codes).astype(int)
    gap, delta = a.gap(), np.asarray(a.delta, dtype=np.float64)
    finite = attr[np.isfinite(attr)]
    scale = float(np.abs(finite).max()) if finite.size else 0.0
    gfinite = glob[np.isfinite(glob)]
    gscale = float(np.abs(gfinite).max()) if gfinite.size else 0.0
    words = [str(w) for w in a.words]
    rows = []
    for r, sv in enumerate(a.subvectors):
        cells = [
            {
                "colour": cell_colour(attr[r, w], scale),
                "title": f"sub-vector {sv} · code {codes[sv]} · {word}: {num(attr[r, w])}",
            }
            for w, word in enumerate(words)
        ]
        rows.append(
            {
                "subvector": sv,
                "code": int(codes[sv]),
                "gap": num(gap[r]),
                "sum": num(attr[r].sum()),
                "delta": num(delta[r]),
                "cells": cells,
            }
        )
    global_row = {
        "gap": num(glob.sum() - float(a.global_delta)),
        "sum": num(glob.sum()),
        "delta": num(float(a.global_delta)),
        "cells": [
            {"colour": cell_colour(glob[w], gscale), "title": f"GlobalT · {word}: {num(glob[w])}"}
            for w, word in enumerate(words)
        ],
    }
    return {
        "text": a.text,
        "truncated": bool(a.truncated),
        "words": words,
        "rows": rows,
        "global_row": global_row,
        "scale": num(scale),
        "global_scale": num(gscale),
        "steps": int(a.steps),
        "method": a.method,
    }


def _mot_view(mot: Any) -> dict[str, Any]:
    """Template data of a MoT result: the display tables the app shows too."""
    from lexlens.analysis.attribution.mot import best_rows, display_tables

    table, tests = display_tables(mot)
    best = best_rows(mot)
    bold = {c: best[int(col[2:])] for c, col in enumerate(table.columns) if col.startswith("M=")}
    conv = mot.convergence()
    conv_rows = [
        [
            f"M={r.m}",
            f"{r.steps_min}–{r.steps_max}",
            f"{r.relative_delta_mean:.2%}",
            f"{r.relative_delta_median:.2%}",
            f"{r.relative_delta_max:.2%}",
            f"{r.share_above_tolerance:.1%}",
        ]
        for r in conv.itertuples()
    ]
    tol = float(mot.settings.get("tolerance", DEFAULT_TOLERANCE))
    return {
        "keep": f"{float(mot.settings.get('keep', 0.05)):.0%}",
        "table": {"columns": list(table.columns), "rows": table.to_numpy().tolist()},
        "table_numeric": tuple(range(1, len(table.columns))),
        "bold": bold,
        "tests": {"columns": list(tests.columns), "rows": tests.to_numpy().tolist()},
        "tests_numeric": tuple(range(1, len(tests.columns))),
        "convergence": {
            "columns": [
                "M",
                "steps used",
                "mean rel. delta",
                "median",
                "max",
                f"share > {tol:.0%}",
            ],
            "rows": conv_rows,
        },
        "convergence_numeric": (2, 3, 4, 5),
    }


def render_attribution_html(
    attributions: Sequence[SubvectorAttribution],
    *,
    encoder_name: str,
    mot: Any = None,
    meta: Mapping[str, Any] | None = None,
    max_texts: int = MAX_HTML_TEXTS,
) -> str:
    """The attribution report (and/or MoT table) as one self-contained HTML string."""
    info: dict[str, Any] = {"encoder": encoder_name, "texts": len(attributions)}
    if attributions:
        info["sub-vectors per text"] = len(attributions[0].subvectors)
        used = sorted({int(a.steps) for a in attributions})
        info["IG nodes used"] = ", ".join(map(str, used))
    info.update(meta or {})
    info["generated"] = now()
    shown = list(attributions)[: max(0, max_texts)]
    fill = "[UNK]"
    if attributions and attributions[0].baseline == "pad":
        fill = "[PAD]"
    title = f"Lexlens {'attribution' if attributions else 'MoT'} report — {encoder_name}"
    return (
        templates()
        .get_template("attribution.html")
        .render(
            title=title,
            meta=meta_rows(info),
            texts=[_heatmap(a) for a in shown],
            hidden=len(attributions) - len(shown),
            mot=_mot_view(mot) if mot is not None else None,
            fill=fill,
        )
    )


def attribution_csv_rows(attributions: Sequence[SubvectorAttribution]) -> list[list[Any]]:
    """One row per text × sub-vector × word (plus the GlobalT rows, ``subvector = "global"``)."""
    rows: list[list[Any]] = []
    for t, a in enumerate(attributions):
        attr = np.asarray(a.attributions, dtype=np.float64)
        delta = np.asarray(a.delta, dtype=np.float64)
        codes = np.asarray(a.codes).astype(int)
        for r, sv in enumerate(a.subvectors):
            for w, word in enumerate(a.words):
                rows.append([t, sv, int(codes[sv]), w, word, float(attr[r, w]), float(delta[r])])
        glob = np.asarray(a.global_attributions, dtype=np.float64)
        for w, word in enumerate(a.words):
            rows.append([t, "global", None, w, word, float(glob[w]), float(a.global_delta)])
    return rows


def mot_files(mot: Any) -> dict[str, bytes]:
    """The masking evaluation's CSV files (table, tests, convergence, per-document values)."""
    from lexlens.analysis.attribution.mot import pairwise
    from lexlens.analysis.core.outputs import frame_csv_bytes

    table = mot.table.copy()
    table.columns = [str(c) for c in table.columns]
    files = {
        "mot.csv": frame_csv_bytes(table, index=True),
        "mot_tests.csv": frame_csv_bytes(mot.significance),
        "mot_pairs.csv": frame_csv_bytes(pairwise(mot.per_doc)),
        "mot_convergence.csv": frame_csv_bytes(mot.convergence()),
    }
    for m, frame in mot.per_doc.items():
        files[f"mot_docs_M{m}.csv"] = frame_csv_bytes(frame.rename_axis("doc"), index=True)
        rows = []
        rel = mot.relative_deltas(m)
        for doc in frame.index:
            for j in range(m):
                col = f"sv{j}"
                rows.append(
                    [
                        int(doc),
                        j,
                        int(mot.steps[m].loc[doc]),
                        float(mot.gaps[m].loc[doc, col]),
                        float(mot.deltas[m].loc[doc, col]),
                        float(rel.loc[doc, col]),
                    ]
                )
        files[f"mot_deltas_M{m}.csv"] = csv_bytes(
            ["doc", "subvector", "steps", "target_gap", "delta", "relative_delta"], rows
        )
    return files


@dataclass(frozen=True)
class AttributionReport:
    """An attribution (and optionally masking) report: the numbers and where they came from."""

    attribution: AttributionResult
    mot: Any = None  # lexlens.analysis.attribution.mot.MotResult
    meta: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "kind": "attribution-report",
            "meta": dict(self.meta),
            "attribution": self.attribution.to_dict(),
            "mot": None if self.mot is None else self.mot.to_dict(),
        }

    def html(self) -> str:
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
        return render_attribution_html(a.texts, encoder_name=a.encoder, mot=self.mot, meta=meta)

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
            files.update(mot_files(self.mot))
        return files


def attribution_report(
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
    source: str = "",
    progress: ProgressFn | None = None,
) -> AttributionReport:
    """IG of every text (and the MoT table over them with the same codebook): the use case.

    Checked before any model runs: the texts, every option, and that the masking
    evaluation has at least two texts.
    """
    if isinstance(texts, str):
        texts = [texts]
    check_texts(texts)
    ATTRIBUTION_NEEDS.check(encoder)
    if mot:
        if len(texts) < 2:
            raise InputError(
                "the MoT masking evaluation needs at least two texts: give a corpus or untick MoT"
            )
        if isinstance(keep, bool) or not isinstance(keep, int | float) or not 0 < keep <= 1:
            raise InputError(f"keep must be a fraction in (0, 1], got {keep!r}")
    split = 0.7 if mot else 1.0
    result = attribute(
        encoder,
        texts,
        m=m,
        steps=steps,
        tolerance=tolerance,
        max_steps=max_steps,
        baseline=baseline,
        progress=progress_part(progress, 0.0, split),
    )
    mot_result = None
    if mot:
        from lexlens.analysis.attribution.attribution import with_subvectors
        from lexlens.analysis.attribution.mot import mot_evaluate

        enc = with_subvectors(encoder, result.m)
        mot_result = mot_evaluate(
            enc,
            texts,
            keep=float(keep),
            attributions=result.texts,
            tolerance=tolerance,
            max_steps=max_steps,
            progress=progress_part(progress, split, 1.0, "masking: "),
        )
    meta = {"source": source, "texts": len(texts)}
    if mot_result is not None:
        meta["MoT"] = {
            "keep": mot_result.settings["keep"],
            "mask": mot_result.settings["mask"],
            "documents": mot_result.settings["n_docs"],
            "codebook": mot_result.settings["codebook"],
        }
    return AttributionReport(result, mot_result, meta)


def write_attribution_report(
    out_dir: str | Path,
    attributions: Sequence[SubvectorAttribution],
    *,
    encoder_name: str,
    meta: Mapping[str, Any] | None = None,
) -> dict[str, Path]:
    """Render already computed attributions into report.html and attributions.csv in ``out_dir``."""
    files = {
        "report.html": render_attribution_html(
            attributions, encoder_name=encoder_name, meta=meta
        ).encode("utf-8"),
        "attributions.csv": csv_bytes(ATTRIBUTION_CSV_HEADER, attribution_csv_rows(attributions)),
    }
    return write_files(out_dir, files)


# ------------------------------------------------------------------------ term reports


@dataclass(frozen=True)
class TermsReport:
    """Top terms (with word clouds) of each text, for a lexical encoder."""

    encoder: str
    items: list[Any]  # lexlens.analysis.lexical.terms.TermsResult, one per text
    labels: list[str]
    meta: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "kind": "terms-report",
            "encoder": self.encoder,
            "meta": dict(self.meta),
            "items": [
                {"label": label, **item.to_dict()}
                for label, item in zip(self.labels, self.items, strict=True)
            ],
        }

    def html(self, max_items: int = MAX_HTML_TEXTS) -> str:
        from lexlens.analysis.lexical.terms import Term
        from lexlens.analysis.render.plots import png_bytes, wordcloud_image

        shown = []
        for label, item in list(zip(self.labels, self.items, strict=True))[: max(0, max_items)]:
            rows = item.terms
            terms = [Term(r["token"], float(r["weight"]), int(r["index"])) for r in rows]
            own = {r["token"] for r in rows if r.get("in_input")}
            png = png_bytes(wordcloud_image(terms, highlight=own))
            shown.append(
                {
                    "label": label,
                    "notes": list(item.notes),
                    "cloud": "data:image/png;base64," + base64.b64encode(png).decode("ascii"),
                    "table": {
                        "columns": ["rank", "term", "weight", "kind"],
                        "rows": [
                            [r + 1, t["token"], num(t["weight"]), _kind(t)]
                            for r, t in enumerate(rows)
                        ],
                    },
                }
            )
        info = {"encoder": self.encoder, "inputs": len(self.items), **self.meta}
        info["generated"] = now()
        return (
            templates()
            .get_template("terms.html")
            .render(
                title=f"Lexlens terms report — {self.encoder}",
                meta=meta_rows(info),
                items=shown,
                hidden=len(self.items) - len(shown),
            )
        )

    def files(self) -> dict[str, bytes]:
        rows = [
            [i, label, r + 1, t["token"], float(t["weight"]), int(t["index"]), _kind(t)]
            for i, (label, item) in enumerate(zip(self.labels, self.items, strict=True))
            for r, t in enumerate(item.terms)
        ]
        return {
            "report.html": self.html().encode("utf-8"),
            "report.json": json_bytes(self),
            "terms.csv": csv_bytes(TERMS_CSV_HEADER, rows),
        }


def _kind(term: Mapping[str, Any]) -> str:
    return "bag of words" if term.get("in_input") else "expansion"


def terms_report(encoder, texts: list[str], *, top: int = 30, source: str = "") -> TermsReport:
    """The top terms of every text through a lexical text encoder (the use case)."""
    from lexlens.analysis.lexical.terms import TEXT_NEEDS, terms_of_encoding

    if isinstance(texts, str):
        texts = [texts]
    check_texts(texts)
    if isinstance(top, bool) or not isinstance(top, int) or top <= 0:
        raise InputError("the number of top terms must be a positive integer")
    TEXT_NEEDS.check(encoder)
    encodings = encoder.encode_texts(texts, keep_units=False)
    items = [
        terms_of_encoding(encoder, enc, top=top, input_info={"text": text})
        for text, enc in zip(texts, encodings, strict=True)
    ]
    meta = {"source": source, "texts": len(texts), "top terms": top}
    return TermsReport(encoder.name, items, list(texts), meta)
