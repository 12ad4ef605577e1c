"""Figures of one text's attributions (plotly): the heatmap of words × sub-vectors, and one
sub-vector's word scores beside GlobalT and RandT (the Attribution page draws these from
what :mod:`lexlens.analysis.attribution.display` gives it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from lexlens.analysis.render.colours import series_colours


def attribution_heatmap(values: np.ndarray, words: Sequence[str], rows: Sequence[str]):
    """``values [rows, words]`` with words on x and ``rows`` (the sub-vectors with their codes)
    on y, on a symmetric red–blue scale."""
    import plotly.express as px  # heavy: plotly loads on first use

    values = np.asarray(values)
    words = list(words)
    scale = float(np.abs(values).max()) or 1.0
    fig = px.imshow(
        values,
        x=list(range(len(words))),
        y=list(rows),
        color_continuous_scale="RdBu_r",
        zmin=-scale,
        zmax=scale,
        aspect="auto",
        labels={"x": "word", "y": "sub-vector", "color": "attribution"},
    )
    fig.update_xaxes(tickmode="array", tickvals=list(range(len(words))), ticktext=words, side="top")
    fig.update_traces(
        customdata=np.broadcast_to(np.array(words, dtype=object), values.shape),
        hovertemplate="sub-vector %{y}<br>%{customdata}: %{z:.4g}<extra></extra>",
    )
    fig.update_layout(height=max(300, 18 * len(rows) + 120), margin=dict(l=10, r=10, t=60, b=10))
    return fig


def series_bars(words: list[str], series: Mapping[str, np.ndarray]):
    """Grouped bars of word scores, each series scaled to its own largest |value| (the raw
    value on hover): GlobalT's values are about M times a sub-vector's."""
    import plotly.graph_objects as go  # heavy: plotly loads on first use

    def scaled(vals: np.ndarray) -> np.ndarray:
        peak = float(np.abs(vals).max())
        return vals / peak if peak > 0 else vals

    colours = series_colours(list(series))  # one colour per ranking, as in the curves
    bars = go.Figure(
        [
            go.Bar(
                name=name,
                marker_color=colours[name],
                x=list(range(len(words))),
                y=scaled(np.asarray(vals, dtype=float)),
                customdata=np.stack([np.array(words, dtype=object), np.asarray(vals)], axis=1),
                hovertemplate="%{customdata[0]}: %{customdata[1]:.4g}<extra>" + name + "</extra>",
            )
            for name, vals in series.items()
        ]
    )
    bars.update_xaxes(tickmode="array", tickvals=list(range(len(words))), ticktext=words)
    bars.update_layout(
        barmode="group", height=320, margin=dict(l=10, r=10, t=10, b=10), yaxis_title="scaled"
    )
    return bars


def curves_figure(series: Mapping[str, Sequence[float]], y_title: str, x_title: str):
    """A small line chart of curves over k = 0…K (plotly), each ranking in its colour."""
    import plotly.graph_objects as go  # heavy: plotly loads on first use

    colours = series_colours(list(series))
    fig = go.Figure()
    for name, ys in series.items():
        fig.add_trace(
            go.Scatter(
                x=list(range(len(ys))),
                y=list(ys),
                mode="lines+markers",
                name=name,
                line={"color": colours[name]},
                marker={"color": colours[name]},
            )
        )
    fig.update_layout(
        height=260,
        margin=dict(l=10, r=10, t=10, b=10),
        xaxis_title=x_title,
        yaxis_title=y_title,
        legend=dict(orientation="h", y=1.12),
        xaxis=dict(dtick=1),
    )
    return fig
