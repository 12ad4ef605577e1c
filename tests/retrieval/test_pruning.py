"""MaxScore-pruned exact top n (``search.ranking.ranked``, one query and batched) against a
plain dense ranking.

The reference is a dense float64 product ``D · q`` over every item, ordered by score then
row (search's tie rule) among the items that share a term with the query: computed here
with numpy alone, without the postings, the bounds, the pruning or the rescoring under
test. The indexes hold several thousand items over a Zipf-like vocabulary, exact ties
(copied items, rounded weights) and queries of 1–60 terms.
"""

from __future__ import annotations

import numpy as np
import pytest

from lexlens.analysis.collections.store import open_index
from lexlens.analysis.collections.store_writer import write_index
from lexlens.analysis.retrieval import pruning
from lexlens.analysis.retrieval.ranking import _postings, ranked
from lexlens.analysis.retrieval.scorer import scorer_for

VOCAB = 800
ITEMS = 4000
DEPTHS = (1, 10, 100)


def _vectors(seed: int) -> np.ndarray:
    """Dense non-negative ``[ITEMS, VOCAB]`` float32 vectors: ~30 non-zeros an item over a
    Zipf-like vocabulary, every 5th item's weights rounded to 0.1, every 9th a copy."""
    rng = np.random.default_rng(seed)
    p = 1.0 / (np.arange(VOCAB) + 3.0) ** 1.05
    p /= p.sum()
    dense = np.zeros((ITEMS, VOCAB), np.float32)
    for i in range(ITEMS):
        cols = rng.choice(VOCAB, size=30, replace=False, p=p)
        weights = rng.gamma(2.0, 0.5, size=30).astype(np.float32) + 0.01
        dense[i, cols] = np.round(weights, 1) + 0.1 if i % 5 == 0 else weights
    for i in range(9, ITEMS, 9):
        dense[i] = dense[(i * 37) % i]
    return dense


def _queries(seed: int, count: int = 24) -> list[np.ndarray]:
    """Positive queries of 1–60 terms, frequent and rare ones, some weights rounded."""
    rng = np.random.default_rng(seed)
    out = []
    for j in range(count):
        size = int(rng.choice([1, 3, 8, 20, 60]))
        q = np.zeros(VOCAB, np.float32)
        cols = rng.choice(VOCAB, size=size, replace=False)
        q[cols] = rng.gamma(1.5, 0.8, size=size).astype(np.float32) + 0.01
        if j % 4 == 0:
            q[cols] = np.round(q[cols], 1) + 0.1
        out.append(q)
    return out


