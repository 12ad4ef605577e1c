"""Figures for term weights: proportional word clouds (Pillow) and bar charts (plotly).

A word cloud here is a measurement: **font size = scale × weight**, the same scale for
every word of a cloud, so 0.98 and 0.84 render 0.98 : 0.84 apart (within a pixel of
rounding). The ``wordcloud`` package cannot promise that: it shrinks any word that does
not fit, and every later word with it. So the layout is done here: words are placed
largest first, each at the free spot nearest the centre, with a margin around every word
so neighbours never touch; when a word finds no room, the *whole* cloud is scaled down and
laid out again. Words that would come out smaller than :data:`MIN_FONT_FRACTION` of the
height are left out (and counted), rather than drawn unreadably small.

Clouds are rendered at 1600×900 by default (the PNG download); pages show them smaller.
The font is the scalable one that ships with Pillow, so nothing depends on system fonts.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from lexlens.analysis.core.words import Term

CLOUD_WIDTH, CLOUD_HEIGHT = 1600, 900
#: Colour of highlighted terms (the input's own tokens) and of the others.
HIGHLIGHT_COLOR, OTHER_COLOR = "#1f3b73", "#d9730d"
#: Smallest font drawn, as a share of the height (30 px at 900: still legible when the
#: cloud is shown 400 px wide).
MIN_FONT_FRACTION = 1 / 30
#: Empty space kept around every word, as a share of the height (10 px at 900).
MARGIN_FRACTION = 1 / 90
#: Largest font, as a share of the height, before the cloud is scaled down to fit.
MAX_FONT_FRACTION = 0.4
#: Occupancy is tracked on cells of this many pixels (placement speed).
CELL = 4
MAX_WORDS = 80


@dataclass(frozen=True)
class PlacedWord:
    """One word of a cloud: its weight, font size (px) and ink box ``(x0, y0, x1, y1)``."""

    token: str
    weight: float
    font_size: int
    box: tuple[int, int, int, int]


@dataclass(frozen=True)
class CloudLayout:
    """Where every word of a cloud goes; ``scale`` = font size per unit of weight."""

    width: int
    height: int
    margin: int
    scale: float
    words: list[PlacedWord]
    left_out: list[str]  # terms too small to draw legibly at this scale


@lru_cache(maxsize=256)
def _font(size: int) -> ImageFont.FreeTypeFont:
    return ImageFont.load_default(size=size)


def _ink_size(token: str, size: int) -> tuple[int, int, int, int]:
    """The ink box of ``token`` at ``size`` relative to its drawing origin (anchor "lt")."""
    return _font(size).getbbox(token, anchor="lt")


def _place_all(
    words: list[tuple[str, float]], scale: float, width: int, height: int, margin: int
) -> tuple[list[PlacedWord], list[str]] | None:
    """Lay out ``words`` at ``scale``; ``None`` when one of them finds no room."""
    rows, cols = -(-height // CELL), -(-width // CELL)
    occupied = np.zeros((rows, cols), dtype=np.int32)
    min_font = max(8, round(height * MIN_FONT_FRACTION))
    placed: list[PlacedWord] = []
    left_out: list[str] = []
    yy, xx = np.mgrid[0:rows, 0:cols]
    for token, weight in words:
        size = round(scale * weight)
        if size < min_font:
            left_out.append(token)
            continue
        x0, y0, x1, y1 = _ink_size(token, size)
        w_cells = -(-(x1 - x0 + 2 * margin) // CELL)
        h_cells = -(-(y1 - y0 + 2 * margin) // CELL)
        if w_cells > cols or h_cells > rows:
            return None
        # free[r, c]: the word's cells starting at (r, c) are all empty (integral image)
        integral = np.pad(occupied.cumsum(0).cumsum(1), ((1, 0), (1, 0)))
        window = (
            integral[h_cells:, w_cells:]
            - integral[:-h_cells, w_cells:]
            - integral[h_cells:, :-w_cells]
            + integral[:-h_cells, :-w_cells]
        )
        free = window == 0
        if not free.any():
            return None
        n_r, n_c = free.shape
        centre_r = (yy[:n_r, :n_c] + h_cells / 2) / rows - 0.5
        centre_c = (xx[:n_r, :n_c] + w_cells / 2) / cols - 0.5
        distance = np.where(free, centre_r**2 + centre_c**2, np.inf)
        r, c = np.unravel_index(int(np.argmin(distance)), distance.shape)
        occupied[r : r + h_cells, c : c + w_cells] = 1
        left, top = c * CELL + margin, r * CELL + margin
        placed.append(PlacedWord(token, weight, size, (left, top, left + x1 - x0, top + y1 - y0)))
    return placed, left_out


def cloud_layout(
    terms: list[Term], *, width: int = CLOUD_WIDTH, height: int = CLOUD_HEIGHT
) -> CloudLayout:
    """A proportional layout of the positive ``terms`` (font size = scale × weight)."""
    seen: dict[str, float] = {}
    for term in terms:
        if term.weight > 0 and np.isfinite(term.weight) and term.token not in seen:
            seen[term.token] = float(term.weight)
    words = sorted(seen.items(), key=lambda kv: -kv[1])[:MAX_WORDS]
    margin = max(2, round(height * MARGIN_FRACTION))
    if not words:
        return CloudLayout(width, height, margin, 0.0, [], [])
    top_token, top_weight = words[0]
    # Start from a size where the largest word spans at most 90 % of the width.
    probe = 100
    probe_width = max(1, _ink_size(top_token, probe)[2] - _ink_size(top_token, probe)[0])
    largest = min(height * MAX_FONT_FRACTION, probe * 0.9 * width / probe_width)
    scale = largest / top_weight
    for _ in range(60):
        result = _place_all(words, scale, width, height, margin)
        if result is not None:
            placed, left_out = result
            return CloudLayout(width, height, margin, scale, placed, left_out)
        scale *= 0.92
    return CloudLayout(width, height, margin, scale, [], [t for t, _ in words])


def render_cloud(layout: CloudLayout, *, highlight: set[str] | None = None) -> Image.Image:
    """Draw a layout: ``highlight`` terms in dark blue, the others in orange."""
    image = Image.new("RGB", (layout.width, layout.height), "white")
    draw = ImageDraw.Draw(image)
    if not layout.words:
        draw.text(
            (layout.width // 20, layout.height // 2),
            "no positive terms",
            fill="grey",
            font=_font(max(12, layout.height // 20)),
        )
        return image
    highlight = highlight or set()
    for word in layout.words:
        x0, y0, _, _ = _ink_size(word.token, word.font_size)
        color = HIGHLIGHT_COLOR if word.token in highlight else OTHER_COLOR
        draw.text(
            (word.box[0] - x0, word.box[1] - y0),
            word.token,
            font=_font(word.font_size),
            fill=color,
            anchor="lt",
        )
    return image


def wordcloud_image(
    terms: list[Term],
    *,
    width: int = CLOUD_WIDTH,
    height: int = CLOUD_HEIGHT,
    highlight: set[str] | None = None,
) -> Image.Image:
    """A word cloud whose font size is proportional to each term's weight.

    ``highlight`` terms (e.g. the input's own tokens) are drawn in dark blue; the others
    (expansion terms) in orange, so bag-of-words and expansion stand apart.
    """
    return render_cloud(cloud_layout(terms, width=width, height=height), highlight=highlight)


def cloud_caption(layout: CloudLayout, what: str = "Word cloud") -> str:
    """``"Word cloud: font size ∝ weight"``, saying how many small terms were left out."""
    caption = f"{what}: font size ∝ weight"
    if layout.left_out:
        n = len(layout.left_out)
        caption += f" ({n} smaller term{'s' if n != 1 else ''} too small to draw)"
    return caption


def png_bytes(image: Image.Image) -> bytes:
    """Encode a PIL image as PNG bytes (for downloads and inline HTML)."""
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def terms_bar_chart(terms: list[Term], *, title: str = "", in_input: set[str] | None = None):
    """Horizontal plotly bar chart of term weights, best at the top."""
    import plotly.graph_objects as go  # heavy: plotly loads on first use

    in_input = in_input or set()
    tokens = [t.token for t in terms][::-1]
    weights = np.array([t.weight for t in terms][::-1])
    colors = [HIGHLIGHT_COLOR if tok in in_input else OTHER_COLOR for tok in tokens]
    fig = go.Figure(go.Bar(x=weights, y=tokens, orientation="h", marker_color=colors))
    fig.update_layout(
        title=title,
        height=max(240, 22 * len(terms) + 80),
        margin=dict(l=10, r=10, t=40 if title else 10, b=10),
        xaxis_title="weight",
    )
    return fig
