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
#: The share of a scatter's range its axes reach beyond the points, on each side.
MARGIN = 0.08
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


#: Where a point's name may go, tried in this order (plotly's textposition names).
PLACES = (
    "top center",
    "bottom center",
    "middle right",
    "middle left",
    "top right",
    "top left",
    "bottom right",
    "bottom left",
)
#: Each place as the SVG draws it: the label's offset from its point (x, y; y down) and
#: its anchor (the baseline sits about 3 px under the text's middle).
_SVG_PLACES = {
    "top center": (0, -7, "middle"),
    "bottom center": (0, 15, "middle"),
    "middle right": (7, 3, "start"),
    "middle left": (-7, 3, "end"),
    "top right": (4, -6, "start"),
    "top left": (-4, -6, "end"),
    "bottom right": (4, 14, "start"),
    "bottom left": (-4, 14, "end"),
}
CHAR_WIDTH = 6.0  # px of one character of a 10–12 px label
LABEL_HEIGHT = 12.0


def _label_box(x: float, y: float, place: str, text: str) -> tuple[float, float, float, float]:
    """The box (left, top, right, bottom; y down) of ``text`` placed at ``place`` beside
    the point (x, y)."""
    width = CHAR_WIDTH * len(text)
    vertical, horizontal = place.split()
    top = {"top": y - 6 - LABEL_HEIGHT, "bottom": y + 6, "middle": y - LABEL_HEIGHT / 2}
    left = {"center": x - width / 2, "right": x + 6, "left": x - 6 - width}
    return left[horizontal], top[vertical], left[horizontal] + width, top[vertical] + LABEL_HEIGHT


def label_places(
    pixels: Sequence[tuple[float, float]],
    names: Sequence[str],
    *,
    y_down: bool,
    within: tuple[float, float] | None = None,
) -> list[str]:
    """Where each point's name goes (one of :data:`PLACES`): the first place, in order,
    whose box overlaps no name placed before and no other point, and stays ``within``
    (left, right) when given (points at ``pixels``, ``y_down``: y grows downwards, as in
    SVG; else upwards, as a plot's value); the first place when none is free."""
    points = [(x, y if y_down else -y) for x, y in pixels]
    boxes: list[tuple[float, float, float, float]] = []
    out = []

    def clear(box: tuple[float, float, float, float], own: int) -> bool:
        left, top, right, bottom = box
        if within is not None and (left < within[0] or right > within[1]):
            return False
        for other in boxes:
            if left < other[2] and other[0] < right and top < other[3] and other[1] < bottom:
                return False
        return not any(
            left - 4 < px < right + 4 and top - 4 < py < bottom + 4
            for i, (px, py) in enumerate(points)
            if i != own
        )

    for i, ((x, y), name) in enumerate(zip(points, names, strict=True)):
        place = next((p for p in PLACES if clear(_label_box(x, y, p, name), i)), PLACES[0])
        boxes.append(_label_box(x, y, place, name))
        out.append(place)
    return out


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
    named where no other name or point is (:func:`label_places`) with its exact values as a
    tooltip, the axes spanning the points' range and :data:`MARGIN` beyond (``log_x``: x on
    a log scale, positive x only; ``marked``: names drawn with a distinct marker, a
    reference beside the others); no points: ``{"points": []}``."""
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
    # the axes reach MARGIN of the range beyond the points: none sits on an axis, and the
    # ticks (at the points' extremes) stay apart at the corner
    x_pad, y_pad = MARGIN * (x_high - x_low), MARGIN * (y_high - y_low)

    def x(v: float) -> float:
        return LEFT + (width - LEFT - PAD) * (v - x_low + x_pad) / (x_high - x_low + 2 * x_pad)

    def y(v: float) -> float:
        span = y_high - y_low + 2 * y_pad
        return height - PAD - (height - 2 * PAD) * (v - y_low + y_pad) / span

    def x_tick(v: float) -> str:
        return num(10**v if log_x else v)

    pixels = [(x(xv), y(b)) for (_, _, b), xv in zip(shown, xs, strict=True)]
    places = label_places(pixels, [n for n, _, _ in shown], y_down=True, within=(0, width))
    drawn = []
    for (n, a, b), (px, py), place in zip(shown, pixels, places, strict=True):
        dx, dy, anchor = _SVG_PLACES[place]
        drawn.append(
            {
                "x": f"{px:.1f}",
                "y": f"{py:.1f}",
                "label_x": f"{px + dx:.1f}",
                "label_y": f"{py + dy:.1f}",
                "name": n,
                "anchor": anchor,
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
