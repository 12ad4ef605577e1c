"""The geometry of an image's patch grid, shared by the patch analysis and its pictures.

A box is ``(x0, y0, x1, y1)`` in fractions (0..1) of the **original** image. An encoder's
grid covers its ``crop_box`` (the region it saw; :data:`FULL_BOX` for the whole image),
split into ``rows × cols`` equal cells in row-major order.
"""

from __future__ import annotations

Box = tuple[float, float, float, float]
FULL_BOX: Box = (0.0, 0.0, 1.0, 1.0)


def patch_boxes(grid: tuple[int, int], crop_box: Box | None = None) -> list[Box]:
    """Each cell's box in fractions of the original image (for drawing the grid)."""
    rows, cols = grid
    cx0, cy0, cx1, cy1 = crop_box or FULL_BOX
    w, h = cx1 - cx0, cy1 - cy0
    return [
        (cx0 + w * c / cols, cy0 + h * r / rows, cx0 + w * (c + 1) / cols, cy0 + h * (r + 1) / rows)
        for r in range(rows)
        for c in range(cols)
    ]
