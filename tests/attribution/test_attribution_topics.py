"""Topic view of a code: the texts assigned to it and their highly attributed words (toy)."""

from __future__ import annotations

import numpy as np
import pytest

from lexlens.models import InputError
from tests.attribution.test_attr_toy import ToyEncoder

TEXTS = [
    "the red fox runs across the field",
    "a fox and a hound, at dawn!",
    "stock markets fell on monday",
    "the quick brown fox",
    "markets rallied after the news",
    "a hound sleeps by the fire",
]


@pytest.fixture(scope="module")
def enc():
    return ToyEncoder(m=4, k=2)


def test_topic_members_and_words(enc):
    from lexlens.analysis.attribution.ig import attribute_texts
    from lexlens.analysis.attribution.topics import code_topic, topic_sizes
    from lexlens.analysis.attribution.words import group_word_pieces

    codes = enc.codes(TEXTS)
    sizes = topic_sizes(codes, 1)
    assert sum(n for _, n in sizes) == len(TEXTS) and sizes[0][1] == max(n for _, n in sizes)
    code = sizes[0][0]
    topic = code_topic(enc, TEXTS, 1, code, steps=4, per_text=3)
    assert topic.indices == [i for i in range(len(TEXTS)) if codes[i, 1] == code]
    assert topic.texts == [TEXTS[i] for i in topic.indices]
    assert all(v > 0 for v in topic.weights.values())
    for i, row in zip(topic.indices, topic.per_text, strict=True):
        own = {w.lower() for w in group_word_pieces(enc.tokenizer.tokenize(TEXTS[i]))[0]}
        assert {w for w, _ in row} <= own and len(row) <= 3
        assert not {w for w, _ in row} & {",", "!"}  # punctuation never in a cloud
    total = sum(v for row in topic.per_text for _, v in row)
    assert sum(topic.weights.values()) == pytest.approx(total)
    # Reusing full attributions (all M) gives the same cloud as IG on that sub-vector only.
    full = attribute_texts(enc, TEXTS, steps=4)
    again = code_topic(enc, TEXTS, 1, code, codes=codes, attributions=full, per_text=3)
    assert again.weights.keys() == topic.weights.keys()
    for word, weight in topic.weights.items():
        assert again.weights[word] == pytest.approx(weight, rel=1e-5, abs=1e-9)
    assert again.to_dict()["indices"] == topic.indices


def test_topic_errors(enc):
    from lexlens.analysis.attribution.topics import code_topic

    with pytest.raises(InputError, match="out of range"):
        code_topic(enc, TEXTS, 4, 0)
    with pytest.raises(InputError, match="out of range"):
        code_topic(enc, TEXTS, 0, 9)
    first = int(enc.codes(TEXTS[:1])[0, 0])
    empty = code_topic(enc, TEXTS[:1], 0, 1 - first, steps=2)
    assert empty.indices == [] and empty.weights == {}
    assert np.isfinite(list(code_topic(enc, TEXTS[:1], 0, first, steps=2).weights.values())).all()
