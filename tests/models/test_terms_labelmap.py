"""The content-word class→vocabulary map, word-piece merging and merged-word heatmaps."""

from __future__ import annotations

import numpy as np
import pytest

from lexlens.analysis.core.words import Term, merge_word_pieces
from lexlens.analysis.lexical.patches import term_columns, term_heatmap
from lexlens.analysis.lexical.terms import terms
from lexlens.analysis.render.plots import cloud_layout
from lexlens.models.base import InputError, LexicalEncoding
from lexlens.models.label_map import (
    ImageNetClass,
    head_nouns,
    is_scientific_name,
    restrict_to_content,
)
from tests.helpers import skimage_path

# Written here, independently of the module's stop list: words that must never top a cloud.
FUNCTION_WORDS = set(
    [
        "a",
        "an",
        "the",
        "is",
        "are",
        "was",
        "be",
        "and",
        "or",
        "but",
        "of",
        "in",
        "on",
        "at",
        "to",
        "for",
        "with",
        "by",
        "from",
        "as",
        "that",
        "this",
        "it",
        "its",
        "means",
        "mean",
        "self",
        "name",
        "names",
        "called",
        "type",
        "types",
        "who",
        "which",
        "what",
        "where",
        "when",
        "can",
    ]
)


@pytest.fixture(scope="module")
def photo_terms(effnet):
    return {
        name: terms(effnet, image=skimage_path(name), top=20)
        for name in ("chelsea.png", "coffee.png", "rocket.jpg")
    }


def _cloud_top(result, n: int = 5) -> list[str]:
    """The ``n`` largest words of the default (merged) cloud, by rendered font size."""
    layout = cloud_layout([Term(r["token"], r["weight"], r["index"]) for r in result.merged_terms])
    return [w.token for w in sorted(layout.words, key=lambda w: -w.font_size)[:n]]


@pytest.mark.parametrize("name", ["chelsea.png", "coffee.png", "rocket.jpg"])
def test_top_ten_are_whole_content_words(photo_terms, name):
    top = [r["token"] for r in photo_terms[name].merged_terms[:10]]
    assert len(top) == 10
    assert not [t for t in top if t.startswith("##")], top
    assert not FUNCTION_WORDS & set(top), top
    # a bare first piece ("es", "fe", "tab") is no word either
    assert all(t.isalpha() and len(t) >= 3 for t in top), top


def test_cloud_top_five_for_cat_and_coffee(photo_terms):
    cat = _cloud_top(photo_terms["chelsea.png"])
    coffee = _cloud_top(photo_terms["coffee.png"])
    assert "cat" in cat and {"tabby", "lynx", "domestic"} & set(cat), cat
    assert {"espresso", "coffee"} <= set(coffee), coffee
    raw = [r["token"] for r in photo_terms["coffee.png"].terms[:5]]
    assert "es" in raw and "espresso" not in raw  # the JSON keeps the raw tokens too


def test_espresso_pieces_share_one_weight(effnet):
    vocab = effnet.vocab
    full = effnet.class_map.full(len(vocab))
    espresso = full[967, [vocab.index(p) for p in ("es", "##press", "##o")]]
    assert espresso.min() == espresso.max() > 0.5
    assert full[967, vocab.index("coffee")] > 0.5
    for word in ("is", "means", "and", "self", "the", "brothers"):
        assert full[:, vocab.index(word)].max() == 0.0, word


def test_scientific_names_are_not_names():
    assert is_scientific_name("Felis catus")
    assert is_scientific_name("Canis lupus familiaris")
    assert is_scientific_name("Hylidae")
    assert is_scientific_name("Porphyrio porphyrio")
    assert not is_scientific_name("Egyptian cat")
    assert not is_scientific_name("Indian cobra", first=True)
    assert not is_scientific_name("tabby cat")


@pytest.mark.parametrize(
    ("description", "expected"),
    [
        ("A small domestic feline with a compact, flexible body.", ["feline"]),
        ("A school bus is a bus built for transporting students.", ["bus"]),
        ("A small serving of concentrated coffee, usually very dark brown.", ["coffee"]),
        ("A small to medium capuchin monkey with a creamy white face.", ["monkey"]),
        ("A dark, stocky waterbird with a rounded body.", ["waterbird"]),
        ("", []),
    ],
)
def test_head_nouns(description, expected):
    assert head_nouns(description) == expected


