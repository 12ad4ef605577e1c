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


@pytest.fixture(scope="module")
def run(enc):
    """An attribution run over the corpus (all M sub-vectors), as the Attribution page has."""
    from lexlens.analysis.attribution.attribution import attribute

    return attribute(enc, TEXTS, steps=4)


def test_topic_members_and_words(enc, run):
    from lexlens.analysis.attribution.ig import attribute_texts
    from lexlens.analysis.attribution.topics import code_topic, topic_sizes, topic_words
    from lexlens.analysis.core.words import group_word_pieces

    codes = enc.codes(TEXTS)
    np.testing.assert_array_equal(run.codes(), codes)  # the run's codes are the encoder's
    sizes = topic_sizes(run, 1)
    assert sum(n for _, n in sizes) == len(TEXTS) and sizes[0][1] == max(n for _, n in sizes)
    code = sizes[0][0]
    topic = code_topic(run, 1, code, per_text=3)
    assert topic.indices == [i for i in range(len(TEXTS)) if codes[i, 1] == code]
    assert topic.texts == [TEXTS[i] for i in topic.indices]
    assert all(v > 0 for v in topic.weights.values())
    for i, row in zip(topic.indices, topic.per_text, strict=True):
        own = {w.lower() for w in group_word_pieces(enc.tokenizer.tokenize(TEXTS[i]))[0]}
        assert {w for w, _ in row} <= own and len(row) <= 3
        assert not {w for w, _ in row} & {",", "!"}  # punctuation never in a cloud
    total = sum(v for row in topic.per_text for _, v in row)
    assert sum(topic.weights.values()) == pytest.approx(total)
    # IG of the members on that one sub-vector gives the same cloud as the full run (all M).
    alone, _ = topic_words(attribute_texts(enc, topic.texts, steps=4, subvectors=[1]), 1, 3)
    assert alone.keys() == topic.weights.keys()
    for word, weight in topic.weights.items():
        assert alone[word] == pytest.approx(weight, rel=1e-5, abs=1e-9)
    assert topic.to_dict()["indices"] == topic.indices
    terms = topic.cloud_terms()
    assert [t.token for t in terms] == sorted(topic.weights, key=lambda w: -topic.weights[w])


def test_topic_errors(enc, run):
    from lexlens.analysis.attribution.attribution import attribute
    from lexlens.analysis.attribution.topics import code_topic

    with pytest.raises(InputError, match="out of range"):
        code_topic(run, 4, 0)
    with pytest.raises(InputError, match="out of range"):
        code_topic(run, 0, 9)
    one = attribute(enc, TEXTS[:1], steps=2)
    first = int(one.codes()[0, 0])
    empty = code_topic(one, 0, 1 - first)
    assert empty.indices == [] and empty.weights == {}
    assert np.isfinite(list(code_topic(one, 0, first).weights.values())).all()
    part = attribute(enc, TEXTS[:1], steps=2, subvectors=[0])
    with pytest.raises(InputError, match="not attributed"):
        code_topic(part, 1, int(part.codes()[0, 1]))
