"""Patch groups of an image encoding: pool any set of patches, boxes, heatmaps, contrasts.

VDR's patch-group max pooling (VDR Fig. 4b): the image vector is the max
over its patches' rows, so the max over a *subset* of rows is what that region alone
would contribute. Everything here works on the per-patch rows an encoding already holds
(``LexicalEncoding.unit_weights``): choosing a new group re-encodes nothing.

Coordinates: a box is ``(x0, y0, x1, y1)`` in fractions (0..1) of the **original** image,
independent of the grid. The grid covers ``encoding.crop_box`` (the region the encoder
saw: the whole image for the fully convolutional default, the centre square for a ViT
with a centre crop), split into ``rows × cols`` equal cells in row-major order
(``units[i] == f"r{row}c{col}"``). A cell belongs to a box when at least half of the cell's
area lies inside the box; a box too small to cover half of any cell selects the cell(s)
it overlaps most, so a non-empty box always selects something it touches.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from numbers import Real

import numpy as np

from lexlens.analysis.core.grid import FULL_BOX, Box
from lexlens.analysis.core.results import Record
from lexlens.analysis.core.vocabulary import special_mask
from lexlens.analysis.core.words import Term, WordReader, merge_word_pieces, top_terms
from lexlens.models.base import Capability, InputError, LexicalEncoding, Needs, pool_units
from lexlens.models.wordpiece import wordpiece_split

#: Share of a cell's area a box must cover for the cell to be selected.
MIN_CELL_COVERAGE = 0.5


#: What this analysis needs of an encoder.
IMAGE_NEEDS = Needs("patch groups of an image", all_of=frozenset({Capability.IMAGE_LEXICAL}))


def _rows(encoding: LexicalEncoding) -> np.ndarray:
    if encoding.grid is None:
        raise InputError("this encoding has no patch grid (it is not an image encoding)")
    if encoding.unit_weights is None:
        raise InputError("this encoding kept no per-patch rows: encode with keep_units=True")
    rows, cols = encoding.grid
    if encoding.unit_weights.shape[0] != rows * cols:
        raise InputError(
            f"encoding has {encoding.unit_weights.shape[0]} patch rows but a {rows}×{cols} grid"
        )
    return encoding.unit_weights


def pool_patches(encoding: LexicalEncoding, indices: Sequence[int]) -> np.ndarray:
    """Max over the selected patches' rows, then the encoding's normalisation → ``[|V|]``."""
    rows = _rows(encoding)
    picked = sorted({int(i) for i in indices})
    if not picked:
        raise InputError("select at least one patch to pool")
    bad = [i for i in picked if not 0 <= i < rows.shape[0]]
    if bad:
        raise InputError(f"patch index {bad[0]} out of range: the grid has {rows.shape[0]} patches")
    return pool_units(rows[picked], encoding.normalization)


def parse_box(text: str) -> Box:
    """``"x0,y0,x1,y1"`` (fractions 0..1 of the image) → a checked tuple."""
    if not isinstance(text, str):
        raise InputError("a box is 'X0,Y0,X1,Y1' in fractions of the image, e.g. 0,0,0.5,1")
    parts = [p.strip() for p in text.replace(";", ",").split(",")]
    if len(parts) != 4 or any(not p for p in parts):
        raise InputError(
            f"bad box {text!r}: expected 4 comma-separated numbers X0,Y0,X1,Y1 (e.g. 0,0,0.5,1)"
        )
    try:
        values = tuple(float(p) for p in parts)
    except ValueError:
        raise InputError(f"bad box {text!r}: X0,Y0,X1,Y1 must be numbers between 0 and 1") from None
    return check_box(values)  # type: ignore[arg-type]


def check_box(box: Sequence[float]) -> Box:
    """Validate a box: 4 finite fractions in 0..1 with ``x0 < x1`` and ``y0 < y1``."""
    if isinstance(box, (str, bytes)) or not isinstance(box, Sequence) or len(box) != 4:
        raise InputError("a box has 4 values: X0,Y0,X1,Y1")
    if any(isinstance(v, bool) or not isinstance(v, Real) for v in box):
        raise InputError("box values must be finite numbers between 0 and 1")
    x0, y0, x1, y1 = (float(v) for v in box)
    if not all(math.isfinite(v) for v in (x0, y0, x1, y1)):
        raise InputError("box values must be finite numbers between 0 and 1")
    if not all(0.0 <= v <= 1.0 for v in (x0, y0, x1, y1)):
        raise InputError(
            f"box {x0:g},{y0:g},{x1:g},{y1:g} is outside 0..1: use fractions of the image"
        )
    if not (x0 < x1 and y0 < y1):
        raise InputError(f"box {x0:g},{y0:g},{x1:g},{y1:g} is empty: need X0 < X1 and Y0 < Y1")
    return (x0, y0, x1, y1)


def to_crop(box: Box, crop_box: Box | None) -> Box | None:
    """Map a box in original-image fractions into fractions of the crop the encoder saw.

    Returns ``None`` when the box does not overlap the crop at all.
    """
    cx0, cy0, cx1, cy1 = crop_box or FULL_BOX
    w, h = cx1 - cx0, cy1 - cy0
    x0, y0, x1, y1 = box
    mapped = (
        min(max((x0 - cx0) / w, 0.0), 1.0),
        min(max((y0 - cy0) / h, 0.0), 1.0),
        min(max((x1 - cx0) / w, 0.0), 1.0),
        min(max((y1 - cy0) / h, 0.0), 1.0),
    )
    if mapped[0] >= mapped[2] or mapped[1] >= mapped[3]:
        return None
    return mapped


def cell_coverage(grid: tuple[int, int], box: Box) -> np.ndarray:
    """``[rows, cols]``: the share of each cell's area inside ``box`` (grid fractions)."""
    rows, cols = grid
    x0, y0, x1, y1 = box
    xs = np.arange(cols + 1) / cols
    ys = np.arange(rows + 1) / rows
    overlap_x = np.clip(np.minimum(xs[1:], x1) - np.maximum(xs[:-1], x0), 0, None) * cols
    overlap_y = np.clip(np.minimum(ys[1:], y1) - np.maximum(ys[:-1], y0), 0, None) * rows
    return np.outer(overlap_y, overlap_x)


