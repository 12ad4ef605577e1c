"""The published VDR image preprocessing: shorter side to the ViT resolution, centre crop.

``VDRImageEncoder`` resizes the shorter side to ``resolution`` (bicubic), centre-crops a
``resolution × resolution`` square, scales to [0, 1] and normalises with the CLIP mean and
standard deviation. The crop is reported so a page can show which region the model saw.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from PIL import Image

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
#: Longest resized side (in multiples of the ViT resolution) made in full before cropping.
MAX_RESIZE_SIDE = 8


def centre_view(image: Image.Image, size: int) -> tuple[Image.Image, tuple[float, ...]]:
    """The published view: shorter side to ``size`` (bicubic), centre ``size × size`` crop.

    Returns the crop and the ``(x0, y0, x1, y1)`` fractions of ``image`` it shows. A very
    elongated image (a 1 × 20,000 strip would resize to 224 × 4.5 M pixels) resamples only
    the crop's source box at the scale of the full resize: the same pixels up to a rare
    ±1 rounding difference.
    """
    from PIL import Image as PILImage  # heavy: PIL loads on first use

    from lexlens.models.images import resize_center_crop, to_rgb  # heavy: loads PIL

    image = to_rgb(image)
    width, height = image.size
    if width <= height:
        new_w, new_h = size, int(size * height / width)
    else:
        new_w, new_h = int(size * width / height), size
    if max(new_w, new_h) <= MAX_RESIZE_SIDE * size:
        return resize_center_crop(image, size)
    left, top = round((new_w - size) / 2), round((new_h - size) / 2)
    sx, sy = width / new_w, height / new_h
    box = (left * sx, top * sy, (left + size) * sx, (top + size) * sy)
    # Horizontal pass, then vertical, as Pillow orders the full resize (bicubic overshoot is
    # clipped to 0..255 between the passes, so the order changes pixels).
    bicubic = PILImage.Resampling.BICUBIC
    rows = image.resize((size, height), bicubic, box=(box[0], 0, box[2], height))
    crop = rows.resize((size, size), bicubic, box=(0, box[1], size, box[3]))
    return crop, (box[0] / width, box[1] / height, box[2] / width, box[3] / height)


def pixels(image: Image.Image, resolution: int) -> tuple[torch.Tensor, tuple[float, ...]]:
    """``[3, resolution, resolution]`` CLIP-normalised pixels and the crop box."""
    from lexlens.models.images import to_tensor  # heavy: loads PIL

    crop, box = centre_view(image, resolution)
    return to_tensor(crop, CLIP_MEAN, CLIP_STD), box
