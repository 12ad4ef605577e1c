"""Patch groups: pooling, boxes (with crops), heatmaps, contrasts; the side-by-side photo."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from lexlens.analysis.core.grid import patch_boxes
from lexlens.analysis.core.words import top_terms
from lexlens.analysis.lexical.patches import (
    box_to_patches,
    compare_groups,
    parse_box,
    pool_patches,
    term_heatmap,
    token_index,
    units_to_indices,
)
from lexlens.models.base import InputError, LexicalEncoding
from lexlens.models.images import load_image
from tests.helpers import skimage_path

VOCAB = ["[CLS]", "cat", "coffee", "cup", "tree"]


def pool_box(encoding: LexicalEncoding, box) -> np.ndarray:
    """The patches a box selects, pooled (what the Images page shows for a region)."""
    return pool_patches(encoding, box_to_patches(encoding.grid, box, crop_box=encoding.crop_box))


def _encoding(rows: np.ndarray, grid, normalization="none", crop_box=(0.0, 0.0, 1.0, 1.0)):
    r, c = grid
    return LexicalEncoding(
        weights=rows.max(axis=0),
        unit_weights=rows,
        units=[f"r{i}c{j}" for i in range(r) for j in range(c)],
        grid=grid,
        normalization=normalization,
        crop_box=crop_box,
    )


@pytest.fixture
def toy():
    rng = np.random.default_rng(0)
    return _encoding(rng.random((6, len(VOCAB)), dtype=np.float32), (2, 3))


# --- pure functions on a toy encoding -------------------------------------------------------


def test_pool_patches_is_max_over_selected_rows(toy):
    rows = toy.unit_weights
    assert np.array_equal(pool_patches(toy, [1, 4]), np.maximum(rows[1], rows[4]))
    assert np.array_equal(pool_patches(toy, range(6)), toy.weights)
    assert np.array_equal(pool_patches(toy, [2, 2]), rows[2])
    with pytest.raises(InputError, match="at least one"):
        pool_patches(toy, [])
    with pytest.raises(InputError, match="out of range"):
        pool_patches(toy, [6])


def test_l2_normalisation_reapplied():
    rows = np.array([[3.0, 0.0, 0.0, 0.0, 0.0], [0.0, 4.0, 0.0, 0.0, 0.0]], dtype=np.float32)
    enc = _encoding(rows, (1, 2), normalization="l2")
    assert np.allclose(pool_patches(enc, [0, 1]), [0.6, 0.8, 0, 0, 0])
    assert np.allclose(pool_patches(enc, [1]), [0, 1, 0, 0, 0])


def test_box_selects_cells_covered_at_least_half():
    grid = (2, 4)  # cells 0.25 wide, 0.5 high
    assert box_to_patches(grid, (0, 0, 0.5, 1)) == [0, 1, 4, 5]
    assert box_to_patches(grid, (0, 0, 1, 0.5)) == [0, 1, 2, 3]
    assert box_to_patches(grid, (0.1, 0, 0.5, 1)) == [0, 1, 4, 5]  # 60 % of column 0
    assert box_to_patches(grid, (0.15, 0, 0.5, 1)) == [1, 5]  # 40 % of column 0
    assert box_to_patches(grid, (0, 0, 1, 1)) == list(range(8))
    # smaller than half a cell: the cell it overlaps most
    assert box_to_patches(grid, (0.30, 0.60, 0.35, 0.65)) == [5]


def test_box_honours_crop_box():
    """A ViT that saw the centre square of a 2:1 image: boxes are in original fractions."""
    grid, crop = (2, 2), (0.25, 0.0, 0.75, 1.0)
    assert box_to_patches(grid, (0, 0, 0.5, 1), crop_box=crop) == [0, 2]
    assert box_to_patches(grid, (0.5, 0, 1, 0.5), crop_box=crop) == [1]
    assert box_to_patches(grid, (0, 0, 1, 1), crop_box=crop) == [0, 1, 2, 3]
    with pytest.raises(InputError, match="outside the region"):
        box_to_patches(grid, (0, 0, 0.2, 1), crop_box=crop)
    cells = patch_boxes(grid, crop)
    assert cells[0] == pytest.approx((0.25, 0.0, 0.5, 0.5))
    assert cells[3] == pytest.approx((0.5, 0.5, 0.75, 1.0))


def test_pool_box_equals_pool_patches(toy):
    assert np.array_equal(pool_box(toy, (0, 0, 1 / 3, 1)), pool_patches(toy, [0, 3]))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0,0,0.5", "4 comma-separated"),
        ("a,b,c,d", "numbers"),
        ("0,0,2,1", "outside 0..1"),
        ("0.5,0,0.5,1", "empty"),
        ("nan,0,1,1", "finite"),
        ("", "4 comma-separated"),
    ],
)
def test_parse_box_errors(text, message):
    with pytest.raises(InputError, match=message):
        parse_box(text)


def test_parse_box_ok():
    assert parse_box(" 0, 0.25 ,0.5,1 ") == (0.0, 0.25, 0.5, 1.0)


def test_heatmap_and_token_lookup(toy):
    heat = term_heatmap(toy, token_index(VOCAB, "Coffee"))
    assert heat.shape == (2, 3)
    assert np.array_equal(heat.ravel(), toy.unit_weights[:, 2])
    with pytest.raises(InputError, match="not a token"):
        token_index(VOCAB, "giraffe")
    with pytest.raises(InputError, match="out of range"):
        term_heatmap(toy, 99)


def test_compare_groups_lists_what_each_side_lacks():
    rows = np.zeros((4, len(VOCAB)), dtype=np.float32)
    rows[0] = [9, 0.9, 0.0, 0.2, 0.5]  # cat patch ([CLS] junk must be ignored)
    rows[1] = [0, 0.8, 0.1, 0.1, 0.5]
    rows[2] = [0, 0.0, 0.7, 0.6, 0.5]  # coffee patches
    rows[3] = [0, 0.1, 0.9, 0.3, 0.5]
    enc = _encoding(rows, (2, 2))
    result = compare_groups(enc, [0, 1], [2, 3], VOCAB, k=3)
    assert [t.token for t in result.a_not_b] == ["cat"]
    assert [t.token for t in result.b_not_a] == ["coffee", "cup"]
    assert result.b_not_a[0].difference == pytest.approx(0.1 - 0.9)
    assert result.a_not_b[0].weight_a == pytest.approx(0.9)
    assert result.to_dict()["a_not_b"][0]["token"] == "cat"


def test_units_to_indices(toy):
    assert units_to_indices(toy, ["r1c0", "r0c2"]) == [3, 2]
    with pytest.raises(InputError, match="no patch"):
        units_to_indices(toy, ["r5c5"])


def test_encoding_without_rows_is_clear():
    enc = LexicalEncoding(weights=np.ones(3), unit_weights=None, units=[], grid=(1, 1))
    with pytest.raises(InputError, match="keep_units"):
        pool_patches(enc, [0])


# --- the real side-by-side photo ------------------------------------------------------------


@pytest.fixture(scope="session")
def side_by_side(effnet):
    """chelsea.png (left) and coffee.png (right), both 300 px high: a 3:1 image (7×14 grid)."""
    cat = load_image(skimage_path("chelsea.png"))
    coffee = load_image(skimage_path("coffee.png"))
    height = 300
    left = cat.resize((round(cat.width * height / cat.height), height))
    right = coffee.resize((round(coffee.width * height / coffee.height), height))
    canvas = Image.new("RGB", (left.width + right.width, height))
    canvas.paste(left, (0, 0))
    canvas.paste(right, (left.width, 0))
    return effnet.encode_images([canvas])[0]


CAT_TERMS = {"cat", "cats", "domestic", "lynx", "tab", "##by"}
COFFEE_TERMS = {"coffee", "es", "##press", "cup", "mug", "espresso"}


def test_side_by_side_halves(effnet, side_by_side):
    vocab = effnet.vocab
    assert side_by_side.grid == (7, 14)
    left = [t.token for t in top_terms(pool_box(side_by_side, parse_box("0,0,0.5,1")), vocab, k=5)]
    right = [t.token for t in top_terms(pool_box(side_by_side, parse_box("0.5,0,1,1")), vocab, k=5)]
    assert "cat" in left and not set(left) & COFFEE_TERMS, left
    assert {"coffee", "es"} & set(right) and not set(right) & CAT_TERMS, right


def test_side_by_side_heatmap_and_contrast(effnet, side_by_side):
    vocab = effnet.vocab
    heat = term_heatmap(side_by_side, token_index(vocab, "cat"))
    assert heat.shape == (7, 14)
    assert heat[:, :7].mean() > 5 * heat[:, 7:].mean()
    # cells next to the seam see both photos (large receptive field); farther ones do not
    assert heat[:, :7].max() > 0.5 and heat[:, 9:].max() < 0.2
    left = box_to_patches(side_by_side.grid, (0, 0, 0.5, 1))
    right = box_to_patches(side_by_side.grid, (0.5, 0, 1, 1))
    assert sorted(left + right) == list(range(98)) and not set(left) & set(right)
    contrast = compare_groups(side_by_side, left, right, vocab, k=10)
    a_not_b = {t.token for t in contrast.a_not_b}
    b_not_a = {t.token for t in contrast.b_not_a}
    assert a_not_b & CAT_TERMS and not a_not_b & COFFEE_TERMS, a_not_b
    assert b_not_a & COFFEE_TERMS and not b_not_a & CAT_TERMS, b_not_a


def test_pooling_all_patches_gives_the_image_vector(side_by_side):
    everything = pool_patches(side_by_side, range(98))
    assert np.array_equal(everything, side_by_side.weights)
    assert np.array_equal(pool_box(side_by_side, (0, 0, 1, 1)), side_by_side.weights)


# --- pictures (analysis.patch_render) --------------------------------------------------------


def test_grid_drawing_marks_groups_and_the_crop():
    from lexlens.analysis.render.patch_render import GROUP_COLORS, draw_grid

    image = Image.new("RGB", (400, 200), (128, 128, 128))
    crop = (0.25, 0.0, 0.75, 1.0)
    drawn = draw_grid(image, (2, 2), crop, groups=[[0], [3]])
    assert drawn.size == image.size
    outside = drawn.getpixel((20, 100))
    assert max(outside) < 100  # dimmed: the encoder did not see it
    tint_a = np.array(drawn.getpixel((140, 50)), dtype=float)  # inside cell 0
    tint_b = np.array(drawn.getpixel((260, 150)), dtype=float)  # inside cell 3
    plain = np.array(drawn.getpixel((260, 50)), dtype=float)  # cell 1, in no group
    assert np.argmax(tint_a - plain) == int(np.argmax(GROUP_COLORS[0]))  # blue-ish
    assert (tint_b - plain)[0] > 0  # orange adds red


def test_heatmap_overlay_brightest_where_the_value_is_highest():
    from lexlens.analysis.render.patch_render import colorize, heatmap_overlay

    image = Image.new("RGB", (300, 100), (128, 128, 128))
    heat = np.array([[0.0, 0.5, 1.0]])
    out = heatmap_overlay(image, heat)
    lum = [sum(out.getpixel((x, 50))) for x in (50, 150, 250)]
    assert lum[0] < lum[1] < lum[2]
    ramp = colorize(np.array([0.0, 1.0]), 1.0)
    assert ramp[0].sum() < 20 and ramp[1].sum() > 600


def test_a_box_or_cells_on_a_text_is_refused_before_encoding(splade):
    from lexlens.analysis.lexical.terms import terms

    with pytest.raises(InputError, match="images only"):
        terms(splade, text="a cat", box=(0, 0, 1, 1))
    with pytest.raises(InputError, match="images only"):
        terms(splade, text="a cat", cells=["r0c0"])


def test_silent_wrong_a_patch_group_of_an_encoding_without_patch_rows_is_refused(toy):
    """Without per-patch rows a box selects nothing it could pool: terms_of_encoding listed
    the box's cells beside the whole image's terms. The one patch-group selection
    (patch_group, which the comparison of two images uses too) refuses it."""
    from dataclasses import replace

    from lexlens.analysis.lexical.patches import patch_group
    from lexlens.analysis.lexical.terms import terms_of_encoding

    class Vocab:  # what terms_of_encoding reads of its encoder
        name, vocab, known_words, max_length = "toy", VOCAB, frozenset(), 0

    whole = replace(toy, unit_weights=None)
    for call in (
        lambda: terms_of_encoding(Vocab(), whole, box=(0, 0, 0.5, 1)),
        lambda: terms_of_encoding(Vocab(), whole, cells=["r0c0"]),
        lambda: patch_group(whole, None, ["r0c0"]),
    ):
        with pytest.raises(InputError, match="kept no per-patch rows: encode with keep_units"):
            call()
    # With its rows, a box's terms are its cells' pooled rows (computed here by hand).
    result = terms_of_encoding(Vocab(), toy, box=(0, 0, 0.5, 1), top=5)
    cells = box_to_patches(toy.grid, (0, 0, 0.5, 1), crop_box=toy.crop_box)
    pooled = toy.unit_weights[cells].max(axis=0)
    assert result.input["cells"] == [toy.units[i] for i in cells]
    expected = [VOCAB[i] for i in np.argsort(-pooled) if VOCAB[i] != "[CLS]"]
    assert [r["token"] for r in result.terms] == expected


# --- one word, one weight: a merged word weighs by its own pieces ---------------------------

COFFEE_A, COFFEE_B = (0.75, 0.0, 1.0, 0.25), (0.0, 0.0, 0.75, 0.5)


@pytest.fixture(scope="module")
def coffee(effnet):
    """coffee.png encoded by the label-space image encoder (a 7×10 grid)."""
    return effnet.encode_images([load_image(skimage_path("coffee.png"))])[0]


def test_silent_wrong_a_merged_word_never_takes_the_weight_of_a_piece_another_word_shares(
    effnet, coffee
):
    """ "cro" (cr ##o) must not weigh as "##o", the last piece of "espresso": the walk's "B,
    not A" listed cro at espresso's 0.9864 while its own piece cr weighs 0.0099 in B."""
    from lexlens.models.wordpiece import wordpiece_split

    vocab = effnet.vocab
    assert "cro" in effnet.known_words and "espresso" in effnet.known_words
    assert wordpiece_split("cro", set(vocab)) == ["cr", "##o"]
    assert wordpiece_split("espresso", set(vocab))[-1] == "##o"
    group_a = box_to_patches(coffee.grid, COFFEE_A, crop_box=coffee.crop_box)
    group_b = box_to_patches(coffee.grid, COFFEE_B, crop_box=coffee.crop_box)
    pooled_a, pooled_b = pool_patches(coffee, group_a), pool_patches(coffee, group_b)
    cr, o = vocab.index("cr"), vocab.index("##o")
    assert pooled_b[o] > 0.9 > 0.05 > pooled_b[cr]  # espresso's piece is strong in B, cr not

    shown = compare_groups(coffee, group_a, group_b, vocab, k=10, words=effnet.known_words)
    assert "cro" not in [t.token for t in shown.a_not_b + shown.b_not_a]
    every = compare_groups(coffee, group_a, group_b, vocab, k=3000, words=effnet.known_words)
    by_token = {t.token: t for t in every.a_not_b + every.b_not_a}
    # float32 pooled weights compared as floats: exact up to their own rounding
    assert by_token["cro"].weight_a == pytest.approx(float(pooled_a[cr]), rel=1e-6)
    assert by_token["cro"].weight_b == pytest.approx(float(pooled_b[cr]), rel=1e-6)


def test_the_contrast_weighs_each_word_as_the_groups_own_clouds(effnet, coffee):
    """A word listed by the contrast weighs in each group what that group's word cloud gives it
    (terms_of_encoding, the cloud the page shows beside the contrast)."""
    from lexlens.analysis.lexical.terms import terms_of_encoding

    vocab = effnet.vocab
    groups = [
        box_to_patches(coffee.grid, b, crop_box=coffee.crop_box) for b in (COFFEE_A, COFFEE_B)
    ]
    contrast = compare_groups(coffee, *groups, vocab, k=10, words=effnet.known_words)
    listed = contrast.a_not_b + contrast.b_not_a
    compared = 0
    for side, box in enumerate((COFFEE_A, COFFEE_B)):
        cloud = {
            r["token"]: r["weight"]
            for r in terms_of_encoding(effnet, coffee, top=20, box=box).merged_terms
        }
        for t in listed:
            if t.token in cloud:
                compared += 1
                assert (t.weight_a, t.weight_b)[side] == pytest.approx(cloud[t.token], rel=1e-6)
    assert compared >= 10


def test_silent_wrong_a_word_whose_pieces_are_all_shared_peaks_at_its_own_weight():
    """When every piece of a word is shared with other words, the word weighs as its weakest
    piece, and its heatmap (the max over its columns) peaks at that same weight."""
    from lexlens.analysis.core.words import Term, merge_word_pieces
    from lexlens.analysis.lexical.patches import term_heat

    vocab = ["[CLS]", "cr", "##o", "##ock", "es", "##press"]
    words = {"cro", "crock", "espresso"}  # cr: cro + crock; ##o: cro + espresso
    rows = np.zeros((2, len(vocab)), dtype=np.float32)
    rows[0, [1, 2, 3, 4, 5]] = [0.2, 0.9, 0.3, 0.8, 0.7]
    rows[1, [1, 2, 3, 4, 5]] = [0.1, 0.1, 0.1, 0.1, 0.1]
    enc = _encoding(rows, (1, 2))
    pooled = rows.max(axis=0)
    terms = [Term(vocab[i], float(pooled[i]), i) for i in range(1, 6)]
    cro = next(t for t in merge_word_pieces(terms, vocab, words) if t.token == "cro")
    assert cro.weight == pytest.approx(0.2)  # cr, its weakest piece — never ##o's 0.9
    heat = term_heat(enc, vocab, {"token": "cro", "pieces": [vocab[i] for i in cro.columns]})
    assert heat.peak == pytest.approx(cro.weight)
