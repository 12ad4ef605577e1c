"""What the attribution report shows, as HTML and CSV: per text a heatmap with one row per
sub-vector (its code and completeness delta) and one column per word, the GlobalT row, and
the MoT masking table with its tests.

This module decides what is shown (colours, rounding, which rows are bold) and hands it to
the template ``attribution.html`` through :func:`lexlens.analysis.render.html.render_report`
(autoescaped, so every user string is escaped); CSV goes through ``outputs.csv_bytes``
(formula-safe cells). The CSV holds every number the HTML shows, unrounded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from lexlens.analysis.attribution.display import best_rows, display_tables
from lexlens.analysis.attribution.options import DEFAULT_TOLERANCE
from lexlens.analysis.attribution.subvector import SubvectorAttribution
from lexlens.analysis.render.html import (
    NOTEBOOK_ROWS,
    cell_colour,
    num,
    render_fragment,
    render_report,
)
from lexlens.analysis.render.line_chart import line_chart

#: Texts rendered as heatmaps in the HTML; the rest are in the JSON and CSV only.
MAX_HTML_TEXTS = 50

ATTRIBUTION_CSV_HEADER = [
    "text_index",
    "subvector",
    "code",
    "word_index",
    "word",
    "attribution",
    "delta",
]


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
                "value": num(attr[r, w]),
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
            {
                "colour": cell_colour(glob[w], gscale),
                "value": num(glob[w]),
                "title": f"GlobalT · {word}: {num(glob[w])}",
            }
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
    """Template data of a MoT result (a ``MotResult``, not imported here: its own HTML view
    is drawn by this module): the display tables the app shows too."""
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


def _curves_view(curves: Any, fill: str) -> dict[str, Any]:
    """Template data of one text's IG deletion and insertion curves (an ``IgCurves`` of
    :mod:`lexlens.analysis.attribution.ig_curves`): both charts and each ranking's AOPCs,
    the exact values kept for the tooltips."""
    names = list(curves.mean_deletion_aopc)
    return {
        "measured_by": curves.measured_by,
        "words": list(curves.words),
        "fill": fill,
        "subvectors": len(curves.subvectors),
        "k": curves.k,
        "seed": curves.seed,
        "deletion": line_chart(curves.deletion, x_label="words deleted (k)", y_label="mean F_i"),
        "insertion": line_chart(curves.insertion, x_label="words inserted (k)", y_label="mean F_i"),
        "rows": [
            {
                "name": n,
                "deletion": curves.mean_deletion_aopc[n],
                "deletion_exact": repr(float(curves.mean_deletion_aopc[n])),
                "insertion": curves.mean_insertion_aopc[n],
                "insertion_exact": repr(float(curves.mean_insertion_aopc[n])),
            }
            for n in names
        ],
        "notes": list(curves.notes),
    }


def render_attribution_html(
    attributions: Sequence[SubvectorAttribution],
    *,
    encoder_name: str,
    mot: Any = None,  # a MotResult
    meta: Mapping[str, Any] | None = None,
    max_texts: int = MAX_HTML_TEXTS,
    curves: Mapping[int, Any] | None = None,  # text number → its IgCurves
) -> str:
    """The attribution report (and/or MoT table) as one self-contained HTML string; with
    ``curves``, each of those texts' IG deletion and insertion curves below its heatmap."""
    info: dict[str, Any] = {"encoder": encoder_name, "texts": len(attributions)}
    if attributions:
        info["sub-vectors per text"] = len(attributions[0].subvectors)
        used = sorted({int(a.steps) for a in attributions})
        info["IG nodes used"] = ", ".join(map(str, used))
    info.update(meta or {})
    shown = list(attributions)[: max(0, max_texts)]
    fill = "[UNK]"
    if attributions and attributions[0].baseline == "pad":
        fill = "[PAD]"
    views = [_heatmap(a) for a in shown]
    for i, view in enumerate(views):
        found = (curves or {}).get(i)
        view["curves"] = None if found is None else _curves_view(found, fill)
    return render_report(
        "attribution.html",
        title=f"Lexlens {'attribution' if attributions else 'MoT'} report — {encoder_name}",
        meta=info,
        texts=views,
        hidden=len(attributions) - len(shown),
        mot=_mot_view(mot) if mot is not None else None,
        fill=fill,
    )


#: Texts a notebook view draws; words (columns) of a text it draws.
NOTEBOOK_TEXTS = 5
NOTEBOOK_WORDS = 40


def attribution_notebook_html(
    attributions: Sequence[SubvectorAttribution], *, encoder_name: str, notes: Sequence[str]
) -> str:
    """The attribution in a notebook's output cell: per text (the first
    :data:`NOTEBOOK_TEXTS`) the report's heat table of sub-vectors × words, each cell's value
    written in it, the GlobalT row below (the first :data:`NOTEBOOK_ROWS` sub-vectors and
    :data:`NOTEBOOK_WORDS` words; the rest counted)."""
    views = []
    for a in list(attributions)[:NOTEBOOK_TEXTS]:
        view = _heatmap(a)
        words = len(view["words"])
        view["more_rows"] = max(0, len(view["rows"]) - NOTEBOOK_ROWS)
        view["more_words"] = max(0, words - NOTEBOOK_WORDS)
        view["rows"] = [
            {**r, "cells": _inked(r["cells"][:NOTEBOOK_WORDS])}
            for r in view["rows"][:NOTEBOOK_ROWS]
        ]
        view["global_row"]["cells"] = _inked(view["global_row"]["cells"][:NOTEBOOK_WORDS])
        view["words"] = view["words"][:NOTEBOOK_WORDS]
        views.append(view)
    return render_fragment(
        "notebook_attribution.html",
        title=f"Integrated Gradients per sub-vector — {encoder_name}",
        notes=list(notes),
        texts=views,
        more_texts=max(0, len(attributions) - NOTEBOOK_TEXTS),
    )


def _inked(cells: list[dict]) -> list[dict]:
    """Cells with the ink their value is written in: white on a dark background."""
    out = []
    for c in cells:
        r, g, b = (int(c["colour"][i : i + 2], 16) for i in (1, 3, 5))
        dark = 0.299 * r + 0.587 * g + 0.114 * b < 140
        out.append({**c, "ink": "#fff" if dark else "#111"})
    return out


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
