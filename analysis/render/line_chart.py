"""A small line chart of curves over k = 0…K, and a scatter of named points, as coordinates a
report template draws as inline SVG (``_line_chart.html``, ``_scatter_chart.html``): no
script and no request, so a report stays self-contained.

Drawing only: the curves' values come from the analysis that measured them; the y axis spans
exactly their range (ticks at its ends), each point keeps its exact value for a tooltip."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from lexlens.analysis.render.colours import series_colours
from lexlens.analysis.render.html import num

PAD = 40
LEFT = 64  # room for a y tick such as −0.02689


def line_chart(
    series: Mapping[str, Sequence[float]],
    *,
    x_label: str,
    y_label: str,
    width: int = 420,
    height: int = 220,
) -> dict[str, Any]:
    """The coordinates of ``series`` (name → values at k = 0, 1, …) in a ``width`` ×
    ``height`` box: each series' polyline and points, the axes, two y ticks and the labels
    (``series`` is empty: no chart, ``{"series": []}``)."""
    values = [float(v) for ys in series.values() for v in ys]
    if not values:
        return {"series": []}
    low, high = min(values), max(values)
    if high == low:  # a flat curve: a visible band around it
        low, high = low - 0.5 * (abs(low) or 1.0), high + 0.5 * (abs(high) or 1.0)
    k = max(len(ys) for ys in series.values()) - 1

    def x(i: int) -> float:
        return LEFT + (width - LEFT - PAD) * (i / k if k else 0.5)

    def y(v: float) -> float:
        return height - PAD - (height - 2 * PAD) * (float(v) - low) / (high - low)

    colours = series_colours(list(series))  # a ranking's own colour, as on the page
    lines = []
    for name, ys in series.items():
        points = [
            {"x": f"{x(i):.1f}", "y": f"{y(v):.1f}", "title": f"{name}, k = {i}: {v!r}"}
            for i, v in enumerate(float(v) for v in ys)
        ]
        lines.append(
            {
                "name": name,
                "colour": colours[name],
                "points": points,
                "polyline": " ".join(f"{p['x']},{p['y']}" for p in points),
            }
        )
    return {
        "series": lines,
        "width": width,
        "height": height,
        "left": LEFT,
        "right": width - PAD,
        "top": PAD,
        "bottom": height - PAD,
        "k": k,
        "x_label": x_label,
        "y_label": y_label,
        "ticks": [
            {"y": f"{y(high):.1f}", "label": num(high)},
            {"y": f"{y(low):.1f}", "label": num(low)},
        ],
        "x_ticks": [{"x": f"{x(i):.1f}", "label": str(i)} for i in range(k + 1)],
    }


def scatter_chart(
    points: Sequence[tuple[str, float, float]],
    *,
    x_label: str,
    y_label: str,
    log_x: bool = False,
    width: int = 420,
    height: int = 260,
    marked: Collection[str] = (),
) -> dict[str, Any]:
    """The coordinates of named points ``(name, x, y)`` in a ``width`` × ``height`` box, each
    labelled with its name and its exact values as a tooltip, the axes spanning the points'
    range (``log_x``: x on a log scale, positive x only; ``marked``: names drawn with a
    distinct marker, a reference beside the others); no points: ``{"points": []}``."""
    shown = [(n, float(a), float(b)) for n, a, b in points if not log_x or float(a) > 0]
    if not shown:
        return {"points": []}

    def spread(values: list[float]) -> tuple[float, float]:
        low, high = min(values), max(values)
        if high == low:  # one value: a visible band around it
            return low - 0.5 * (abs(low) or 1.0), high + 0.5 * (abs(high) or 1.0)
        return low, high

    xs = [math.log10(a) if log_x else a for _, a, _ in shown]
    (x_low, x_high), (y_low, y_high) = spread(xs), spread([b for _, _, b in shown])

    def x(v: float) -> float:
        return LEFT + (width - LEFT - PAD) * (v - x_low) / (x_high - x_low)

    def y(v: float) -> float:
        return height - PAD - (height - 2 * PAD) * (v - y_low) / (y_high - y_low)

    def x_tick(v: float) -> str:
        return num(10**v if log_x else v)

    placed: list[tuple[float, float]] = []  # the labels drawn so far (x, baseline y)
    drawn = []
    for (n, a, b), xv in zip(shown, xs, strict=True):
        px, py = x(xv), y(b)
        label_y = py - 7  # above its point, else below when a label is already there
        if any(abs(lx - px) < 8 * len(n) and abs(ly - label_y) < 11 for lx, ly in placed):
            label_y = py + 15
        placed.append((px, label_y))
        drawn.append(
            {
                "x": f"{px:.1f}",
                "y": f"{py:.1f}",
                "label_y": f"{label_y:.1f}",
                "name": n,
                "anchor": "end" if px > (LEFT + width - PAD) / 2 else "start",
                "title": f"{n}: {x_label} {a!r}, {y_label} {b!r}",
                "marked": n in marked,
            }
        )
    return {
        "points": drawn,
        "width": width,
        "height": height,
        "left": LEFT,
        "right": width - PAD,
        "top": PAD,
        "bottom": height - PAD,
        "x_label": x_label + (" (log scale)" if log_x else ""),
        "y_label": y_label,
        "ticks": [
            {"y": f"{y(y_high):.1f}", "label": num(y_high)},
            {"y": f"{y(y_low):.1f}", "label": num(y_low)},
        ],
        "x_ticks": [
            {"x": f"{x(x_low):.1f}", "label": x_tick(x_low)},
            {"x": f"{x(x_high):.1f}", "label": x_tick(x_high)},
        ],
    }
