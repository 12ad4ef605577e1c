"""Word clouds are measurements: font size ∝ weight, words never touch, a useful PNG size."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from lexlens.analysis.core.words import Term
from lexlens.analysis.render.plots import cloud_layout, png_bytes, render_cloud, wordcloud_image


def _terms(weights: dict[str, float]) -> list[Term]:
    return [Term(t, w, i) for i, (t, w) in enumerate(weights.items())]


def _ink_box(image: Image.Image, box: tuple[int, int, int, int], pad: int) -> tuple[int, ...]:
    """Bounding box of the non-white pixels around ``box`` (searched ``pad`` px beyond it)."""
    x0, y0, x1, y1 = box
    crop = np.asarray(image.convert("L").crop((x0 - pad, y0 - pad, x1 + pad, y1 + pad)))
    ys, xs = np.nonzero(crop < 200)
    return (xs.min() + x0 - pad, ys.min() + y0 - pad, xs.max() + x0 - pad, ys.max() + y0 - pad)


def test_font_size_is_scale_times_weight():
    weights = {"domestic": 0.98, "tabby": 0.84, "cat": 0.97, "lynx": 0.5, "feline": 0.31}
    weights |= {f"word{i}": 0.9 - 0.03 * i for i in range(20)}
    layout = cloud_layout(_terms(weights))
    assert not layout.left_out and len(layout.words) == len(weights)
    for word in layout.words:
        assert abs(word.font_size - layout.scale * word.weight) <= 0.5 + 1e-9, word
    sizes = {w.token: w.font_size for w in layout.words}
    # the example: 0.98 and 0.84 must not render ~3x apart
    assert abs(sizes["tabby"] / sizes["domestic"] - 0.84 / 0.98) < 0.01


def test_rendered_ink_heights_follow_the_weights():
    """Same letters (c, a, t) in three words: their rendered ink heights ∝ weight."""
    weights = {"cat": 1.0, "act": 0.7, "tac": 0.4}
    layout = cloud_layout(_terms(weights))
    image = render_cloud(layout)
    heights = {}
    for word in layout.words:
        x0, y0, x1, y1 = _ink_box(image, word.box, pad=2)
        heights[word.token] = y1 - y0 + 1
    for token in ("act", "tac"):
        assert abs(heights[token] / heights["cat"] - weights[token]) < 0.04, heights


def test_words_never_touch():
    weights = {f"w{i:02d}{'x' * (i % 5)}": 1.0 / (1 + 0.1 * i) for i in range(45)}
    layout = cloud_layout(_terms(weights))
    boxes = [w.box for w in layout.words]
    assert len(boxes) + len(layout.left_out) == len(weights)
    gap = layout.margin
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            apart = a[2] + gap <= b[0] or b[2] + gap <= a[0] or a[3] + gap <= b[1]
            apart = apart or b[3] + gap <= a[1]
            assert apart, (a, b)
    # every ink pixel lies in some word's box: nothing spills into a neighbour
    ink = np.asarray(render_cloud(layout).convert("L")) < 200
    covered = np.zeros_like(ink)
    for x0, y0, x1, y1 in boxes:
        covered[max(0, y0 - 1) : y1 + 2, max(0, x0 - 1) : x1 + 2] = True
    assert not (ink & ~covered).any()


def test_png_is_1600_by_900_and_small_terms_are_counted():
    image = wordcloud_image(_terms({"coffee": 1.0, "espresso": 0.99}))
    decoded = Image.open(io.BytesIO(png_bytes(image)))
    assert decoded.size == (1600, 900)
    layout = cloud_layout(_terms({"big": 1.0, "tiny": 0.01, "none": 0.0}))
    assert [w.token for w in layout.words] == ["big"] and layout.left_out == ["tiny"]
    assert cloud_layout([]).words == []
