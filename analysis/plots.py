"""Figures for term weights: word clouds (wordcloud) and bar charts (plotly)."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from lexlens.analysis.terms import Term


def wordcloud_image(
    terms: list[Term], *, width: int = 640, height: int = 360, highlight: set[str] | None = None
) -> Image.Image:
    """A word cloud whose font size is proportional to each term's weight.

    ``highlight`` terms (e.g. the input's own tokens) are drawn in a dark blue; the
    others (expansion terms) in orange, so bag-of-words and expansion stand apart.
    """
    from wordcloud import WordCloud

    freqs = {t.token: float(t.weight) for t in terms if t.weight > 0}
    if not freqs:
        return _empty_image(width, height)
    highlight = highlight or set()

    def color(word: str, **_: object) -> str:
        return "#1f3b73" if word in highlight else "#d9730d"

    cloud = WordCloud(
        width=width,
        height=height,
        background_color="white",
        prefer_horizontal=0.95,
        relative_scaling=1.0,  # font size ∝ weight, not rank
        color_func=color,
        random_state=0,
    )
    return cloud.generate_from_frequencies(freqs).to_image()


def _empty_image(width: int, height: int) -> Image.Image:
    from PIL import ImageDraw

    img = Image.new("RGB", (width, height), "white")
    ImageDraw.Draw(img).text((10, height // 2), "no positive terms", fill="grey")
    return img


def png_bytes(image: Image.Image) -> bytes:
    """Encode a PIL image as PNG bytes (for downloads and inline HTML)."""
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def terms_bar_chart(terms: list[Term], *, title: str = "", in_input: set[str] | None = None):
    """Horizontal plotly bar chart of term weights, best at the top."""
    import plotly.graph_objects as go

    in_input = in_input or set()
    tokens = [t.token for t in terms][::-1]
    weights = np.array([t.weight for t in terms][::-1])
    colors = ["#1f3b73" if tok in in_input else "#d9730d" for tok in tokens]
    fig = go.Figure(go.Bar(x=weights, y=tokens, orientation="h", marker_color=colors))
    fig.update_layout(
        title=title,
        height=max(240, 22 * len(terms) + 80),
        margin=dict(l=10, r=10, t=40 if title else 10, b=10),
        xaxis_title="weight",
    )
    return fig
