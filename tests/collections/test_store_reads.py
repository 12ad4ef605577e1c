"""A stored index's metadata read by its row groups as the file's footer sizes them (any
size, the older 8,192-row groups too), several groups in one read, and the vocabulary's hash
kept for a list met before: results equal an independent reading (the items as given,
pyarrow, hashlib, a brute-force ranking in numpy)."""

from __future__ import annotations

import hashlib

import numpy as np
import pyarrow.parquet as pq
import pytest

from lexlens.analysis.collections import store, store_writer
from lexlens.analysis.collections.store import open_index, vocab_hash
from lexlens.analysis.collections.store_writer import write_index
from lexlens.analysis.search.search import search
from lexlens.models.base import Capability, Encoder, LexicalEncoding, texts_digest
from tests.collections.older_index import make_older

VOCAB = [f"w{i}" for i in range(12)]


class CountingEncoder(Encoder):
    """Each word of VOCAB in a text counts 1 (an analytic lexical encoder)."""

    name = "counting"
    capabilities = frozenset({Capability.TEXT_LEXICAL})

    def __init__(self) -> None:
        self.vocab = list(VOCAB)

    def encode_texts(self, texts, side="query", *, keep_units=True):
        out = []
        for text in texts:
            words = text.split()
            weights = np.array([float(words.count(t)) for t in self.vocab], np.float32)
            out.append(LexicalEncoding(weights, None, words, input_ids=[0] * len(words)))
        return out


def _rows(n: int, seed: int = 3):
    """``n`` items with 1–4 terms each and a text naming the item, weights in (0.1, 2)."""
    rng = np.random.default_rng(seed)
    for i in range(n):
        cols = np.sort(rng.choice(len(VOCAB), size=int(rng.integers(1, 5)), replace=False))
        weights = rng.uniform(0.1, 2.0, cols.size).astype(np.float32)
        meta = {"id": f"d{i}", "text": f"item {i} " + " ".join(VOCAB[c] for c in cols)}
        yield meta, cols.astype(np.int32), weights


def _written(n: int) -> list[dict]:
    """Every metadata field of the ``n`` items of :func:`_rows` as an index stores them
    (the fields they do not give at their defaults)."""
    defaults = {"kind": "text", "image": "", "text": "", "captions": [], "labels": []}
    defaults |= {"content_key": "", "size": 0, "mtime_ns": 0}
    fields = ("id", "kind", "image", "text", "captions", "labels", "content_key", "size")
    return [
        {k: (defaults | meta)[k] for k in (*fields, "mtime_ns")} | {"nnz": int(cols.size)}
        for meta, cols, _ in _rows(n)
    ]


@pytest.fixture
def odd_groups(tmp_path, monkeypatch):
    """An index of 40 items whose Parquet row groups hold 7 rows each (the last 5)."""
    monkeypatch.setattr(store_writer, "ROW_GROUP", 7)
    ix = write_index(tmp_path / "ix", VOCAB, _rows(40), encoder={"name": "counting"})
    assert ix._parquet.metadata.num_row_groups == 6
    return ix


def test_metadata_of_rows_in_groups_of_any_size_is_the_files_own(odd_groups):
    table = pq.read_table(odd_groups.path / "items.parquet").to_pylist()
    items = _written(40)
    rows = [39, 0, 6, 7, 13, 14, 35, 7, 22]
    got = odd_groups.meta(rows)
    assert got == [items[r] | {"row": r} for r in rows]
    assert [{k: m[k] for k in table[0]} for m in got] == [table[r] for r in rows]
    picked = odd_groups.meta(rows, ["id", "nnz"])
    assert picked == [{"id": table[r]["id"], "nnz": table[r]["nnz"], "row": r} for r in rows]


def test_a_read_of_more_groups_than_are_kept_returns_every_row(odd_groups, monkeypatch):
    monkeypatch.setattr(store, "GROUPS_CACHED", 2)
    items = _written(40)
    rows = list(range(39, -1, -3))  # every group, more than two of them
    assert odd_groups.meta(rows) == [items[r] | {"row": r} for r in rows]
    assert len(odd_groups._groups) <= 2
    assert odd_groups.meta(rows[:4]) == [items[r] | {"row": r} for r in rows[:4]]


def test_the_older_8192_row_groups_read_as_written(tmp_path):
    ix = write_index(tmp_path / "ix", VOCAB, _rows(8300), encoder={"name": "counting"})
    make_older(ix.path, _written(8300), row_group=8192)  # as written before the records
    reopened = open_index(ix.path)
    assert reopened._parquet.metadata.num_row_groups == 2 and reopened.records is None
    table = pq.read_table(ix.path / "items.parquet").to_pylist()
    rows = [8299, 8191, 8192, 0]
    assert reopened.meta(rows) == [table[r] | {"row": r} for r in rows]


def test_a_row_outside_the_index_is_refused_naming_it(odd_groups):
    with pytest.raises(IndexError, match="row 40 is outside"):
        odd_groups.meta([3, 40])


def test_search_hits_are_the_brute_force_ranking_with_their_own_texts(odd_groups):
    items = list(_rows(40))
    dense = np.zeros((40, len(VOCAB)), np.float64)
    for i, (_, cols, weights) in enumerate(items):
        dense[i, cols] = weights
    query = "w3 w3 w7 w0"
    q = np.array([query.split().count(t) for t in VOCAB], np.float64)
    scores = dense @ q
    order = sorted(np.flatnonzero(scores > 0), key=lambda r: (-scores[r], r))[:10]
    found = search(odd_groups, CountingEncoder(), query, top=10, gate_k=-1)
    assert [h.row for h in found.results] == order
    assert [h.id for h in found.results] == [items[r][0]["id"] for r in order]
    assert [h.text for h in found.results] == [items[r][0]["text"] for r in order]
    # float32 weights summed over at most 4 terms, each below 2 · 2
    assert np.allclose([h.score for h in found.results], scores[order], rtol=1e-6, atol=1e-6)


def test_vocabulary_hash_is_sha256_of_its_lines_and_follows_a_change():
    vocab = [f"tok{i}" for i in range(10_000)] + ["##ing", "é"]
    expected = hashlib.sha256("".join(t + "\n" for t in vocab).encode()).hexdigest()
    assert vocab_hash(vocab) == expected
    assert vocab_hash(vocab) == expected  # kept
    vocab[5] = "changed"
    assert (
        vocab_hash(vocab) == hashlib.sha256("".join(t + "\n" for t in vocab).encode()).hexdigest()
    )
    vocab.append("more")
    assert (
        vocab_hash(vocab) == hashlib.sha256("".join(t + "\n" for t in vocab).encode()).hexdigest()
    )


def test_texts_digest_over_many_blocks_is_each_text_then_its_end():
    texts = [str(i) * (i % 5) for i in range(9_001)]
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode() + b"\0")
    assert texts_digest(iter(texts), "\0") == digest.hexdigest()
    assert texts_digest([], "\n") == hashlib.sha256().hexdigest()
