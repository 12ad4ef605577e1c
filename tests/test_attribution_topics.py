"""Topic view of a code: the texts assigned to it and their highly attributed words."""

from __future__ import annotations

import numpy as np
import pytest

from lexlens.models import LexlensError


@pytest.fixture(scope="module")
def setup():
    from lexlens.models.dense import DensePQEncoder, default_corpus

    texts = default_corpus()[200:208]
    enc = DensePQEncoder.packaged_base("cpu").fit_codebooks(texts, 12, 4, seed=0, cache=False)
    return enc, texts


def test_topic_members_and_words(setup):
    from lexlens.analysis.attribution import attribute_corpus
    from lexlens.analysis.topics import code_topic, topic_sizes

    enc, texts = setup
    codes = enc.codes(texts)
    sizes = topic_sizes(codes, 5)
    assert sum(n for _, n in sizes) == len(texts) and sizes[0][1] == max(n for _, n in sizes)
    code = sizes[0][0]
    topic = code_topic(enc, texts, 5, code, steps=4, per_text=3)
    assert topic.indices == [i for i in range(len(texts)) if codes[i, 5] == code]
    assert topic.texts == [texts[i] for i in topic.indices]
    assert topic.weights and all(v > 0 for v in topic.weights.values())
    from lexlens.analysis.attribution import group_word_pieces

    for i, row in zip(topic.indices, topic.per_text, strict=True):
        own = {w.lower() for w in group_word_pieces(enc.tokenizer.tokenize(texts[i]))[0]}
        assert {w for w, _ in row} <= own
    total = sum(v for row in topic.per_text for _, v in row)
    assert sum(topic.weights.values()) == pytest.approx(total)
    assert all(len(row) <= 3 for row in topic.per_text)
    # Reusing full attributions (all M) gives the same cloud as IG on that sub-vector only.
    full = attribute_corpus(enc, texts, steps=4)
    again = code_topic(enc, texts, 5, code, codes=codes, attributions=full, per_text=3)
    assert again.weights.keys() == topic.weights.keys()
    for word, weight in topic.weights.items():
        assert again.weights[word] == pytest.approx(weight, rel=1e-4, abs=1e-7)


def test_topic_errors(setup):
    from lexlens.analysis.topics import code_topic

    enc, texts = setup
    with pytest.raises(LexlensError, match="out of range"):
        code_topic(enc, texts, 12, 0)
    with pytest.raises(LexlensError, match="out of range"):
        code_topic(enc, texts, 0, 99)
    empty = code_topic(enc, texts[:1], 0, int((enc.codes(texts[:1])[0, 0] + 1) % enc.k), steps=2)
    assert empty.indices == [] and empty.weights == {}
    assert np.isfinite(
        list(
            code_topic(enc, texts[:1], 0, int(enc.codes(texts[:1])[0, 0]), steps=2).weights.values()
        )
    ).all()