def box_to_patches(grid: tuple[int, int], box: Box, *, crop_box: Box | None = None) -> list[int]:
    """Row-major indices of the cells a box selects (see the module docstring).

    ``box`` is in fractions of the original image; ``crop_box`` is the region the grid
    covers (``encoding.crop_box``; ``None`` = the whole image).
    """
    rows, cols = grid
    if rows <= 0 or cols <= 0:
        raise InputError(f"bad patch grid {grid}")
    box = check_box(box)
    inside = to_crop(box, crop_box)
    if inside is None:
        raise InputError(
            "the box lies outside the region the encoder saw "
            f"({_fmt(crop_box or FULL_BOX)} of the image): no patch to select"
        )
    coverage = cell_coverage(grid, inside)
    picked = np.flatnonzero(coverage.ravel() >= MIN_CELL_COVERAGE - 1e-9)
    if picked.size == 0:
        best = coverage.max()
        picked = np.flatnonzero(coverage.ravel() >= best - 1e-9)
    return [int(i) for i in picked]


def cell_labels(grid: Sequence[int]) -> list[str]:
    """The label of every cell of a ``(rows, cols)`` grid, row-major: ``r{row}c{col}``."""
    rows, cols = grid
    return [f"r{r}c{c}" for r in range(rows) for c in range(cols)]


def cell_indices(grid: Sequence[int], labels: Sequence[str]) -> list[int]:
    """Cell labels (``"r0c3"``) of a ``(rows, cols)`` grid → their row-major indices."""
    return _positions({u: i for i, u in enumerate(cell_labels(grid))}, labels, tuple(grid))


def units_to_indices(encoding: LexicalEncoding, labels: Sequence[str]) -> list[int]:
    """Patch labels (``"r0c3"``) → row indices, with a clear error for an unknown label."""
    return _positions({u: i for i, u in enumerate(encoding.units)}, labels, encoding.grid)


