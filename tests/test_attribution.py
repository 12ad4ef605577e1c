"""Integrated Gradients per PQ sub-vector (batched) and for SPLADE terms, on the real models."""

from __future__ import annotations

import numpy as np
import pytest

from lexlens.models import LexlensError

TEXT = "a small striped cat sleeps on a wooden chair"


@pytest.fixture(scope="module")
def dense():
    """MiniLM with M=12, K=8 codebooks fitted on 16 real class descriptions."""
    from lexlens.models.dense import DensePQEncoder, default_corpus

    base = DensePQEncoder.packaged_base("cpu")
    return base.fit_codebooks(default_corpus()[:16], 12, 8, seed=0, cache=False)


def _reference_gap(enc, text: str, n_tokens: int) -> np.ndarray:
    """F_i(x) − F_i(x') from the plain embedding path: the text, and a string of [UNK]s."""
    pq = enc.quantizer
    fx = pq.split(enc.embed_texts([text]))[0]
    fb = pq.split(enc.embed_texts([" ".join(["[UNK]"] * (n_tokens - 2))]))[0]
    dhat = pq.decode(enc.codes([text]))[0]
    return -((dhat - fx) ** 2).sum(-1) + ((dhat - fb) ** 2).sum(-1)


def test_batched_equals_single_target_captum(dense):
    from lexlens.analysis.attribution import attribute_single_target, attribute_subvectors

    steps = 16
    attr = attribute_subvectors(dense, TEXT, steps=steps)
    assert attr.token_attributions.shape == (12, len(attr.tokens))
    assert attr.subvectors == list(range(12))
    for i in range(12):
        ref, ref_delta = attribute_single_target(dense, TEXT, i, steps)
        rel = np.abs(attr.token_attributions[i] - ref).max() / np.abs(ref).max()
        assert rel < 1e-4, (i, rel)
        assert abs(attr.delta[i] - ref_delta) <= 1e-4 * np.abs(ref).sum()
    ref, _ = attribute_single_target(dense, TEXT, None, steps)
    glob_tokens = attr.token_attributions.sum(0)
    assert np.abs(glob_tokens - ref).max() / np.abs(ref).max() < 1e-4
    np.testing.assert_allclose(attr.global_attributions.sum(), glob_tokens.sum(), rtol=1e-9)


def test_completeness_and_delta_shrinks_with_steps(dense):
    from lexlens.analysis.attribution import attribute_subvectors

    coarse = attribute_subvectors(dense, TEXT, steps=2, method="riemann_trapezoid")
    fine = attribute_subvectors(dense, TEXT, steps=48, method="riemann_trapezoid")
    gap = _reference_gap(dense, TEXT, len(fine.tokens))
    for res in (coarse, fine):
        np.testing.assert_array_equal(res.codes, dense.codes([TEXT])[0])
        # Σ attributions = F(x) − F(x') + delta, with F computed independently here.
        sums = res.token_attributions.sum(1)
        np.testing.assert_allclose(sums - gap, res.delta, atol=2e-6)
        # Word aggregation keeps the total ([CLS]/[SEP] have x = x', so zero attribution).
        np.testing.assert_allclose(res.attributions.sum(1), sums, atol=1e-9)
        assert np.abs(res.token_attributions[:, [0, -1]]).max() == 0
    assert np.abs(fine.delta).mean() < 0.5 * np.abs(coarse.delta).mean()
    assert np.all(np.abs(fine.delta) < 0.05 * np.abs(gap) + 1e-5)
    assert abs(fine.global_delta) < abs(coarse.global_delta)


def test_corpus_batches_and_padding_do_not_change_results(dense):
    from lexlens.analysis.attribution import attribute_corpus, attribute_subvectors

    texts = [TEXT, "rockets", "an old steam locomotive pulling freight wagons across a bridge"]
    seen = []
    together = attribute_corpus(
        dense, texts, steps=6, batch_size=3, progress=lambda f, m: seen.append(f)
    )
    assert seen[-1] == 1.0
    for text, res in zip(texts, together, strict=True):
        alone = attribute_subvectors(dense, text, steps=6)
        assert res.text == text and res.tokens == alone.tokens
        scale = np.abs(alone.token_attributions).max()
        assert np.abs(res.token_attributions - alone.token_attributions).max() < 1e-4 * scale


