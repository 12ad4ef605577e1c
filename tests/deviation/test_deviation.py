"""Exact@k, Semantic@k and FLOPs against hand-computed and brute-force references."""

from __future__ import annotations

from itertools import product

import numpy as np
import pytest
import scipy.sparse as sp

from lexlens.analysis.deviation.flops import flops, flops_between, flops_with_self_pairs
from lexlens.analysis.deviation.options import DeviationOptions
from lexlens.analysis.deviation.scoring import Scorer as _Scorer
from lexlens.analysis.deviation.scoring import caption_terms
from lexlens.analysis.deviation.sets import SetAccumulator
from lexlens.analysis.deviation.static_embeddings import StaticEmbeddings
from lexlens.models import InputError
from tests.deviation.helpers import item_deviation
from tests.helpers import close_to

VOCAB = ["[CLS]", "cat", "dog", "book", "car", "[unused0]", "sun", "sky"]


def _semantic(*cosines: float, over: int):
    """Semantic@k ``Σ cosines / over`` as float32 may compute it: each cosine of these unit
    vectors here is a single product, so the terms are the cosines themselves, ÷ over."""
    terms = np.array(cosines) / over
    return close_to(float(terms.sum()), terms=terms)


def _static() -> StaticEmbeddings:
    # cat·dog = 0.8, book·car = 0.8, sun and sky orthogonal to everything; specials random.
    table = np.array(
        [
            [1, 1, 1, 1],  # [CLS]
            [0, 1, 0, 0],  # cat
            [0, 0.8, 0.6, 0],  # dog
            [0, 0, 0, 1],  # book
            [0.6, 0, 0, 0.8],  # car
            [1, 1, 1, 1],  # [unused0]
            [1, 0, 0, 0],  # sun
            [0, 0, 1, 0],  # sky
        ],
        dtype=np.float32,
    )
    return StaticEmbeddings.from_table(table, VOCAB)


def test_exact_and_semantic_by_hand():
    # Specials are excluded even with the highest weights.
    weights = np.array([9.0, 3.0, 2.0, 0.5, 1.0, 8.0, 0, 0], dtype=np.float32)
    dev = item_deviation(weights, VOCAB, ["cat", "book"], _static(), k=3)
    # top-3 of the non-special terms: cat (3), dog (2), car (1)
    assert dev.top_terms == ["cat", "dog", "car"]
    assert dev.positive_terms == 4 and dev.cap == 1.0 and dev.matches == 1
    assert dev.exact_at_k == pytest.approx(1 / 3)
    # cat→cat 1.0, dog→cat 0.8, car→book 0.8
    assert dev.semantic_at_k == _semantic(1.0, 0.8, 0.8, over=3)


def test_both_denominators_with_fewer_positive_terms_than_k():
    # Two positive terms (cat 1.0, sun 0.5), k = 4, caption "cat sky".
    weights = np.array([0, 1.0, 0, 0, 0, 0, 0.5, 0], dtype=np.float32)
    static = _static()
    paper = item_deviation(weights, VOCAB, ["cat", "sky"], static, k=4)
    # Denominator k: one match of 4 → 0.25; cap = 2/4. Semantic: cat→cat 1, sun→(0 with both) 0.
    assert paper.positive_terms == 2 and paper.cap == pytest.approx(0.5)
    assert paper.denominator == 4
    assert paper.exact_at_k == pytest.approx(1 / 4)
    assert paper.semantic_at_k == _semantic(1.0, 0.0, over=4)
    active = item_deviation(weights, VOCAB, ["cat", "sky"], static, k=4, denominator="active")
    # Denominator min(k, active) = 2: 1/2 and (1 + 0)/2.
    assert active.denominator == 2 and active.cap == pytest.approx(0.5)
    assert active.exact_at_k == pytest.approx(1 / 2)
    assert active.semantic_at_k == _semantic(1.0, 0.0, over=2)
    # When every term matches, the paper's denominator caps Exact@k at positive/k.
    both = np.array([0, 1.0, 0.5, 0, 0, 0, 0, 0], dtype=np.float32)
    capped = item_deviation(both, VOCAB, ["cat", "dog"], static, k=4)
    assert capped.exact_at_k == pytest.approx(capped.cap) == pytest.approx(0.5)
    full = item_deviation(both, VOCAB, ["cat", "dog"], static, k=4, denominator="active")
    assert full.exact_at_k == pytest.approx(1.0)


def test_no_positive_term_gives_zero_under_both_denominators():
    zeros = np.zeros(len(VOCAB), dtype=np.float32)
    for den in ("k", "active"):
        dev = item_deviation(zeros, VOCAB, ["cat"], _static(), k=3, denominator=den)
        assert (
            dev.exact_at_k == 0 and dev.semantic_at_k == 0 and dev.cap == 0 and dev.top_terms == []
        )


