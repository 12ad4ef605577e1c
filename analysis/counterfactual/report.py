"""The counterfactuals' section of evaluation.html (the template
``render/templates/counterfactuals.html``, autoescaped, through the one report path): the
summary — FlipRate, mean edits, mean model calls — and each failure's verified edits (or,
not found, the closest tried and its rank)."""

from __future__ import annotations

from typing import Any

from lexlens.analysis.render.html import render_report

#: Failures listed in the section (the CSV and JSON hold all).
LISTED = 200


def counterfactual_section(result: Any) -> str:
    """The HTML section of a benchmark's counterfactuals (an ``EvaluationCounterfactuals``)."""
    doc = result.to_dict()
    rows = doc["failures"][:LISTED]
    for r in rows:  # a missing key reads as empty under StrictUndefined
        for e in r["text"]["edits"]:
            e.setdefault("word", None)
            e.setdefault("cell", None)
    return render_report(
        "counterfactuals.html",
        title="",
        meta={},
        s=result.summary,
        settings=result.settings,
        notes=result.notes,
        rows=rows,
        hidden=max(0, len(doc["failures"]) - LISTED),
    )