def test_subvector_selection_and_global(dense):
    from lexlens.analysis.attribution import attribute_subvectors

    full = attribute_subvectors(dense, TEXT, steps=6)
    part = attribute_subvectors(dense, TEXT, steps=6, subvectors=[7, 3])
    assert part.subvectors == [7, 3] and part.attributions.shape[0] == 2
    np.testing.assert_allclose(part.attributions[0], full.attributions[7], atol=1e-7)
    np.testing.assert_allclose(part.attributions[part.row(3)], full.attributions[3], atol=1e-7)
    np.testing.assert_allclose(part.global_attributions, full.global_attributions, atol=1e-6)
    np.testing.assert_array_equal(part.codes, full.codes)


def test_word_pieces_are_merged_into_words(dense):
    from lexlens.analysis.attribution import attribute_subvectors, group_word_pieces

    words, groups = group_word_pieces(["[CLS]", "token", "##ization", "is", "fun", "[SEP]"])
    assert words == ["tokenization", "is", "fun"] and groups == [[1, 2], [3], [4]]
    res = attribute_subvectors(dense, "tokenization helps", steps=4, subvectors=[0])
    assert res.tokens[1:3] == ["token", "##ization"] and res.words[0] == "tokenization"
    assert res.attributions[0, 0] == pytest.approx(res.token_attributions[0, 1:3].sum())


def test_long_text_is_truncated_and_noted(dense):
    from lexlens.analysis.attribution import attribute_subvectors

    long_text = " ".join(["the river flows past the mill"] * 80)
    res = attribute_subvectors(dense, long_text, steps=2, subvectors=[0])
    assert res.truncated and len(res.tokens) == dense.max_length
    short = attribute_subvectors(dense, TEXT, steps=2, subvectors=[0])
    assert not short.truncated


def test_pad_baseline_option(dense):
    from lexlens.analysis.attribution import attribute_single_target, attribute_subvectors

    res = attribute_subvectors(dense, TEXT, steps=8, baseline="pad", subvectors=[2])
    ref, _ = attribute_single_target(dense, TEXT, 2, 8, baseline="pad")
    assert np.abs(res.token_attributions[0] - ref).max() < 1e-4 * np.abs(ref).max()
    unk = attribute_subvectors(dense, TEXT, steps=8, subvectors=[2])
    assert np.abs(unk.token_attributions - res.token_attributions).max() > 1e-6


def test_randt_uses_another_subvector(dense):
    from lexlens.analysis.attribution import attribute_subvectors, random_other, randt_attributions

    other = random_other(12, seed=5)
    assert np.all(other != np.arange(12)) and np.array_equal(other, random_other(12, seed=5))
    res = attribute_subvectors(dense, TEXT, steps=4)
    np.testing.assert_array_equal(randt_attributions(res, seed=5), res.attributions[other])


def test_bad_requests_are_clear_errors(dense, splade):
    from lexlens.analysis.attribution import attribute_subvectors

    with pytest.raises(LexlensError, match="steps"):
        attribute_subvectors(dense, TEXT, steps=0)
    with pytest.raises(LexlensError, match="out of range"):
        attribute_subvectors(dense, TEXT, steps=2, subvectors=[12])
    with pytest.raises(LexlensError, match="baseline"):
        attribute_subvectors(dense, TEXT, steps=2, baseline="zeros")
    with pytest.raises(LexlensError, match="not a dense"):
        attribute_subvectors(splade, TEXT, steps=2)
    with pytest.raises(LexlensError, match="empty"):
        attribute_subvectors(dense, "   ", steps=2)


def test_lexical_term_attribution(splade):
    from lexlens.analysis.attribution import attribute_lexical_term

    text = "a cat sleeping on a book"
    term = splade.vocab.index("cat")
    tokens, attr, delta = attribute_lexical_term(splade, text, term, steps=32)
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]" and len(attr) == len(tokens)
    # F(x) and F(x') from the encoder's own pooled weights.
    fx = splade.encode_texts([text])[0].weights[term]
    fb = splade.encode_texts([" ".join(["[UNK]"] * (len(tokens) - 2))])[0].weights[term]
    assert attr.sum() - (fx - fb) == pytest.approx(delta, abs=1e-4)
    assert tokens[int(np.argmax(attr))] == "cat"
    with pytest.raises(LexlensError, match="out of range"):
        attribute_lexical_term(splade, text, 10**6, steps=2)