def _reference(dense: np.ndarray, q: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The exact top ``n`` by a dense float64 product, ties by row, among items sharing a
    term with ``q``."""
    scores = dense.astype(np.float64) @ q.astype(np.float64)
    matching = np.flatnonzero((dense[:, q != 0] != 0).any(axis=1))
    order = np.lexsort((matching, -scores[matching]))[:n]
    return matching[order], scores[matching[order]]


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """A stored index with its float16 postings, and its dense vectors."""
    dense = _vectors(3)
    rows = (({"id": f"d{i}"}, np.flatnonzero(v), v[np.flatnonzero(v)]) for i, v in enumerate(dense))
    folder = tmp_path_factory.mktemp("pruning") / "ix"
    index = write_index(
        folder, [f"t{i}" for i in range(VOCAB)], rows, encoder={"name": "test"}, postings=True
    )
    assert index.postings is not None
    return index, dense


def _same(found: tuple[np.ndarray, np.ndarray], want: tuple[np.ndarray, np.ndarray]) -> None:
    assert found[0].tolist() == want[0].tolist()
    np.testing.assert_allclose(found[1], want[1], rtol=1e-12, atol=1e-12)


def _counting_lookups(monkeypatch) -> list[int]:
    """Counts MaxScore's look-up passes (non-essential terms skipped from accumulation)."""
    calls: list[int] = []
    original = pruning._looked_up

    def counted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(pruning, "_looked_up", counted)
    return calls


def test_silent_wrong_pruned_top_n_equals_a_dense_ranking_single_and_batched(stored, monkeypatch):
    index, dense = stored
    lookups = _counting_lookups(monkeypatch)
    queries = _queries(11)
    matching = max(int((dense[:, q != 0] != 0).any(axis=1).sum()) for q in queries)
    for n in (*DEPTHS, matching + 5):
        want = [_reference(dense, q, n) for q in queries]
        for q, expected in zip(queries, want, strict=True):
            _same(scorer_for(index).top(q, n), expected)
            _same(ranked(index, q, n, mapped=True), expected)
        for got, expected in zip(scorer_for(index).rank(queries, n), want, strict=True):
            _same((got.rows, got.scores), expected)
    assert lookups, "no query was pruned: the test would not exercise MaxScore"


def test_silent_wrong_small_collection_exact_postings_pruned_exactly(tmp_path):
    dense = _vectors(5)[:1500]
    rows = (({"id": f"d{i}"}, np.flatnonzero(v), v[np.flatnonzero(v)]) for i, v in enumerate(dense))
    index = write_index(
        tmp_path / "small", [f"t{i}" for i in range(VOCAB)], rows, encoder={"name": "test"}
    )
    assert index.postings is None  # an exact float32 transpose is searched
    for q in _queries(13, 12):
        for n in DEPTHS:
            _same(scorer_for(index).top(q, n), _reference(dense, q, n))


def test_silent_wrong_stale_or_missing_maxima_never_change_a_ranking(stored):
    index, dense = stored
    postings = _postings(index)
    queries = _queries(17, 16)
    pruning._MAXIMA.pop(postings, None)  # missing: read again from the postings
    for q in queries:
        _same(scorer_for(index).top(q, 10), _reference(dense, q, 10))
    true_maxima = pruning._MAXIMA[postings].copy()
    for stale in (true_maxima * 0.5, np.zeros_like(true_maxima)):
        pruning._MAXIMA[postings] = stale  # as if kept from an older index
        for q in queries:
            _same(scorer_for(index).top(q, 10), _reference(dense, q, 10))
            _same(ranked(index, q, 100, mapped=True), _reference(dense, q, 100))
    assert pruning._MAXIMA.get(postings) is not None  # the stale maxima were found, read again
    np.testing.assert_array_equal(pruning._MAXIMA[postings], true_maxima)


def test_silent_wrong_rebuilt_index_at_the_same_path_uses_its_own_maxima(tmp_path):
    folder = tmp_path / "ix"
    vocab = [f"t{i}" for i in range(VOCAB)]
    for seed in (21, 22):
        dense = _vectors(seed) * (1.0 if seed == 21 else 3.0)
        rows = (
            ({"id": f"d{i}"}, np.flatnonzero(v), v[np.flatnonzero(v)]) for i, v in enumerate(dense)
        )
        write_index(folder, vocab, rows, encoder={"name": "test"}, postings=True)
        index = open_index(folder)
        for q in _queries(seed, 8):
            _same(scorer_for(index).top(q, 100), _reference(dense, q, 100))


def test_silent_wrong_term_maxima_are_each_terms_largest_weight(stored):
    index, dense = stored
    postings = _postings(index)
    pruning._MAXIMA.pop(postings, None)
    old_chunk = pruning.MAXIMA_CHUNK
    try:
        pruning.MAXIMA_CHUNK = 997  # terms split across chunks
        found = pruning.term_maxima(
            postings, lambda _, a, b: postings.weights[int(a[0]) : int(b[0])]
        )
    finally:
        pruning.MAXIMA_CHUNK = old_chunk
    halves = (dense / np.float32(postings.scale)).astype(np.float16).astype(np.float64)
    np.testing.assert_array_equal(found, halves.max(axis=0))


def test_silent_wrong_floor_seeded_from_a_prefix_of_long_postings_stays_exact(stored, monkeypatch):
    index, dense = stored
    monkeypatch.setattr(pruning, "SEED_POSTINGS", 37)  # every frequent term's list is cut
    for q in _queries(29, 12):
        for n in (1, 10, 30):
            _same(scorer_for(index).top(q, n), _reference(dense, q, n))
            _same(ranked(index, q, n, mapped=True), _reference(dense, q, n))
