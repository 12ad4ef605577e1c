"""One colour per ranking in every figure that draws rankings side by side: the page's bars
(series in MoT, GlobalT, RandT order, long labels) and curves (MoT, RandT, GlobalT order)
and report.html's SVG curves give MoT, RandT and GlobalT the same three colours."""

from __future__ import annotations

import numpy as np

from lexlens.analysis.render.attribution_plots import curves_figure, series_bars
from lexlens.analysis.render.line_chart import line_chart


def test_silent_wrong_a_ranking_keeps_its_colour_whatever_its_order_and_label():
    bars = series_bars(
        ["a", "b"],
        {
            "MoT (this sub-vector)": np.array([1.0, 0.5]),
            "GlobalT (whole vector)": np.array([3.0, 1.0]),
            "RandT (another sub-vector)": np.array([0.2, 0.1]),
        },
    )
    curves = {"MoT": [0.0, -1.0], "RandT": [0.0, -0.5], "GlobalT": [0.0, -0.7]}
    page = curves_figure(curves, "mean F_i", "k")
    report = line_chart(dict(reversed(list(curves.items()))), x_label="k", y_label="F")
    by_figure = [
        {t.name.split(" ")[0]: t.marker.color for t in bars.data},
        {t.name: t.line.color for t in page.data},
        {t.name: t.marker.color for t in page.data},
        {line["name"]: line["colour"] for line in report["series"]},
    ]
    assert all(colours == by_figure[0] for colours in by_figure), by_figure
    assert len(set(by_figure[0].values())) == 3 and None not in by_figure[0].values()
    # A series that is no ranking never takes a ranking's colour.
    mixed = line_chart({"explanation": [1.0, 0.0], "MoT": [1.0, 0.5]}, x_label="k", y_label="F")
    assert mixed["series"][0]["colour"] not in by_figure[0].values()
