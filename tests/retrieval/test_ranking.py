"""One query's exact top n (``Scorer.top``) against a plain numpy ranking.

The reference is a dense float64 product over every item's vector, ranked by score then
row (search's tie rule), over the items that share a term with the query: computed here
without the postings, the bounds or the rescoring under test.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

from lexlens.analysis.collections.memory import MemoryCollection
from lexlens.analysis.collections.store import open_index
from lexlens.analysis.collections.store_writer import write_index
from lexlens.analysis.retrieval import ranking
from lexlens.analysis.retrieval.scorer import scorer_for

VOCAB = 600
ITEMS = 3000


def _vectors(seed: int, signed: bool) -> np.ndarray:
    """Dense ``[ITEMS, VOCAB]`` float32 vectors: ~25 non-zeros an item over a Zipf-like
    vocabulary, every 7th item a copy of another (exact ties), some weights equal."""
    rng = np.random.default_rng(seed)
    p = 1.0 / (np.arange(VOCAB) + 5.0)
    p /= p.sum()
    dense = np.zeros((ITEMS, VOCAB), np.float32)
    for i in range(ITEMS):
        cols = rng.choice(VOCAB, size=25, replace=False, p=p)
        weights = rng.gamma(2.0, 0.5, size=25).astype(np.float32) + 0.01
        if signed:
            weights *= rng.choice([-1.0, 1.0], size=25).astype(np.float32)
        dense[i, cols] = np.round(weights, 1) if i % 5 == 0 else weights
    for i in range(7, ITEMS, 7):
        dense[i] = dense[(i * 31) % i]
    return dense


def _stored(tmp_path, dense: np.ndarray, name: str):
    """``dense`` written as a stored index with its float16 postings (memory-mapped)."""
    rows = (({"id": f"d{i}"}, np.flatnonzero(v), v[np.flatnonzero(v)]) for i, v in enumerate(dense))
    vocab = [f"t{i}" for i in range(VOCAB)]
    index = write_index(tmp_path / name, vocab, rows, encoder={"name": "test"}, postings=True)
    assert index.postings is not None
    return index


def _reference(
    dense: np.ndarray, q: np.ndarray, n: int, normalize: bool, square: bool
) -> tuple[np.ndarray, np.ndarray]:
    """The exact top ``n`` by a dense float64 product (ties by row)."""
    values = dense.astype(np.float64)
    f = values**2 if square else values
    scores = f @ q.astype(np.float64)
    if normalize:
        norms = np.linalg.norm(values, axis=1).astype(np.float32).astype(np.float64)
        scores = scores / np.where(norms > 0, norms**2 if square else norms, 1.0)
    touched = np.flatnonzero((dense[:, q != 0] != 0).any(axis=1))
    order = touched[np.lexsort((touched, -scores[touched]))][:n]
    return order, scores[order]


def _queries(dense: np.ndarray, rng: np.random.Generator, signed: bool) -> list[np.ndarray]:
    """Queries of 1, 3, 25 and 80 terms; one copies an item's vector (its own twin ties)."""
    out = []
    for terms in (1, 3, 25, 80):
        q = np.zeros(VOCAB, np.float32)
        cols = rng.choice(VOCAB, size=terms, replace=False)
        q[cols] = rng.gamma(2.0, 0.6, size=terms)
        if signed:
            q[cols[::3]] *= -1
        out.append(q)
    out.append(np.abs(dense[14]) if not signed else dense[14].copy())
    return out


@pytest.mark.parametrize("signed", [False, True])
def test_silent_wrong_stored_postings_rank_as_a_dense_product(tmp_path, signed):
    """float16 postings read memory-mapped, bounds, exact rescoring: the same rows in the
    same order and the same float64 scores as a dense product, for every n, with exact
    ties broken by row, normalised and squared alike."""
    dense = _vectors(1 if signed else 0, signed)
    index = _stored(tmp_path, dense, "ix")
    rng = np.random.default_rng(5)
    for q in _queries(dense, rng, signed):
        for n in (1, 10, 100, ITEMS):
            for normalize, square in ((False, False), (True, False), (True, True)):
                query = np.abs(q) if square else q
                rows, scores = scorer_for(index).top(query, n, normalize=normalize, square=square)
                expected, reference = _reference(dense, query, n, normalize, square)
                assert list(rows) == list(expected), (n, normalize, square)
                assert np.allclose(scores, reference, rtol=1e-12, atol=0)