def patch_group(
    encoding: LexicalEncoding, box: Box | None, cells: Sequence[str] | None
) -> list[int] | None:
    """The patches a box (fractions of the original image, mapped onto this encoding's grid)
    or named cells select, ``None`` when neither is given: the one selection of a patch
    group. A box or cells apply to an image encoding that kept its per-patch rows; give one,
    not both."""
    if box is None and cells is None:
        return None
    if encoding.grid is None:
        raise InputError("a box or cells apply to images only")
    if box is not None and cells is not None:
        raise InputError("give a box or cells, not both")
    if encoding.unit_weights is None:
        raise InputError("this encoding kept no per-patch rows: encode with keep_units=True")
    if box is not None:
        return box_to_patches(encoding.grid, box, crop_box=encoding.crop_box)
    return units_to_indices(encoding, cells)


def _positions(position: dict[str, int], labels: Sequence[str], grid) -> list[int]:
    out = []
    for label in labels:
        if label not in position:
            raise InputError(f"no patch {label!r} in this {_grid_text(grid)} grid")
        out.append(position[label])
    return out


def token_index(vocab: Sequence[str], token: str) -> int:
    """Vocabulary index of ``token`` (exact, then lower-cased), or a clear error."""
    text = token.strip()
    for candidate in (text, text.lower()):
        try:
            return list(vocab).index(candidate)
        except ValueError:
            continue
    raise InputError(f"{token!r} is not a token of this encoder's vocabulary")


def term_columns(vocab: Sequence[str], text: str) -> tuple[str, list[int]]:
    """The vocabulary columns a typed term stands for, and how it reads.

    A vocabulary token (exact, then lower-cased) is one column; any other word is spelled
    in word pieces ("espresso" → ``es ##press ##o``) and stands for all of them, so its
    heatmap is the max over its pieces' rows. Raises :class:`InputError` when the text is
    empty or cannot be spelled in this vocabulary.
    """
    word = text.strip()
    if not word:
        raise InputError("type a word to see its heatmap")
    try:
        found = token_index(vocab, word)
        return vocab[found], [found]
    except InputError:
        pass
    index = {t: i for i, t in enumerate(vocab)}
    pieces = wordpiece_split(word.lower(), index) if " " not in word else None
    if not pieces:
        raise InputError(f"{word!r} cannot be spelled in this encoder's vocabulary")
    return f"{word.lower()} ({' '.join(pieces)})", [index[p] for p in pieces]


def term_heatmap(encoding: LexicalEncoding, token: int | Sequence[int]) -> np.ndarray:
    """``[rows, cols]``: how strongly each patch activates a vocabulary entry.

    With several entries (the pieces of a merged word), the max over their columns.
    """
    rows = _rows(encoding)
    columns = [int(token)] if isinstance(token, (int, np.integer)) else [int(t) for t in token]
    if not columns:
        raise InputError("no vocabulary entry given for the heatmap")
    bad = [c for c in columns if not 0 <= c < rows.shape[1]]
    if bad:
        raise InputError(f"token index {bad[0]} out of range (vocabulary has {rows.shape[1]})")
    r, c = encoding.grid  # type: ignore[misc]
    return rows[:, columns].max(axis=1).reshape(r, c).astype(np.float32, copy=True)


def cell_name(encoding: LexicalEncoding, flat: int) -> str:
    """The label of patch ``flat`` (row-major): ``r{row}c{col}``."""
    return cell_labels(encoding.grid)[int(flat)]  # type: ignore[arg-type]


@dataclass(frozen=True)
class TermHeat(Record):
    """One term's heatmap over the patch grid: how strongly each patch activates it.

    ``label`` reads as the term is shown ("espresso (es ##press ##o)" for a word spelled in
    pieces, whose heatmap is the max over its pieces' rows); ``peak_cell`` names the
    strongest patch.
    """

    label: str
    columns: list[int]
    heat: np.ndarray  # [rows, cols]
    peak: float
    peak_cell: str
    low: float


def term_heat(encoding: LexicalEncoding, vocab: Sequence[str], term: str | Mapping) -> TermHeat:
    """The heatmap of a typed word, or of a term row of a result (its ``pieces`` or ``index``)."""
    if isinstance(term, str):
        label, columns = term_columns(vocab, term)
    else:
        pieces = term.get("pieces")
        label = f"{term['token']} ({' '.join(pieces)})" if pieces else str(term["token"])
        index = {t: i for i, t in enumerate(vocab)}
        columns = [index[p] for p in pieces] if pieces else [int(term["index"])]
    heat = term_heatmap(encoding, columns)
    peak = int(heat.argmax())
    return TermHeat(
        label, columns, heat, float(heat.max()), cell_name(encoding, peak), float(heat.min())
    )


