"""Is a patch group's explanation true? Occlude the group's cells and re-encode the image.

A patch group's top terms (the max pool re-applied over its patches only,
:func:`lexlens.analysis.lexical.terms.terms_of_encoding`) say: these terms come from this
region. The check fills the group's cells of the original image with the encoder's
preprocessing mean (the colour that normalises to 0, the usual occlusion value: Zeiler and
Fergus 2014 occlude with grey; Lexlens uses the mean the encoder subtracts), re-encodes the
whole image, and reads each of the group's top terms in the *whole* image before and after;
against occluding as many cells drawn at random (seeded, the mean over the draws). A
faithful group loses its terms when it is hidden, far more than random cells do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from lexlens.analysis.core.arguments import (
    device_argument,
    encoder_argument,
    encoder_or_spec,
    image_argument,
)
from lexlens.analysis.core.curves import MEASURED_BY, rng_for
from lexlens.analysis.core.grid import FULL_BOX, patch_boxes
from lexlens.analysis.core.results import Result
from lexlens.analysis.faithfulness.options import FaithfulnessOptions
from lexlens.analysis.lexical.patches import IMAGE_NEEDS, parse_box, patch_group
from lexlens.analysis.lexical.terms import terms_of_encoding
from lexlens.analysis.lexical.word_units import term_columns
from lexlens.models.base import Encoder, InputError, LexicalEncoding
from lexlens.models.images import IMAGENET_MEAN, load_image, to_rgb

#: Each image encoder family's preprocessing mean (RGB, 0..1), by the module of its class.
PREPROCESSING_MEANS = {
    "lexlens.models.efficientnet_lite": IMAGENET_MEAN,
    "lexlens.models.vdr": (0.48145466, 0.4578275, 0.40821073),  # CLIP's
}
#: Top terms of the group that are checked.
DEFAULT_TOP = 10


def preprocessing_mean(encoder: Encoder) -> tuple[float, float, float]:
    """The RGB mean (0..1) the encoder subtracts in its preprocessing."""
    module = type(encoder).__module__
    for prefix, mean in PREPROCESSING_MEANS.items():
        if module.startswith(prefix):
            return tuple(float(v) for v in mean)  # type: ignore[return-value]
    raise InputError(f"{encoder.name!r}: its preprocessing mean is not known, cannot occlude")


def occluded(picture: Any, encoding: LexicalEncoding, cells: Sequence[int], fill) -> Any:
    """A copy of the PIL image with the cells (unit indices of ``encoding``'s grid) filled
    with ``fill`` (RGB 0..1), in the original image's pixels."""

    out = to_rgb(picture).copy()
    width, height = out.size
    boxes = patch_boxes(encoding.grid, encoding.crop_box or FULL_BOX)
    colour = tuple(int(round(255 * v)) for v in fill)
    draw = ImageDraw.Draw(out)
    for i in cells:
        x0, y0, x1, y1 = boxes[int(i)]
        left, top = int(np.floor(x0 * width)), int(np.floor(y0 * height))
        right, bottom = int(np.ceil(x1 * width)) - 1, int(np.ceil(y1 * height)) - 1
        draw.rectangle((left, top, right, bottom), fill=colour)
    return out


@dataclass(frozen=True)
class OcclusionFaithfulness(Result):
    """A patch group's top terms in the whole image before and after occluding the group,
    and after occluding as many random cells (the mean over the draws): each weight, the
    mean relative drop, and the share of terms whose weight falls by half or more."""

    file_stem = "occlusion_check"

    cells: list[str]
    fill: list[float]  # the preprocessing mean, RGB 0..1
    terms: list[dict]  # token, group_weight, before, after, random_after
    drop: float | None  # mean (before − after) / before over the terms
    random_drop: float | None
    dropped_share: float | None  # terms whose whole-image weight falls by half or more
    random_dropped_share: float | None
    draws: int
    seed: int
    measured_by: str = MEASURED_BY
    notes: list[str] = field(default_factory=list)


def occlusion_faithfulness(
    encoder: Encoder | str,
    image: Any,
    *,
    cells: list[str] | None = None,
    box: Any = None,
    top: int = DEFAULT_TOP,
    device: str | None = None,
    options: FaithfulnessOptions | None = None,
    **given: Any,
) -> OcclusionFaithfulness:
    """The occlusion check of the patch group ``cells`` (or ``box``, fractions X0,Y0,X1,Y1)
    of ``image`` (a path, bytes or a PIL image): its ``top`` terms. Options:
    :class:`FaithfulnessOptions` (``draws``, ``seed``)."""
    options = FaithfulnessOptions.of(options, **given)
    if isinstance(top, bool) or not isinstance(top, int) or not 1 <= top <= 1000:
        raise InputError(f"top must be an integer from 1 to 1,000, not {top!r}")
    if isinstance(box, str):
        box = parse_box(box)
    if (box is None) == (cells is None):
        raise InputError("give the patch group as a box or as cells (one of them)")
    device_argument(device)
    encoder_or_spec(encoder, needs=IMAGE_NEEDS)
    picture = _picture(image_argument(image, "image"))
    model = encoder_argument(encoder, needs=IMAGE_NEEDS, device=device)
    enc = model.encode_images([picture])[0]
    units = patch_group(enc, box, cells)
    group = terms_of_encoding(model, enc, cells=[enc.units[i] for i in units], top=top)
    return occlusion_of(model, picture, enc, units, group.merged_terms, options)


def _picture(image: Any) -> Any:

    return image if isinstance(image, Image.Image) else load_image(image, name="image")


def occlusion_of(
    model: Encoder,
    picture: Any,
    enc: LexicalEncoding,
    units: Sequence[int],
    rows: list[dict],
    options: FaithfulnessOptions,
) -> OcclusionFaithfulness:
    """The occlusion check of the group ``units`` of ``enc`` (``picture`` encoded by
    ``model``) for its term rows ``rows``."""
    fill = preprocessing_mean(model)
    n_cells = len(enc.units)
    rng = rng_for(options.seed, *enc.units, *sorted(units))
    draws = [
        sorted(rng.choice(n_cells, size=len(units), replace=False).tolist())
        for _ in range(options.draws)
    ]
    pictures = [occluded(picture, enc, units, fill)]
    pictures += [occluded(picture, enc, d, fill) for d in draws]
    after = model.encode_images(pictures, keep_units=False)
    out = []
    for r in rows:
        cols = term_columns(r, model.vocab)
        before = float(np.max(enc.weights[cols]))
        random_after = [float(np.max(a.weights[cols])) for a in after[1:]]
        halved = [a <= 0.5 * before for a in random_after]
        out.append(
            {
                "token": r["token"],
                "group_weight": r["weight"],
                "before": before,
                "after": float(np.max(after[0].weights[cols])),
                "random_after": float(np.mean(random_after)),
                "random_dropped": float(np.mean(halved)),
            }
        )
    kept = [t for t in out if t["before"] > 0]

    def mean(values: list[float]) -> float | None:
        return float(np.mean(values)) if values else None

    return OcclusionFaithfulness(
        cells=[enc.units[i] for i in units],
        fill=list(fill),
        terms=out,
        drop=mean([(t["before"] - t["after"]) / t["before"] for t in kept]),
        random_drop=mean([(t["before"] - t["random_after"]) / t["before"] for t in kept]),
        dropped_share=mean([float(t["after"] <= 0.5 * t["before"]) for t in kept]),
        random_dropped_share=mean([t["random_dropped"] for t in kept]),
        draws=options.draws,
        seed=options.seed,
    )