def test_silent_wrong_memory_collection_ranks_as_a_dense_product():
    """An in-memory collection (exact float32 transpose) ranks as the dense product too."""
    dense = _vectors(2, signed=True)
    collection = MemoryCollection(
        [f"d{i}" for i in range(ITEMS)], [""] * ITEMS, dense, [f"t{i}" for i in range(VOCAB)]
    )
    rng = np.random.default_rng(9)
    for q in _queries(dense, rng, signed=True):
        for n in (1, 10, 100):
            rows, scores = scorer_for(collection).top(q, n)
            expected, reference = _reference(dense, q, n, False, False)
            assert list(rows) == list(expected)
            assert np.allclose(scores, reference, rtol=1e-12, atol=0)


def test_silent_wrong_ties_are_broken_by_row(tmp_path):
    """Forty items with the very same vector: the top 10 are the ten lowest rows."""
    dense = np.zeros((ITEMS, VOCAB), np.float32)
    twins = np.arange(100, ITEMS, 73)[:40]
    dense[twins, 3], dense[twins, 9] = 0.7, 1.3
    dense[5, 3] = 0.1  # touched, scoring below the twins
    index = _stored(tmp_path, dense, "ties")
    q = np.zeros(VOCAB, np.float32)
    q[[3, 9]] = [1.0, 2.0]
    rows, scores = scorer_for(index).top(q, 10)
    assert list(rows) == list(twins[:10]) and len(set(scores)) == 1
    rows, _ = scorer_for(index).top(q, 100)
    assert list(rows) == [*twins, 5]  # only items that share a term are ranked


def test_silent_wrong_float16_rounding_never_drops_the_best(tmp_path):
    """float16 postings round 600.24 down to 600.0 (spacing 0.5 there), so item 1 looks
    better than item 0 (600.0 + 0.1); the error bound keeps item 0, the true best."""
    dense = np.zeros((ITEMS, VOCAB), np.float32)
    dense[0, 1] = 600.24
    dense[1, 1], dense[1, 2] = 600.0, 0.1
    dense[2, 50] = 1024.0  # the largest weight: the postings' scale is 1
    index = _stored(tmp_path, dense, "ix")
    q = np.zeros(VOCAB, np.float32)
    q[[1, 2]] = 1.0
    rows, scores = scorer_for(index).top(q, 1)
    assert list(rows) == [0] and scores[0] == pytest.approx(600.24, rel=1e-7)


def test_unbounded_single_query_reads_postings_never_the_whole_matrix(tmp_path):
    """A stored index with postings is ranked from the query terms' postings: search
    builds no whole CSR matrix (nor an in-memory transpose) of it."""
    dense = _vectors(3, signed=False)
    index = _stored(tmp_path, dense, "ix")
    q = np.zeros(VOCAB, np.float32)
    q[[1, 2, 40]] = 1.0
    scorer_for(index).top(q, 10)
    assert index not in ranking._CSR
    assert ranking._POSTINGS[index].exact is False  # the stored float16 postings
    # read by range from the files, never through the mapping (no read-around pages mapped)
    assert ranking._READERS[ranking._POSTINGS[index]]["items"].fd is not None
    assert ranking._READERS[index]["indices"].fd is not None
    del index
    gc.collect()


def test_silent_wrong_reopened_index_ranks_the_same(tmp_path):
    """The postings are read afresh from the files of a reopened index."""
    dense = _vectors(4, signed=False)
    _stored(tmp_path, dense, "ix")
    index = open_index(tmp_path / "ix")
    q = np.abs(dense[21])
    rows, _ = scorer_for(index).top(q, 10)
    assert list(rows) == list(_reference(dense, q, 10, False, False)[0])
