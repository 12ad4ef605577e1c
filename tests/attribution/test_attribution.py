"""Integrated Gradients per sub-vector on the real MiniLM (one real check; exactness is tested
on the analytic toy encoder in test_attr_toy.py)."""

from __future__ import annotations

import numpy as np
import pytest

from lexlens.models import InputError, ModalityError
from tests.helpers import model_tolerance

TEXT = "a small striped cat sleeps on the wooden chair"


@pytest.fixture(scope="module")
def dense():
    """The registry's minilm-pq (M=24, K=256; loaded once per session, codebooks cached)."""
    from lexlens.models import load_encoder

    return load_encoder("minilm-pq", device="cpu")


def test_minilm_matches_captum_and_an_independent_completeness_check(dense):
    from lexlens.analysis.attribution.ig import attribute_texts
    from tests.attribution.captum_oracle import captum_attribution

    steps = 6
    (a,) = attribute_texts(dense, [TEXT], steps=steps)
    assert a.token_attributions.shape == (24, len(a.tokens)) and a.subvectors == list(range(24))
    for i in (0, 7):  # two targets against plain single-target Captum runs
        ref, ref_delta = captum_attribution(dense, TEXT, i, steps)
        assert np.abs(a.token_attributions[i] - ref).max() < 1e-4 * np.abs(ref).max()
        assert abs(a.delta[i] - ref_delta) <= 1e-4 * np.abs(ref).sum()
    # F(x) − F(x') from the plain text path: the text, and the baseline as a string.
    pq = dense.quantizer
    assert a.baseline_tokens[1] == "a" and a.baseline_tokens[2] == "[UNK]"
    fx = pq.split(dense.embed_texts([TEXT]))[0]
    fb = pq.split(dense.embed_texts([" ".join(a.baseline_tokens[1:-1])]))[0]
    dhat = pq.decode(dense.codes([TEXT]))[0]
    gap = -((dhat - fx) ** 2).sum(-1) + ((dhat - fb) ** 2).sum(-1)
    np.testing.assert_array_equal(a.codes, dense.codes([TEXT])[0])
    # the terms: the attributions summed, and those of d̂² − 2 d̂ f + f² for both distances
    squares = (np.abs(dhat) + np.abs(fx)) ** 2 + (np.abs(dhat) + np.abs(fb)) ** 2
    terms = np.concatenate([np.abs(a.token_attributions), squares], axis=1)
    residual = np.abs(a.token_attributions.sum(1) - gap - a.delta)
    assert (residual <= model_tolerance(terms, axis=1)).all()
    # Stop words ("a", "on", "the") and [CLS]/[SEP] keep their embedding: exactly 0.
    for j, tok in enumerate(a.tokens):
        if tok in {"a", "on", "the", "[CLS]", "[SEP]"}:
            assert np.all(a.token_attributions[:, j] == 0.0), tok
    assert np.abs(a.attributions[:, a.words.index("cat")]).max() > 0


def test_minilm_adaptive_meets_its_tolerance(dense):
    from lexlens.analysis.attribution.ig import attribute_texts

    (a,) = attribute_texts(dense, ["rockets"], subvectors=[5])
    (full,) = attribute_texts(dense, ["rockets"], steps=2)
    gap = np.abs(a.gap())
    floor = np.abs(full.gap()).mean()  # the floor is the mean gap over all M sub-vectors
    assert a.converged and a.method == "clenshaw-curtis" and a.steps in (9, 17, 33, 65, 129, 257)
    assert np.all(np.abs(a.delta) <= 0.01 * np.maximum(gap, floor) + 1e-9)


def test_long_text_is_truncated_and_noted():
    from lexlens.analysis.attribution.attribution import attribute
    from tests.attribution.test_attr_toy import ToyEncoder

    toy = ToyEncoder()
    res = attribute(toy, " ".join(["the river flows past the mill"] * 10), steps=2)
    (a,) = res.texts
    assert a.truncated and len(a.tokens) == toy.max_length
    assert any("truncated" in n for n in res.notes)
    assert not attribute(toy, TEXT, steps=2).texts[0].truncated


def test_lexical_encoders_are_refused_in_one_line(splade):
    from lexlens.analysis.attribution.attribution import attribute

    with pytest.raises(ModalityError, match="Integrated Gradients per sub-vector needs"):
        attribute(splade, TEXT, steps=2)
    with pytest.raises(InputError, match="empty"):
        attribute(splade, "  ")