def test_restrict_to_content_keeps_content_words_only():
    vocab = ["[CLS]", "is", "means", "and", "cat", "cats", "tab", "##by", "brothers", "kitten"]
    vocab += ["es", "##press", "##o", "coffee", "drugs", "##et", "feline"]
    col = {t: i for i, t in enumerate(vocab)}
    classes = [
        ImageNetClass(
            0, "tabby", ("tabby cat",), "A domestic feline with stripes; kitten or adult."
        ),
        ImageNetClass(1, "espresso", ("espresso",), "A small serving of concentrated coffee."),
    ]
    raw = np.zeros((2, len(vocab)), dtype=np.float32)
    for token, weight in {"tab": 2.0, "##by": 1.0, "cat": 1.5, "cats": 0.8, "is": 1.9}.items():
        raw[0, col[token]] = weight
    raw[0, col["brothers"]] = 1.2  # an expansion the description does not confirm
    raw[0, col["kitten"]] = 0.6  # one it does
    raw[0, col["##et"]] = 0.7  # a piece of no own word
    raw[0, col["feline"]] = 0.5  # the description's head noun, encoded with the names
    for token, weight in {"es": 2.4, "##press": 2.1, "##o": 2.3, "means": 0.9}.items():
        raw[1, col[token]] = weight
    raw[1, col["drugs"]] = 0.4
    raw[1, col["coffee"]] = 1.0
    rows = restrict_to_content(raw, vocab, classes, terms_per_class=8)
    kept = [{vocab[i]: round(float(r[i]), 3) for i in np.flatnonzero(r)} for r in rows]
    assert set(kept[0]) == {"tab", "##by", "cat", "cats", "kitten", "feline"}
    assert kept[0]["tab"] == kept[0]["##by"] == 1.0  # pieces of "tabby" share its weight
    assert set(kept[1]) == {"es", "##press", "##o", "coffee"}
    assert kept[1]["es"] == kept[1]["##press"] == kept[1]["##o"] == 1.0


def test_merge_keeps_a_standalone_head_and_splits_shared_pieces(splade):
    vocab = splade.vocab
    raw = [
        Term("cat", 0.99, vocab.index("cat")),
        Term("##amo", 0.82, vocab.index("##amo")),
        Term("##unt", 0.82, vocab.index("##unt")),
    ]
    merged = merge_word_pieces(raw, vocab, {"cat", "catamount"})
    assert [(t.token, t.weight) for t in merged] == [("cat", 0.99), ("catamount", 0.82)]
    assert merged[1].pieces == (vocab.index("##amo"), vocab.index("##unt"))
    # "##er" ends both "blower" and "loudspeaker": it lends weight to neither
    pieces = {"blow": 0.5, "##er": 0.95, "loud": 0.9, "##sp": 0.9, "##eak": 0.9}
    raw = [Term(t, w, vocab.index(t)) for t, w in pieces.items()]
    words = {w.token: w.weight for w in merge_word_pieces(raw, vocab, {"blower", "loudspeaker"})}
    assert words == {"loudspeaker": 0.9, "blower": 0.5}


def test_merged_word_heatmap_is_max_over_its_pieces(splade):
    vocab = splade.vocab
    label, columns = term_columns(vocab, "Espresso")
    assert label == "espresso (es ##press ##o)"
    assert [vocab[c] for c in columns] == ["es", "##press", "##o"]
    assert term_columns(vocab, "cat") == ("cat", [vocab.index("cat")])
    rows = np.zeros((4, len(vocab)), dtype=np.float32)
    rows[:, columns[0]] = [0.1, 0.7, 0.0, 0.2]
    rows[:, columns[1]] = [0.5, 0.2, 0.0, 0.3]
    rows[:, columns[2]] = [0.0, 0.0, 0.4, 0.1]
    encoding = LexicalEncoding(
        weights=rows.max(0), unit_weights=rows, units=["r0c0", "r0c1", "r1c0", "r1c1"], grid=(2, 2)
    )
    heat = term_heatmap(encoding, columns)
    assert np.allclose(heat.ravel(), [0.5, 0.7, 0.4, 0.3])
    with pytest.raises(InputError, match="cannot be spelled"):
        term_columns(vocab, "☃☃")
    with pytest.raises(InputError, match="type a word"):
        term_columns(vocab, "  ")


def test_group_contrast_between_words(splade):
    from lexlens.analysis.lexical.patches import compare_groups

    vocab = splade.vocab
    cols = {t: vocab.index(t) for t in ("es", "##press", "##o", "cup", "cat")}
    rows = np.zeros((2, len(vocab)), dtype=np.float32)
    rows[0, [cols["es"], cols["##press"], cols["##o"]]] = 0.9  # patch 0: espresso
    rows[0, cols["cup"]] = 0.3
    rows[1, cols["cat"]] = 0.8  # patch 1: a cat
    rows[1, cols["cup"]] = 0.5
    encoding = LexicalEncoding(
        weights=rows.max(0), unit_weights=rows, units=["r0c0", "r0c1"], grid=(1, 2)
    )
    raw = compare_groups(encoding, [0], [1], vocab, k=5)
    assert {t.token for t in raw.a_not_b} == {"es", "##press", "##o"}
    words = compare_groups(encoding, [0], [1], vocab, k=5, words={"espresso"})
    assert [(t.token, round(t.difference, 3)) for t in words.a_not_b] == [("espresso", 0.9)]
    assert [(t.token, round(t.difference, 3)) for t in words.b_not_a] == [
        ("cat", -0.8),
        ("cup", -0.2),
    ]