@dataclass(frozen=True)
class ContrastTerm(Record):
    """A term's pooled weight in two patch groups and their difference (a − b); ``piece``
    when it is no whole word the encoder expresses (``##n``; ``piece_of``: its word, when
    one is)."""

    token: str
    index: int
    weight_a: float
    weight_b: float
    difference: float
    piece: bool = False
    piece_of: str | None = None


@dataclass(frozen=True)
class GroupComparison(Record):
    """What one patch group has and the other lacks."""

    a_not_b: list[ContrastTerm]  # largest positive differences, best first
    b_not_a: list[ContrastTerm]  # largest negative differences, best first


def compare_groups(
    encoding: LexicalEncoding,
    group_a: Sequence[int],
    group_b: Sequence[int],
    vocab: Sequence[str],
    k: int = 10,
    *,
    words: set[str] | frozenset[str] | None = None,
) -> GroupComparison:
    """Terms group A has and group B lacks (largest ``pool(A) − pool(B)``), and vice versa.

    Special tokens are left out; only strictly positive differences are listed. With
    ``words`` (evidence for merging word pieces, as in
    :func:`~lexlens.analysis.core.words.top_terms`), the contrast is between *words*: see
    :func:`_word_contrast`.
    """
    a = pool_patches(encoding, group_a)
    b = pool_patches(encoding, group_b)
    if a.shape[0] != len(vocab):
        raise InputError(f"the encoding has {a.shape[0]} dims but the vocabulary {len(vocab)}")
    n = max(int(k), 0)
    if words is not None:
        ranked = sorted(
            _word_contrast(a, b, list(vocab), set(words), n), key=lambda t: -t.difference
        )
        return GroupComparison(
            a_not_b=[t for t in ranked if t.difference > 0][:n],
            b_not_a=[t for t in reversed(ranked) if t.difference < 0][:n],
        )
    diff = (a - b).astype(np.float64)
    diff[special_mask(list(vocab))] = 0.0

    def side(sign: float) -> list[ContrastTerm]:
        scores = sign * diff
        m = min(n, scores.shape[0])
        if m == 0:
            return []
        idx = np.argpartition(-scores, m - 1)[:m]
        idx = idx[np.argsort(-scores[idx], kind="stable")]
        return [
            ContrastTerm(vocab[i], int(i), float(a[i]), float(b[i]), float(diff[i]))
            for i in idx
            if scores[i] > 0
        ]

    return GroupComparison(a_not_b=side(1.0), b_not_a=side(-1.0))


def _word_contrast(
    a: np.ndarray, b: np.ndarray, vocab: list[str], words: set[str], n: int
) -> list[ContrastTerm]:
    """Every word or token of either group's strongest terms, weighed in each group by the
    one merging rule of the clouds (:func:`merge_word_pieces`), read on the same tokens in
    both groups: the strongest tokens of either, so a word is merged, and weighs by its own
    pieces, alike in both ("cro" never takes the weight of "##o", a piece "espresso"
    shares)."""
    pool = max(4 * n, 40)
    want = max(4 * pool, pool + 64)  # the candidates top_terms merges its top ``pool`` from
    tokens = sorted({t.index for pooled in (a, b) for t in top_terms(pooled, vocab, want)})
    merged = [
        {
            t.token: t
            for t in merge_word_pieces(
                [Term(vocab[i], float(g[i]), i) for i in tokens], vocab, words
            )
        }
        for g in (a, b)
    ]
    reader = WordReader(words, vocab)
    out = []
    for token in dict.fromkeys([*merged[0], *merged[1]]):
        either = merged[0].get(token) or merged[1][token]
        weight_a, weight_b = (
            m[token].weight if token in m else float(g[either.index])
            for m, g in zip(merged, (a, b), strict=True)
        )
        reading = reader.read(token)
        out.append(
            ContrastTerm(
                token,
                either.index,
                weight_a,
                weight_b,
                weight_a - weight_b,
                reading.piece,
                reading.of,
            )
        )
    return out


def _fmt(box: Box) -> str:
    return ",".join(f"{v:.3g}" for v in box)


def _grid_text(grid: tuple[int, int] | None) -> str:
    return f"{grid[0]}×{grid[1]}" if grid else "(no grid)"
