"""Where patch group A overlaps group B, A's outline stays visible: each cell of A shows
pixels of A's outline colour, shared cells included (counted here on the drawn picture)."""

from __future__ import annotations

import numpy as np
from PIL import Image

from lexlens.analysis.render.patch_render import GROUP_COLORS, draw_grid


def _cell_pixels(picture: np.ndarray, grid: tuple[int, int], cell: int) -> np.ndarray:
    rows, cols = grid
    h, w = picture.shape[:2]
    r, c = divmod(cell, cols)
    return picture[r * h // rows : (r + 1) * h // rows, c * w // cols : (c + 1) * w // cols]


def _count(pixels: np.ndarray, color: tuple[int, int, int]) -> int:
    return int(np.all(pixels == np.array(color, np.uint8), axis=-1).sum())


def test_silent_wrong_overlapping_groups_keep_both_outlines():
    grid = (4, 4)
    a, b = [0, 1, 4, 5], [1, 2, 5, 6]  # cells 1 and 5 in both
    picture = np.asarray(
        draw_grid(Image.new("RGB", (480, 480), (128, 128, 128)), grid, None, [a, b])
    )
    blue, orange = GROUP_COLORS[0], GROUP_COLORS[1]
    for cell in a:
        assert _count(_cell_pixels(picture, grid, cell), blue) > 100, cell
    for cell in b:
        assert _count(_cell_pixels(picture, grid, cell), orange) > 100, cell
    for cell in set(range(16)) - set(a) - set(b):  # no outline inside a cell of no group
        pixels = _cell_pixels(picture, grid, cell)[4:-4, 4:-4]
        assert _count(pixels, blue) == _count(pixels, orange) == 0, cell