def test_set_means_and_cap_by_hand():
    # Three captions, k = 2; caption tokens and gated vectors chosen to give known values.
    rows = np.array(
        [
            [0, 2.0, 1.0, 0, 0, 0, 0, 0],  # cat dog → caption "cat": 1 match, 2 positive
            [0, 0, 0, 0, 0, 0, 3.0, 0],  # sun alone → caption "sun": 1 match, 1 positive
            [0, 0, 0, 1.0, 0.5, 0, 0.2, 0],  # book car sun → caption "sky": 0, 3 positive
        ],
        dtype=np.float32,
    )
    scorer = _Scorer.build(VOCAB, _static(), 2, "k")
    acc = SetAccumulator("captions", scorer)
    acc.add(
        ["a", "b", "c"], ["cat", "sun", "sky"], sp.csr_matrix(rows), [["cat"], ["sun"], ["sky"]]
    )
    out = acc.result()
    # denominator k = 2: exact 1/2, 1/2, 0 → mean 1/3
    assert out.by_denominator["k"]["exact_at_k"] == pytest.approx(1 / 3)
    # denominator min(2, positive) = 2, 1, 2: 1/2, 1/1, 0 → mean 1/2
    assert out.by_denominator["active"]["exact_at_k"] == pytest.approx(1 / 2)
    # semantic (k): cat→cat 1 + dog→cat 0.8 = 1.8/2; sun→sun 1/2; book→sky 0 + car→sky 0 = 0
    # the set's mean: item by item cosines ÷ its denominator, ÷ 3 items
    k_means = _semantic(1.0 / 2, 0.8 / 2, 1.0 / 2, 0.0, over=3)
    assert out.by_denominator["k"]["semantic_at_k"] == k_means
    active_means = _semantic(1.0 / 2, 0.8 / 2, 1.0 / 1, 0.0, over=3)
    assert out.by_denominator["active"]["semantic_at_k"] == active_means
    assert out.positive_terms["below_k"] == 1  # only "sun" has fewer than 2
    assert out.positive_terms["cap_exact_at_k"] == pytest.approx((1 + 0.5 + 1) / 3)
    assert out.exact == out.by_denominator["k"]["exact_at_k"]


def test_token_less_caption_is_skipped_and_counted():
    scorer = _Scorer.build(VOCAB, _static(), 2, "k")
    acc = SetAccumulator("captions", scorer)
    rows = sp.csr_matrix(np.eye(2, len(VOCAB), 1, dtype=np.float32))
    acc.add(["a", "b"], ["cat", "😀"], rows, [["cat"], caption_terms(["[CLS]", "[UNK]", "[SEP]"])])
    out = acc.result()
    assert out.n_measured == 1 and out.n_skipped == 1 and out.skipped[0]["text"] == "😀"
    assert out.rows[0].text == "cat" and out.exact == pytest.approx(1 / 2)
    # Its vector is still an item of the set: FLOPs and vocabulary statistics count it.
    assert out.n == 2 and out.vocabulary.n == 2 and out.flops == 0.0
    nothing = SetAccumulator("images", scorer)
    nothing.add(["i"], ["i.png"], rows[:1], [[]])
    alone = nothing.result()
    assert alone.exact is None and alone.semantic is None and alone.n == 1
    assert alone.vocabulary.top_terms[0].token == "cat"


def test_flops_between_equals_brute_force_pairwise():
    rng = np.random.default_rng(0)
    a = rng.random((7, 12)) * (rng.random((7, 12)) < 0.3)
    b = rng.random((5, 12)) * (rng.random((5, 12)) < 0.5)
    # D2S: the mean over all caption × image pairs of the shared active dimensions.
    brute = sum(int(np.sum((x != 0) & (y != 0))) for x, y in product(a, b)) / (7 * 5)
    assert flops(a, b) == pytest.approx(brute, rel=1e-12)
    # D2S's own batched form: Σ over batch pairs of Σ_v nnz_img[v]·nnz_txt[v], / |C||I|.
    batched = sum(
        float(np.sum((a[i : i + 3] != 0).sum(0) * (b[j : j + 2] != 0).sum(0)))
        for i in range(0, 7, 3)
        for j in range(0, 5, 2)
    )
    assert flops(a, b) == pytest.approx(batched / 35, rel=1e-12)


