"""A comparison's reports: the self-contained HTML page (:func:`comparison_html`, through
:func:`~lexlens.analysis.render.html.render_report`) and the LaTeX table
(:func:`latex_table`): one row per system, one column per measure, the mean with † where
the difference from the baseline is significant (the chosen test, corrected p below the
level), the best mean of each column in bold."""

from __future__ import annotations

import math
from typing import Any

from lexlens.analysis.render.html import render_fragment, render_report
from lexlens.analysis.render.line_chart import label_places, scatter_chart

#: A :class:`~lexlens.analysis.systems.result.SystemsComparison` (which imports this module).
SystemsComparison = Any

#: Bars drawn in the HTML's per-query delta chart (its SVG width grows with them).
CHART_WIDTH = 720
CHART_HEIGHT = 160


def marks(result: SystemsComparison) -> dict[tuple[str, str], bool]:
    """(system, measure) → whether it differs significantly from the baseline."""
    return {
        (r["system_b"], r["measure"]): r["significant"]
        for r in result.table
        if r["system_a"] == result.baseline
    }


def _latex_escape(text: str) -> str:
    table = {
        "\\": r"\textbackslash{}",
        "&": r"\&",
        "%": r"\%",
        "$": r"\$",
        "#": r"\#",
        "_": r"\_",
        "{": r"\{",
        "}": r"\}",
        "~": r"\textasciitilde{}",
        "^": r"\textasciicircum{}",
    }
    return "".join(table.get(c, c) for c in str(text))


def latex_table(result: SystemsComparison) -> str:
    """The means as a LaTeX ``tabular`` (booktabs), † on significant differences."""
    measures = result.measures
    significant = marks(result)
    best = {m: max(result.means[s.name][m] for s in result.systems) for m in measures}
    lines = [
        r"% Lexlens comparison: \usepackage{booktabs}",
        r"\begin{table}[t]",
        r"\centering",
        r"\begin{tabular}{l" + "r" * len(measures) + "}",
        r"\toprule",
        "System & " + " & ".join(_latex_escape(m) for m in measures) + r" \\",
        r"\midrule",
    ]
    for s in result.systems:
        cells = []
        for m in measures:
            value = result.means[s.name][m]
            cell = f"{value:.4f}"
            if value == best[m]:
                cell = r"\textbf{" + cell + "}"
            if significant.get((s.name, m)):
                cell += r"$^\dagger$"
            cells.append(cell)
        lines.append(_latex_escape(s.name) + " & " + " & ".join(cells) + r" \\")
    settings = result.settings
    lines += [
        r"\bottomrule",
        r"\end{tabular}",
        r"\caption{Means over " + str(len(result.per_query)) + r" queries. $\dagger$: differs "
        r"from "
        + _latex_escape(result.baseline)
        + " ("
        + _latex_escape(settings["test"])
        + ", "
        + _latex_escape(settings["correction"])
        + f"-corrected $p < {settings['significance']:g}$"
        + r").}",
        r"\end{table}",
    ]
    return "\n".join(lines) + "\n"


def delta_bars(result: SystemsComparison, pair: tuple[str, str], measure: str) -> list[dict]:
    """The sorted per-query differences of one pair as SVG bars (x, y, width, height,
    colour, the query and its difference)."""
    a, b = pair
    deltas = sorted(
        ((q["values"][b][measure] - q["values"][a][measure], q["id"]) for q in result.per_query),
        key=lambda d: -d[0],
    )
    if not deltas:
        return []
    scale = max(1e-12, max(abs(d) for d, _ in deltas))
    width = CHART_WIDTH / len(deltas)
    middle = CHART_HEIGHT / 2
    bars = []
    for i, (d, q) in enumerate(deltas):
        height = abs(d) / scale * middle
        bars.append(
            {
                "x": i * width,
                "y": middle - height if d > 0 else middle,
                "w": width,
                "h": height,
                "fill": "#2166ac" if d > 0 else "#b2182b",
                "q": q,
                "d": d,
            }
        )
    return bars


