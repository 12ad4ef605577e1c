"""A comparison's reports: the self-contained HTML page (:func:`comparison_html`, through
:func:`~lexlens.analysis.render.html.render_report`) and the LaTeX table
(:func:`latex_table`): one row per system, one column per measure, the mean with † where
the difference from the baseline is significant (the chosen test, corrected p below the
level), the best mean of each column in bold."""

from __future__ import annotations

from typing import Any

from lexlens.analysis.render.html import render_report

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


def comparison_html(result: SystemsComparison) -> str:
    """The HTML report: systems and means († marked), the significance table, GeoRisk, per
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
    )
