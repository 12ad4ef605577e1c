"""What an image adds to a comparison: a patch group compared on both sides (each side pools
its own patches under a box, so the two grids may differ in shape; cells when both grids
have the same shape), and one term's heatmap on each side's grid (per-patch ``V``, before
pooling and gating)."""

from __future__ import annotations

import numpy as np

from lexlens.analysis.compare.result import TermComparison
from lexlens.analysis.compare.sides import side_of
from lexlens.analysis.compare.term_comparison import compare_sides
from lexlens.analysis.core.grid import FULL_BOX
from lexlens.analysis.lexical.patches import Box, patch_group, term_heat
from lexlens.models.base import Encoder, InputError, LexicalEncoding, pool_units

#: One side of an image comparison: its encoder, its encoding and its gate k.
ImageSide = tuple[Encoder, LexicalEncoding, int]


def compare_group(
    a: ImageSide, b: ImageSide, box: Box | None, cells: list[str] | None, top: int
) -> dict:
    """The patch group on both sides: the cells each side pooled and their term comparison."""
    (encoder_a, encoding_a, ka), (encoder_b, encoding_b, kb) = a, b
    if cells is not None and tuple(encoding_a.grid) != tuple(encoding_b.grid):
        raise InputError(
            f"A's grid ({encoding_a.grid[0]}×{encoding_a.grid[1]}) and B's "
            f"({encoding_b.grid[0]}×{encoding_b.grid[1]}) differ: cells name different "
            "regions, select the group with a box"
        )
    units_a = patch_group(encoding_a, box, cells)
    units_b = patch_group(encoding_b, box, cells)
    pooled_a = pool_units(encoding_a.unit_weights[units_a], encoding_a.normalization)
    pooled_b = pool_units(encoding_b.unit_weights[units_b], encoding_b.normalization)
    terms = compare_sides(
        side_of(encoder_a, encoding_a, ka, pooled_a),
        side_of(encoder_b, encoding_b, kb, pooled_b),
        top=top,
    )
    return {
        "box": None if box is None else list(box),
        "cells_a": [encoding_a.units[i] for i in units_a],
        "cells_b": [encoding_b.units[i] for i in units_b],
        "terms": terms,
    }


def heatmap_side(encoder: Encoder, encoding: LexicalEncoding, word: str) -> dict:
    """One side's heatmap of ``word``: per-patch weights on its grid, and where they peak."""
    heat = term_heat(encoding, encoder.vocab, word)
    return {
        "term": heat.label,
        "columns": [encoder.vocab[i] for i in heat.columns],
        "grid": list(heat.heat.shape),
        "crop_box": list(encoding.crop_box or FULL_BOX),
        "values": heat.heat.astype(np.float64).tolist(),
        "max": heat.peak,
        "min": heat.low,
        "argmax": heat.peak_cell,
    }


def heatmap(
    a: ImageSide, b: ImageSide, term: str | None, terms: TermComparison, notes: list[str]
) -> dict | None:
    """``term``'s heatmap on both grids (default: the heaviest word both share, else A's or
    B's heaviest); a side whose vocabulary cannot spell it gets ``None`` and a note."""
    word = term
    if word is None:
        pool = terms.merged["shared"] or terms.top_a or terms.top_b
        word = pool[0]["token"] if pool else None
    if word is None:
        return None
    out: dict = {"word": word, "a": None, "b": None}
    for s, (encoder, encoding, _) in (("a", a), ("b", b)):
        try:
            out[s] = heatmap_side(encoder, encoding, word)
        except InputError as exc:
            notes.append(f"heatmap of {word!r} on {s.upper()}: {exc}")
    if out["a"] is None and out["b"] is None:
        raise InputError(f"{word!r} cannot be spelled in either encoder's vocabulary")
    return out
