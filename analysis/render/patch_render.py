"""Pictures of patch analyses (Pillow): the grid over the image, selected groups, heatmaps.

Drawing only; the numbers come from :mod:`lexlens.analysis.lexical.patches`, the grid's
geometry from :mod:`lexlens.analysis.core.grid`. Every picture is in the original image's
coordinates: the grid covers ``crop_box`` (the region the encoder saw), and the area outside
it is dimmed so a centre-cropping encoder's blind margins show.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from PIL import Image, ImageDraw

from lexlens.analysis.core.grid import FULL_BOX, Box, patch_boxes

#: Colours of patch groups A, B, … (RGB).
GROUP_COLORS: tuple[tuple[int, int, int], ...] = ((31, 119, 180), (255, 127, 14), (44, 160, 44))
#: "inferno"-like ramp: low = dark purple, high = pale yellow (stops of a perceptual map).
_RAMP = np.array(
    [[0, 0, 4], [87, 16, 110], [188, 55, 84], [249, 142, 9], [252, 255, 164]], dtype=np.float64
)
MAX_DISPLAY_SIDE = 900


def display_copy(image: Image.Image, max_side: int = MAX_DISPLAY_SIDE) -> Image.Image:
    """An RGB copy no larger than ``max_side`` on its longer side (fast to draw and send)."""
    out = image.convert("RGB")
    scale = max_side / max(out.size)
    if scale < 1:
        out = out.resize((max(1, round(out.width * scale)), max(1, round(out.height * scale))))
    return out


def _pixels(box: Box, size: tuple[int, int]) -> tuple[int, int, int, int]:
    w, h = size
    return (round(box[0] * w), round(box[1] * h), round(box[2] * w), round(box[3] * h))


def _dim_outside(image: Image.Image, crop_box: Box) -> Image.Image:
    if tuple(crop_box) == FULL_BOX:
        return image
    shade = Image.new("RGBA", image.size, (0, 0, 0, 140))
    ImageDraw.Draw(shade).rectangle(_pixels(crop_box, image.size), fill=(0, 0, 0, 0))
    return Image.alpha_composite(image.convert("RGBA"), shade).convert("RGB")


def draw_grid(
    image: Image.Image,
    grid: tuple[int, int],
    crop_box: Box | None = None,
    groups: Sequence[Sequence[int]] = (),
    *,
    labels: bool = False,
) -> Image.Image:
    """The patch grid over ``image``; cells of ``groups[i]`` tinted with ``GROUP_COLORS[i]``.

    A cell in several groups gets each tint in turn, and each group's outline, drawn after
    every fill, sits inside the previous group's: where two groups overlap both outlines
    show. With ``crop_box`` not the whole image, the region outside it is dimmed and the
    seen region outlined.
    """
    crop_box = crop_box or FULL_BOX
    base = _dim_outside(display_copy(image), crop_box).convert("RGBA")
    cells = patch_boxes(grid, crop_box)
    overlay = Image.new("RGBA", base.size, (0, 0, 0, 0))
    draw = ImageDraw.Draw(overlay)
    for g, indices in enumerate(groups):
        color = GROUP_COLORS[g % len(GROUP_COLORS)]
        for i in indices:
            if 0 <= i < len(cells):
                draw.rectangle(_pixels(cells[i], base.size), fill=(*color, 90))
    line = max(1, round(min(base.size) / 300))
    for i, cell in enumerate(cells):
        box = _pixels(cell, base.size)
        draw.rectangle(box, outline=(255, 255, 255, 170), width=line)
        if labels:
            draw.text((box[0] + 2, box[1] + 1), f"{i}", fill=(255, 255, 255, 230))
    for g, indices in enumerate(groups):  # group outlines on top of every fill
        color = GROUP_COLORS[g % len(GROUP_COLORS)]
        inset = g * (line + 1)  # each group's outline inside the one before: both show
        for i in indices:
            if 0 <= i < len(cells):
                x0, y0, x1, y1 = _pixels(cells[i], base.size)
                draw.rectangle(
                    (x0 + inset, y0 + inset, x1 - inset, y1 - inset),
                    outline=(*color, 255),
                    width=line + 1,
                )
    if crop_box != FULL_BOX:
        draw.rectangle(_pixels(crop_box, base.size), outline=(255, 215, 0, 255), width=line + 2)
    return Image.alpha_composite(base, overlay).convert("RGB")


def colorize(values: np.ndarray, vmax: float | None = None) -> np.ndarray:
    """Map values (0..vmax) to RGB uint8 with a dark-to-bright perceptual ramp."""
    top = float(np.max(values)) if vmax is None else float(vmax)
    scaled = np.clip(values / top, 0.0, 1.0) if top > 0 else np.zeros_like(values, dtype=float)
    position = scaled * (len(_RAMP) - 1)
    low = np.floor(position).astype(int).clip(0, len(_RAMP) - 2)
    frac = (position - low)[..., None]
    return (_RAMP[low] * (1 - frac) + _RAMP[low + 1] * frac).round().astype(np.uint8)


def heatmap_overlay(
    image: Image.Image,
    heat: np.ndarray,
    crop_box: Box | None = None,
    *,
    alpha: float = 0.6,
    vmax: float | None = None,
) -> Image.Image:
    """``heat [rows, cols]`` coloured and blended over the region the encoder saw.

    Cells are drawn as blocks (nearest neighbour): a patch's value is one number, and
    smoothing would suggest a precision the grid does not have.
    """
    crop_box = crop_box or FULL_BOX
    base = _dim_outside(display_copy(image), crop_box)
    x0, y0, x1, y1 = _pixels(crop_box, base.size)
    colors = Image.fromarray(colorize(np.asarray(heat, dtype=np.float64), vmax))
    colors = colors.resize((max(1, x1 - x0), max(1, y1 - y0)), Image.Resampling.NEAREST)
    region = base.crop((x0, y0, x1, y1))
    base.paste(Image.blend(region, colors, alpha), (x0, y0))
    return base


def colorbar(width: int = 240, height: int = 14) -> Image.Image:
    """A horizontal legend of :func:`colorize` (left = 0, right = the maximum)."""
    ramp = np.tile(np.linspace(0, 1, width), (height, 1))
    return Image.fromarray(colorize(ramp, 1.0))