def efficiency_figure(result: SystemsComparison) -> Any | None:
    """The page's effectiveness–efficiency chart: nDCG@10 (the first measure) against FLOPs
    and against the exact scorer's mean latency, one point per system whose costs are
    measured (plotly, two panels); ``None`` when no system's are (runs only)."""
    import plotly.graph_objects as go  # heavy: plotly loads on first use
    from plotly.subplots import make_subplots  # heavy: with plotly

    primary = result.measures[0]
    points = [
        (s.name, result.means[s.name][primary], result.efficiency.get(s.name) or {})
        for s in result.systems
    ]
    points = [(n, m, e) for n, m, e in points if e.get("flops") is not None]
    if not points:
        return None
    figure = make_subplots(
        rows=1,
        cols=2,
        shared_yaxes=True,
        subplot_titles=("against FLOPs", "against latency"),
    )
    for column, key in ((1, "flops"), (2, "latency_ms")):
        figure.add_trace(
            go.Scatter(
                x=[e[key] for _, _, e in points],
                y=[m for _, m, _ in points],
                text=[n for n, _, _ in points],
                mode="markers+text",
                textposition="top center",
                marker={"size": 10, "color": "#2166ac"},
                cliponaxis=False,  # a name above its point is never cut at the plot's edge
                showlegend=False,
                hovertemplate="%{text}<br>%{x:.4g}, " + primary + " %{y:.4f}<extra></extra>",
            ),
            row=1,
            col=column,
        )
    figure.update_xaxes(title_text="FLOPs (Σₜ p_q(t)·p_d(t))", type="log", row=1, col=1)
    figure.update_xaxes(title_text="mean latency per query (ms)", row=1, col=2)
    values = [m for _, m, _ in points]
    pad = max(max(values) - min(values), 0.01) * 0.15  # room for each point and its name
    figure.update_yaxes(range=[min(values) - pad, max(values) + 2 * pad])
    figure.update_yaxes(title_text=primary, row=1, col=1)
    figure.update_layout(height=360, margin={"l": 50, "r": 60, "t": 40, "b": 50})
    return figure


def efficiency_charts(result: SystemsComparison) -> list[dict]:
    """The report's effectiveness–efficiency charts: the first measure against FLOPs (log
    scale) and against latency, as inline-SVG coordinates (no script: the report stays
    self-contained); empty when no system's costs are measured."""
    primary = result.measures[0]
    costs = [(s.name, result.efficiency.get(s.name) or {}) for s in result.systems]
    charts = []
    for key, label, log_x in (("flops", "FLOPs", True), ("latency_ms", "latency (ms)", False)):
        points = [(name, e[key], result.means[name][primary]) for name, e in costs if e.get(key)]
        chart = scatter_chart(points, x_label=label, y_label=primary, log_x=log_x)
        if chart["points"]:
            charts.append({"label": f"{primary} against {label}", "chart": chart})
    return charts


def sweep_charts(sweep: Any) -> list[dict]:
    """A sweep's report charts: accuracy@10 and nDCG@10 (when measured) against the median
    latency (log scale), one point per setting and the exact scorer's marked beside them,
    as inline-SVG coordinates."""
    ACCURACY, NDCG, EXACT = sweep.accuracy_label, sweep.ndcg_label, sweep.exact_name
    x_label = "median latency per query, µs"
    charts = []
    for key, label in (("accuracy", ACCURACY), ("ndcg", NDCG)):
        points = [
            (_sweep_label(p), p.latency_us, getattr(p, key))
            for p in sweep.points
            if getattr(p, key) is not None
        ]
        chart = scatter_chart(points, x_label=x_label, y_label=label, log_x=True, marked=[EXACT])
        if chart["points"]:
            charts.append({"label": f"{label} against latency", "chart": chart})
    return charts


def _sweep_label(point: Any) -> str:
    """A sweep point's name on a chart: ``cut 3``, or ``exact``."""
    return point.name if point.query_cut is None else f"cut {point.query_cut}"


def sweep_section(sweep: Any) -> str:
    """The sweep as a block of another report (evaluation.html)."""
    return render_fragment(
        "_engine_sweep_section.html", s=sweep.to_dict(), charts=sweep_charts(sweep)
    )


def sweep_html(sweep: Any) -> str:
    """The sweep as its own self-contained report (engine_sweep.html)."""
    return render_report(
        "engine_sweep.html",
        title=f"Lexlens what if — {sweep.engine} at {len(sweep.settings)} settings",
        meta={"collection": sweep.collection, "items": sweep.items, "queries": sweep.queries},
        s=sweep.to_dict(),
        charts=sweep_charts(sweep),
    )


#: The page's sweep chart: each panel's plotting area, in px (for placing the names).
SWEEP_PANEL = (400, 260)


def _log_ticks(low: float, high: float) -> list[float]:
    """Ticks at 1, 2 and 5 × 10ᵏ from ``low`` to ``high`` (both > 0)."""
    ticks = []
    for power in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1):
        ticks += [m * 10.0**power for m in (1, 2, 5) if low <= m * 10.0**power <= high]
    return ticks