def test_flops_within_one_set_leaves_self_pairs_out():
    rng = np.random.default_rng(1)
    a = rng.random((9, 20)) * (rng.random((9, 20)) < 0.4)
    pairs = [(i, j) for i in range(9) for j in range(9) if i != j]
    brute = np.mean([np.sum((a[i] != 0) & (a[j] != 0)) for i, j in pairs])
    assert flops(a) == pytest.approx(brute, rel=1e-12)
    with_self = np.mean([np.sum((x != 0) & (y != 0)) for x, y in product(a, a)])
    counts = (a != 0).sum(0)
    assert flops_with_self_pairs(counts, 9) == pytest.approx(with_self, rel=1e-12)
    assert flops(a) < with_self
    # Hand-sized case: two items sharing one of their two dims each → 1 shared dim.
    two = np.array([[1.0, 1.0, 0], [0, 2.0, 3.0]])
    assert flops(two) == 1.0 and flops_with_self_pairs((two != 0).sum(0), 2) == 1.5
    assert flops(two[:1]) is None  # no pair of different items
    assert flops_between((two != 0).sum(0), 2, np.array([1, 0, 1]), 1) == 1.0


def test_options_are_validated():
    for bad in ({"k": 0}, {"k": -1}, {"gate_k": -2}, {"denominator": "n"}, {"k": True}):
        with pytest.raises(InputError, match=f"^{next(iter(bad))} must be"):
            DeviationOptions.of(**bad)
    DeviationOptions.of(k=1, gate_k=-1, denominator="active")


def test_glove_file(tmp_path):
    good = tmp_path / "glove.txt"
    good.write_text("cat 1 0\ndog 0.6 0.8\nzebra 0 1\n")
    static = StaticEmbeddings.from_glove(good, keep={"cat", "dog"})
    assert static.has("dog") and not static.has("zebra") and static.vectors.shape == (2, 2)
    assert StaticEmbeddings.from_glove(good).has("zebra")
    bad = tmp_path / "bad.txt"
    bad.write_text("cat 1 0\ndog 1\n")
    with pytest.raises(InputError, match="bad.txt:2"):
        StaticEmbeddings.from_glove(bad)
    with pytest.raises(InputError, match="no vectors for any token"):
        StaticEmbeddings.from_glove(good, keep={"car"})
    with pytest.raises(InputError, match="file not found"):
        StaticEmbeddings.from_glove(tmp_path / "missing.txt")


def test_glove_top_terms_without_vector_add_zero():
    # GloVe has no word pieces: a ##piece in the top-k adds 0 to Semantic@k and is counted.
    vocab = ["cat", "##s", "dog"]
    static = StaticEmbeddings.from_table(np.array([[1.0, 0], [0.6, 0.8]]), ["cat", "dog"])
    dev = item_deviation(np.array([2.0, 1.0, 0.5]), vocab, ["cat"], static, k=3)
    assert dev.top_terms == ["cat", "##s", "dog"] and dev.no_vector == 1
    assert dev.semantic_at_k == pytest.approx((1.0 + 0 + 0.6) / 3)


def test_dataset_cloud_joins_the_pieces_of_words_the_captions_spell():
    vocab = ["[CLS]", "gi", "##raf", "##fe", "tall", "do", "##mestic"]
    static = StaticEmbeddings.from_table(np.eye(len(vocab), dtype=np.float32), vocab, "identity")
    scorer = _Scorer.build(vocab, static, 4, "k")
    acc = SetAccumulator("captions", scorer)
    # caption 1 spells "giraffe"; nothing spells "do ##mestic", so those pieces stay apart.
    rows = np.array([[0, 0.9, 0.6, 0.4, 0.8, 0, 0], [0, 0, 0, 0, 0.5, 0.3, 0.2]], np.float32)
    acc.add(
        ["a", "b"],
        ["a tall giraffe", "tall"],
        sp.csr_matrix(rows),
        [["tall", "gi", "##raf", "##fe"], ["tall"]],
    )
    out = acc.result()
    cloud = {t.token: t.weight for t in out.cloud_terms}
    # mean weights over the 2 items: gi .45, ##raf .30, ##fe .20 → giraffe = the largest piece
    assert cloud["giraffe"] == pytest.approx(0.45)
    assert not {"gi", "##raf", "##fe"} & set(cloud)
    assert {"tall", "do", "##mestic"} <= set(cloud)
    assert out.to_dict()["cloud_terms"][0] == {"term": "tall", "weight": pytest.approx(0.65)}
    # per caption: the raw top-k tokens stay (Exact@k counts them), the words are for reading
    assert out.rows[0].top_terms == ["gi", "tall", "##raf", "##fe"]
    assert out.rows[0].top_words == ["giraffe", "tall"]
