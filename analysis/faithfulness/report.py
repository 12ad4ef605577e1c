"""The faithfulness report of a benchmark's explanations: its own page (faithfulness.html)
and the same section inside evaluation.html, rendered by
:func:`lexlens.analysis.render.html.render_report` (Jinja2, autoescaped; the templates
``faithfulness.html`` and ``_faithfulness_section.html``). Self-contained: the deletion-curve
chart is inline SVG drawn by the template from the coordinates computed here."""

from __future__ import annotations

from typing import Any, Protocol

from lexlens.analysis.render.html import render_report


class FaithfulnessRecord(Protocol):
    """What the report reads of a benchmark's faithfulness (the result type itself lives in
    :mod:`.benchmark`, which imports this module, never the other way round)."""

    encoder: str
    settings: dict[str, Any]
    summary: Any
    failures: list[Any]
    notes: list[str]


#: Failures listed in the report (the CSV and JSON hold all).
LISTED = 200
COLOURS = ("#b2182b", "#2166ac", "#4d9221", "#8c510a")


def chart(series: dict[str, list[float]], *, width: int = 420, height: int = 220) -> dict:
    """The coordinates of a small line chart of curves over k = 0…K (the template draws it):
    each series' points, the y range from the data and 0 to 1, two ticks."""
    values = [v for ys in series.values() for v in ys]
    if not values:
        return {"series": []}
    low, high = min(0.0, *values), max(1.0, *values)
    k = max(len(ys) for ys in series.values()) - 1
    pad = 36

    def x(i: int) -> float:
        return pad + (width - 2 * pad) * (i / k if k else 0.0)

    def y(v: float) -> float:
        return height - pad - (height - 2 * pad) * (v - low) / ((high - low) or 1.0)

    lines = [
        {
            "name": name,
            "colour": COLOURS[n % len(COLOURS)],
            "points": " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(ys)),
        }
        for n, (name, ys) in enumerate(series.items())
    ]
    return {
        "series": lines,
        "width": width,
        "height": height,
        "left": pad,
        "right": width - pad,
        "top": pad,
        "bottom": height - pad,
        "zero": f"{y(0):.1f}",
        "k": k,
        "ticks": [
            {"y": f"{y(high):.1f}", "label": f"{high:.2g}"},
            {"y": f"{y(low):.1f}", "label": f"{low:.2g}"},
        ],
    }


def _context(result: FaithfulnessRecord, collapsed: bool) -> dict[str, Any]:
    """What the section's template reads: the summary, the failures listed, the chart."""
    s = result.summary
    return {
        "s": s,
        "settings": result.settings,
        "notes": result.notes,
        "rows": result.failures[:LISTED],
        "hidden": max(0, len(result.failures) - LISTED),
        "chart": chart({"explanation's order": s.curve, "random order": s.random_curve}),
        "collapsed": collapsed,
    }


def faithfulness_html(result: FaithfulnessRecord, *, collapsed: bool = False) -> str:
    """faithfulness.html: the summary against random, the curves, the failures (its section
    folded when ``collapsed``, as evaluation.html holds it)."""
    return render_report(
        "faithfulness.html",
        title="Lexlens faithfulness of the explanations",
        meta={"encoder": result.encoder, **result.settings},
        **_context(result, collapsed),
    )


def faithfulness_section(result: FaithfulnessRecord) -> str:
    """The same section, folded, to place inside another report (evaluation.html): the
    fragment template faithfulness.html includes, rendered alone."""
    return render_report(
        "_faithfulness_section.html", title="", meta={}, **_context(result, collapsed=True)
    )
