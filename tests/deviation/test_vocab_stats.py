"""Vocabulary statistics: streamed over CSR batches == computed in memory, laziness, reservoirs."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from lexlens.analysis.deviation.vocab_stats import VocabAccumulator
from lexlens.models import InputError
from tests.deviation.helpers import vocab_stats


def _collection(n: int = 300, v: int = 40, seed: int = 0) -> tuple[np.ndarray, list[str]]:
    rng = np.random.default_rng(seed)
    rates = np.linspace(0.02, 1.0, v)  # term j is active in about rates[j] of the items
    x = rng.random((n, v)) * (rng.random((n, v)) < rates)
    x[:, 5] = 0  # a term never active
    vocab = [f"t{j}" for j in range(v)]
    vocab[-1] = "[CLS]"  # the most active dimension is a special token: never listed
    return x.astype(np.float32), vocab


def _batches(x: np.ndarray, size: int):
    for lo in range(0, x.shape[0], size):
        yield sp.csr_matrix(x[lo : lo + size])


def test_streamed_equals_in_memory_reference():
    x, vocab = _collection()
    stats = vocab_stats(_batches(x, 17), vocab, top=10, reservoir=1000)
    # Reference computed on the whole dense matrix at once.
    mean = x.astype(np.float64).mean(axis=0)
    rate = (x != 0).mean(axis=0)
    eligible = np.array([not t.startswith("[") for t in vocab])
    order = [j for j in np.argsort(-np.where(eligible, mean, -1), kind="stable")[:10]]
    assert [t.index for t in stats.top_terms] == order
    for t in stats.top_terms:
        col = x[:, t.index]
        active = col[col != 0]
        assert t.mean_weight == pytest.approx(mean[t.index], rel=1e-12)
        assert t.activation_rate == pytest.approx(rate[t.index], rel=1e-12)
        assert t.active_items == active.size
        assert t.mean_when_active == pytest.approx(active.astype(np.float64).mean(), rel=1e-12)
        assert t.max_weight == pytest.approx(active.max()) and t.min_active == active.min()
        # With a reservoir larger than every count, distributions are exact.
        assert t.sampled == active.size
        assert np.array_equal(np.sort(stats.distributions[t.token]), np.sort(active))
        assert t.quartiles == pytest.approx(
            np.quantile(active.astype(np.float64), [0, 0.25, 0.5, 0.75, 1]).tolist()
        )
    assert stats.n == 300
    assert stats.active_terms == int(((x != 0).sum(0) > 0)[eligible].sum())
    assert stats.mean_active_per_item == pytest.approx((x != 0).sum(1).mean())


def test_batching_never_changes_the_result():
    x, vocab = _collection(n=500)
    one = VocabAccumulator(len(vocab), reservoir=16)
    one.add(sp.csr_matrix(x))
    many = VocabAccumulator(len(vocab), reservoir=16)
    for batch in _batches(x, 7):
        many.add(batch)
    assert np.array_equal(one.counts, many.counts)
    assert np.allclose(one.sums, many.sums, rtol=1e-12, atol=0)
    # The reservoir's slots are a fixed hash of (term, rank): same values kept either way,
    # even for terms active far more often than the reservoir holds.
    assert np.array_equal(one.samples, many.samples)
    assert (one.counts > 16).any()


def test_reservoir_is_a_uniform_sample():
    # One term active in every item, values 1..400; over many seeds each value is kept
    # with probability R/N.
    x = np.arange(1, 401, dtype=np.float32)[:, None]
    kept = np.zeros(400)
    for seed in range(200):
        acc = VocabAccumulator(1, reservoir=20, seed=seed)
        for batch in _batches(x, 64):
            acc.add(batch)
        kept[(acc.distribution(0) - 1).astype(int)] += 1
    share = kept.reshape(8, 50).sum(axis=1) / (200 * 20 / 8)
    assert np.all(np.abs(share - 1) < 0.15), share


def test_laziness_threshold_and_special_tokens():
    x = np.zeros((10, 4), dtype=np.float32)
    x[:, 0] = 1.0  # [CLS]: always active, special → never lazy, never in the cloud
    x[:9, 1] = 0.5  # active for 9 of 10: rate 0.9 → lazy at the default threshold
    x[:8, 2] = 2.0  # 8 of 10: not lazy at 0.9, lazy at 0.8
    x[0, 3] = 9.0  # once
    vocab = ["[CLS]", "always", "often", "once"]
    stats = vocab_stats([sp.csr_matrix(x)], vocab)
    assert [t.token for t in stats.lazy_terms] == ["always"]
    assert [t.token for t in stats.top_terms] == ["often", "once", "always"]  # 1.6, 0.9, 0.45
    assert stats.top_terms[0].lazy is False and stats.top_terms[2].lazy is True
    looser = vocab_stats([sp.csr_matrix(x)], vocab, lazy_rate=0.8)
    assert [t.token for t in looser.lazy_terms] == ["always", "often"]
    assert "[CLS]" not in stats.to_dict()["lazy_terms"]


def test_box_data_are_the_active_weights():
    # A term's box shows its weights over the items where it is active: over all items a
    # sparse term's quartiles would be 0 (a flat line).
    x = np.zeros((20, 2), dtype=np.float32)
    x[:3, 1] = [1.0, 2.0, 3.0]
    stats = vocab_stats([sp.csr_matrix(x)], ["[PAD]", "cat"])
    cat = stats.top_terms[0]
    assert np.quantile(x[:, 1], 0.75) == 0  # over all items: the flat line
    assert cat.quartiles == [1.0, 1.5, 2.0, 2.5, 3.0] and cat.activation_rate == 0.15


def test_bad_inputs():
    with pytest.raises(InputError, match="no items"):
        vocab_stats([], ["a"])
    with pytest.raises(InputError, match="dimensions"):
        vocab_stats([np.ones((2, 3))], ["a", "b"])
    with pytest.raises(InputError, match="laziness"):
        vocab_stats([np.ones((2, 2))], ["a", "b"], lazy_rate=0)
