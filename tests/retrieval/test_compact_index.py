"""The compact stored layout (uint16 column ids, posting items in 16-bit blocks) against a
plain numpy ranking and against the same vectors in the version-1 layout (int32 ids and
items), which is written here by hand from the arrays with numpy alone: the block table is
decoded by a loop over its cells, not by the reader under test."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import scipy.sparse as sp

from lexlens.analysis.collections import postings as postings_module
from lexlens.analysis.collections.npy_files import NPY_HEADER
from lexlens.analysis.collections.store import MANIFEST, file_checksum, open_index
from lexlens.analysis.collections.store_writer import (
    IndexHeader,
    write_atomically,
    write_index,
)
from lexlens.analysis.datasets.items import SkippedItems
from lexlens.analysis.retrieval.scorer import scorer_for
from lexlens.models.base import InputError

VOCAB = 500
ITEMS = 3000
PER_ITEM = 20
#: A block of rows patched small, so 3,000 rows cross six block boundaries.
SMALL_BLOCK = 512


def _vectors(seed: int, signed: bool = False) -> np.ndarray:
    """Dense ``[ITEMS, VOCAB]`` float32 vectors, Zipf-like terms, every 9th item a copy of
    an earlier one (exact ties broken by row)."""
    rng = np.random.default_rng(seed)
    p = 1.0 / (np.arange(VOCAB) + 4.0)
    p /= p.sum()
    dense = np.zeros((ITEMS, VOCAB), np.float32)
    for i in range(ITEMS):
        cols = rng.choice(VOCAB, size=PER_ITEM, replace=False, p=p)
        weights = rng.gamma(2.0, 0.5, size=PER_ITEM).astype(np.float32) + 0.01
        if signed:
            weights *= rng.choice([-1.0, 1.0], size=PER_ITEM).astype(np.float32)
        dense[i, cols] = weights
    for i in range(9, ITEMS, 9):
        dense[i] = dense[i // 3]
    return dense


def _write(folder, dense: np.ndarray):
    rows = (({"id": f"d{i}"}, np.flatnonzero(v), v[np.flatnonzero(v)]) for i, v in enumerate(dense))
    vocab = [f"t{i}" for i in range(dense.shape[1])]
    return write_index(folder, vocab, rows, encoder={"name": "test"}, postings=True)


def _as_version_1(folder) -> None:
    """Rewrite a compact index in place as version 1 wrote it: int32 column ids, int32
    posting items (each decoded by a loop over the block table's cells), no block table,
    ``format_version`` 1, the manifest's sizes and checksums those of the new files."""
    manifest = json.loads((folder / MANIFEST).read_text())
    indices = np.load(folder / "indices.npy")
    np.save(folder / "indices.npy", indices.astype(np.int32))
    low = np.load(folder / "postings_items.npy")
    table = np.load(folder / "postings_blocks.npy")
    block = json.loads((folder / "postings_scale.json").read_text())["block"]
    cells = (table.size - 1) // manifest["vocab"]["size"]
    items = low.astype(np.int64)
    for cell in range(table.size - 1):
        items[table[cell] : table[cell + 1]] += (cell % cells) * block
    np.save(folder / "postings_items.npy", items.astype(np.int32))
    os.unlink(folder / "postings_blocks.npy")
    scale = json.loads((folder / "postings_scale.json").read_text())["scale"]
    (folder / "postings_scale.json").write_text(json.dumps({"scale": scale}))
    files = manifest["files"]
    del files["postings_blocks.npy"]
    manifest["checksums"].pop("postings_blocks.npy", None)
    for name in ("indices.npy", "postings_items.npy", "postings_scale.json"):
        files[name] = (folder / name).stat().st_size
        manifest["checksums"][name] = file_checksum(folder / name)
    manifest["format_version"] = 1
    (folder / MANIFEST).write_text(json.dumps(manifest))


def _reference(dense: np.ndarray, q: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The exact top ``n`` by a dense float64 product over the items sharing a term with
    ``q``, ties by row."""
    scores = dense.astype(np.float64) @ q.astype(np.float64)
    touched = np.flatnonzero((dense[:, q != 0] != 0).any(axis=1))
    order = touched[np.lexsort((touched, -scores[touched]))][:n]
    return order, scores[order]


def _tolerance(dense: np.ndarray, rows: np.ndarray, q: np.ndarray) -> np.ndarray:
    """How far two float64 sums of an item's ``PER_ITEM`` products may differ when summed
    in other orders: 2·PER_ITEM roundings of 2^-53 of ``Σ|q_t w_t|``."""
    return 2 * PER_ITEM * 2.0**-53 * (np.abs(dense[rows]).astype(np.float64) @ np.abs(q))


def _queries(rng: np.random.Generator, signed: bool) -> list[np.ndarray]:
    out = []
    for terms in (1, 2, 8, 30, 120):
        q = np.zeros(VOCAB, np.float32)
        cols = rng.choice(VOCAB, size=terms, replace=False)
        q[cols] = rng.gamma(2.0, 0.6, size=terms)
        if signed:
            q[cols[::2]] *= -1
        out.append(q)
    return out


@pytest.mark.parametrize("signed", [False, True])
def test_silent_wrong_blocked_index_ranks_as_numpy_and_as_its_version_1_copy(
    tmp_path, monkeypatch, signed
):
    """Blocks of 512 rows (six boundaries crossed): every top n, and the rank of items
    beyond it, equal a dense numpy ranking and, bit for bit, the same vectors stored in the
    version-1 layout."""
    monkeypatch.setattr(postings_module, "POSTINGS_BLOCK", SMALL_BLOCK)
    dense = _vectors(4, signed)
    compact = _write(tmp_path / "v2", dense)
    assert compact.indices.dtype == np.uint16 and compact.manifest.format_version == 2
    assert compact.postings.items.dtype == np.uint16 and compact.postings.block == SMALL_BLOCK
    assert compact.postings.blocks.size == VOCAB * -(-ITEMS // SMALL_BLOCK) + 1
    _write(tmp_path / "v1", dense)
    _as_version_1(tmp_path / "v1")
    old = open_index(tmp_path / "v1")
    assert old.indices.dtype == np.int32 and old.manifest.format_version == 1
    assert old.postings.items.dtype == np.int32 and old.postings.blocks is None
    csc = sp.csr_matrix(dense).tocsc()
    for t in range(VOCAB):  # every term's decoded rows are the CSC's
        rows = compact.postings.term_rows(t)
        assert rows.tolist() == csc.indices[csc.indptr[t] : csc.indptr[t + 1]].tolist()
    rng = np.random.default_rng(8)
    for q in _queries(rng, signed):
        for n in (1, 10, 100, ITEMS):
            rows, scores = scorer_for(compact).top(q, n)
            old_rows, old_scores = scorer_for(old).top(q, n)
            assert np.array_equal(rows, old_rows) and np.array_equal(scores, old_scores)
            want_rows, want_scores = _reference(dense, q, n)
            assert rows.tolist() == want_rows.tolist()
            assert np.all(np.abs(scores - want_scores) <= _tolerance(dense, rows, q))
        ranking = next(scorer_for(compact).rank([q], 10))
        for row in (int(want_rows[min(40, want_rows.size - 1)]), ITEMS - 1):
            got = scorer_for(compact).rank_of(q, row, ranking)
            assert got == scorer_for(old).rank_of(q, row)
            if got[0] is not None:
                assert got[0] == want_rows.tolist().index(row) + 1


def _fill(chunks, vocab: list[str], grown: int | None = None):
    """A ``fill`` adding CSR chunks ``(ids, indptr, cols, vals)`` through ``add_rows``;
    ``grown``: the vocabulary grows to that size once every chunk is read (as an import
    without an encoder grows it)."""

    def fill(writer):
        for ids, indptr, cols, vals in chunks:
            writer.add_rows(ids, [""] * len(ids), (indptr, cols, vals), lambda k: f"item {k}")
        if grown is not None:
            vocab.extend(f"t{i}" for i in range(len(vocab), grown))
            writer.vocab_size = grown
        return writer.count, 0, SkippedItems()

    return fill


_HEADER = IndexHeader(
    encoder={"name": "test", "fingerprint": "", "capabilities": []},
    gate_k=-1,
    modality="text",
    source={"path": "", "root": "", "kind": "external", "fingerprint": ""},
)


def _chunks(matrix: sp.csr_matrix, size: int = 20_000):
    for start in range(0, matrix.shape[0], size):
        part = matrix[start : start + size]
        ids = [f"d{i}" for i in range(start, start + part.shape[0])]
        yield ids, part.indptr.astype(np.int64), part.indices.astype(np.int32), part.data


def test_silent_wrong_rows_past_65536_decode_from_the_real_block_size(tmp_path):
    """70,000 rows, blocks of 65,536 (the stored constant, not patched): the rows of the
    second block decode to their own ids and rank as numpy ranks them."""
    rng = np.random.default_rng(3)
    n, vocab_size = 70_000, 40
    cols = np.sort(rng.random((n, vocab_size)).argsort(axis=1)[:, :3], axis=1)
    weights = rng.gamma(2.0, 0.5, size=(n, 3)).astype(np.float32) + 0.01
    matrix = sp.csr_matrix(
        (weights.ravel(), cols.ravel(), np.arange(0, 3 * n + 1, 3)), shape=(n, vocab_size)
    )
    vocab = [f"t{i}" for i in range(vocab_size)]
    write_atomically(tmp_path / "ix", vocab, _fill(_chunks(matrix), vocab), _HEADER, postings=True)
    ix = open_index(tmp_path / "ix")
    assert ix.postings.blocks is not None and ix.postings.block == 2**16
    assert ix.postings.blocks.size == vocab_size * 2 + 1
    csc = matrix.tocsc()
    for t in range(vocab_size):
        rows = ix.postings.term_rows(t)
        assert rows.tolist() == csc.indices[csc.indptr[t] : csc.indptr[t + 1]].tolist()
        assert rows.max() >= 2**16  # each term's postings cross the boundary
    dense = matrix.toarray()
    for terms in ([5], [1, 7, 30], list(range(0, 40, 3))):
        q = np.zeros(vocab_size, np.float32)
        q[terms] = np.linspace(0.5, 1.5, len(terms), dtype=np.float32)
        rows, scores = scorer_for(ix).top(q, 50)
        scored = dense.astype(np.float64) @ q.astype(np.float64)
        touched = np.flatnonzero(dense[:, terms].any(axis=1))
        want = touched[np.lexsort((touched, -scored[touched]))][:50]
        assert rows.tolist() == want.tolist()
        assert np.allclose(scores, scored[want], rtol=2 * 3 * 2.0**-53, atol=0)  # 3 products


def test_silent_wrong_a_vocabulary_past_65536_keeps_int32_ids(tmp_path):
    """A vocabulary of 70,000 terms is stored with int32 ids; one that grows past 65,536
    while the items are read (an import without an encoder) is widened to int32 when the
    first id uint16 cannot hold arrives; either way every id reads back unchanged."""
    vocab_size = 70_000
    rng = np.random.default_rng(2)
    dense = np.zeros((50, vocab_size), np.float32)
    for i in range(50):
        dense[i, rng.choice(vocab_size, size=6, replace=False)] = rng.random(6) + 0.1
    dense[0, vocab_size - 1] = 0.5  # the largest id
    matrix = sp.csr_matrix(dense)
    known = [f"t{i}" for i in range(vocab_size)]
    write_atomically(tmp_path / "known", known, _fill(_chunks(matrix), known), _HEADER)
    grown_vocab = [f"t{i}" for i in range(10)]  # ten terms known when the writer opens
    fill = _fill(_chunks(matrix, size=20), grown_vocab, grown=vocab_size)
    write_atomically(tmp_path / "grown", grown_vocab, fill, _HEADER)
    for name in ("known", "grown"):
        ix = open_index(tmp_path / name)
        assert ix.indices.dtype == np.int32 and ix.vocab_size == vocab_size
        assert ix.manifest.files["indices.npy"] == NPY_HEADER + 4 * matrix.nnz
        assert np.array_equal(ix.matrix().toarray(), dense)


def test_ids_outside_the_vocabulary_are_refused_never_wrapped(tmp_path):
    """An id beyond the vocabulary (which uint16 would wrap into another term's) or below 0
    is refused in one line and no index is written."""
    vocab = [f"t{i}" for i in range(10)]
    for bad in (12, 65_546, -1):
        rows = [
            ({"id": "a"}, np.array([1, 2]), np.array([0.5, 0.5])),
            ({"id": "b"}, np.array([3, bad]), np.array([0.5, 0.5])),
        ]
        with pytest.raises(InputError, match="vocabulary id|negative vocabulary id"):
            write_index(tmp_path / f"ix{bad}", vocab, rows, encoder={"name": "test"})
        assert not (tmp_path / f"ix{bad}").exists()


def test_a_large_index_takes_at_most_1_3_times_its_csr_bytes(tmp_path):
    """20,000 items of ~60 non-zeros over 2,000 terms, postings stored: every file of the
    folder (the manifest included) against the reference scipy CSR's 8 bytes a non-zero
    and 8 a row pointer."""
    rng = np.random.default_rng(6)
    n, vocab_size = 20_000, 2_000
    p = 1.0 / (np.arange(vocab_size) + 10.0)
    p /= p.sum()
    parts = []
    for _ in range(n):
        counts = rng.integers(40, 80)
        parts.append(np.unique(rng.choice(vocab_size, size=counts, p=p)))
    cols = np.concatenate(parts).astype(np.int32)
    indptr = np.concatenate([[0], np.cumsum([c.size for c in parts])]).astype(np.int64)
    weights = (rng.gamma(2.0, 0.5, size=cols.size) + 0.01).astype(np.float32)
    matrix = sp.csr_matrix((weights, cols, indptr), shape=(n, vocab_size))
    vocab = [f"t{i}" for i in range(vocab_size)]
    write_atomically(tmp_path / "ix", vocab, _fill(_chunks(matrix), vocab), _HEADER, postings=True)
    on_disk = sum(f.stat().st_size for f in (tmp_path / "ix").iterdir())
    csr = matrix.indptr.astype(np.int64).nbytes + matrix.indices.nbytes + matrix.data.nbytes
    assert matrix.indices.dtype == np.int32 and matrix.data.dtype == np.float32
    ix = open_index(tmp_path / "ix")
    assert ix.postings is not None and ix.disk_bytes == on_disk and ix.csr_bytes == csr
    assert on_disk <= 1.3 * csr, on_disk / csr