def sweep_figure(sweep: Any) -> Any:
    """The page's sweep chart: accuracy@10 and nDCG@10 against the median latency per query
    (log scale), one point per setting and the exact scorer's (a red square) beside them,
    each named where its name overlaps no other (plotly, two panels; one when nDCG@10 is not
    measured)."""
    import plotly.graph_objects as go  # heavy: plotly loads on first use
    from plotly.subplots import make_subplots  # heavy: with plotly

    ACCURACY, NDCG, EXACT = sweep.accuracy_label, sweep.ndcg_label, sweep.exact_name
    panels = [("accuracy", ACCURACY)]
    if any(p.ndcg is not None for p in sweep.points):
        panels.append(("ndcg", NDCG))
    figure = make_subplots(
        rows=1,
        cols=len(panels),
        subplot_titles=[f"{label} against latency" for _, label in panels],
        horizontal_spacing=0.12,
    )
    latencies = [p.latency_us for p in sweep.points if p.latency_us > 0]
    x_low, x_high = math.log10(min(latencies)) - 0.12, math.log10(max(latencies)) + 0.12
    ticks = _log_ticks(10**x_low, 10**x_high)
    width, height = SWEEP_PANEL
    for column, (key, label) in enumerate(panels, 1):
        shown = [p for p in sweep.points if getattr(p, key) is not None and p.latency_us > 0]
        values = [getattr(p, key) for p in shown]
        pad = max(max(values) - min(values), 0.01) * 0.15  # room for each point and its name
        y_low, y_high = min(values) - pad, max(values) + 2 * pad
        pixels = [
            (
                (math.log10(p.latency_us) - x_low) / (x_high - x_low) * width,
                (getattr(p, key) - y_low) / (y_high - y_low) * height,
            )
            for p in shown
        ]
        places = dict(
            zip(
                (p.name for p in shown),
                label_places(pixels, [_sweep_label(p) for p in shown], y_down=False),
                strict=True,
            )
        )
        groups = (
            ([p for p in shown if p.engine != EXACT], sweep.engine, "circle", "#2166ac"),
            ([p for p in shown if p.engine == EXACT], "exact scorer", "square", "#b2182b"),
        )
        for points, name, symbol, colour in groups:
            figure.add_trace(
                go.Scatter(
                    x=[p.latency_us for p in points],
                    y=[getattr(p, key) for p in points],
                    text=[_sweep_label(p) for p in points],
                    mode="markers+text",
                    textposition=[places[p.name] for p in points],
                    marker={"size": 11, "color": colour, "symbol": symbol},
                    cliponaxis=False,  # a name beside its point is never cut at the edge
                    name=name,
                    legendgroup=name,
                    showlegend=column == 1,
                    hovertemplate="%{text}<br>%{x:,.1f} µs, " + label + " %{y:.4f}<extra></extra>",
                ),
                row=1,
                col=column,
            )
        figure.update_yaxes(title_text=label, range=[y_low, y_high], row=1, col=column)
        figure.update_xaxes(
            title_text="median latency per query (µs, log scale)",
            type="log",
            range=[x_low, x_high],
            tickvals=ticks,
            ticktext=[f"{t:,.0f}" if t >= 1 else f"{t:g}" for t in ticks],
            row=1,
            col=column,
        )
    figure.update_layout(
        height=400,
        margin={"l": 60, "r": 60, "t": 50, "b": 60},
        legend={"orientation": "h", "y": -0.25},
    )
    return figure


def comparison_html(result: SystemsComparison) -> str:
    """The HTML report: systems and means († marked) with their costs, the
    effectiveness–efficiency chart, the significance table, GeoRisk, per
    pair the sorted per-query differences, the largest wins and losses, why, blame shift."""

    doc = result.to_dict()
    primary = result.measures[0]
    charts = {f"{a} → {b}": delta_bars(result, (a, b), primary) for a, b in result.pairs()}
    significant = {f"{s}|{m}": v for (s, m), v in marks(result).items()}
    meta = {
        "baseline": result.baseline,
        "systems": [s.name for s in result.systems],
        **result.settings,
    }
    return render_report(
        "comparison.html",
        title=f"Lexlens comparison — {len(result.systems)} systems",
        meta=meta,
        r=doc,
        measures=result.measures,
        significant=significant,
        charts=charts,
        primary=primary,
        width=CHART_WIDTH,
        height=CHART_HEIGHT,
        efficiency_charts=efficiency_charts(result),
        sweep_charts=sweep_charts(result.sweep) if result.sweep is not None else [],
    )
