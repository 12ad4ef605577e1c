"""The inverted postings of a large stored index, built from its CSR files in chunks.

For each vocabulary term: the items that use it and their weights as scaled float16, so a
search touches only its query terms' items (:mod:`lexlens.analysis.retrieval.ranking`);
the items as 16-bit ids within blocks of rows when that takes fewer bytes
(:mod:`.posting_blocks`). Written from :data:`~.store.POSTINGS_MIN_NNZ` non-zeros on (or
when asked), in memory O(chunk) whatever the index's size.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from lexlens.analysis.collections.npy_files import NPY_HEADER, npy_header, read_chunk, write_npy
from lexlens.analysis.collections.posting_blocks import POSTINGS_BLOCK, block_count, blocks_pay
from lexlens.analysis.collections.store import POSTINGS_TOP


def _drop_pages(mapped: mmap.mmap) -> None:
    """Write a shared mapping's dirty pages and drop them from this process's memory."""
    mapped.flush()
    with contextlib.suppress(AttributeError, OSError, ValueError):
        mapped.madvise(mmap.MADV_DONTNEED)


def write_postings(folder: Path, vocab_size: int, max_weight: float) -> dict[str, int]:
    """The inverted index of the CSR in ``folder``, built in chunks (memory O(chunk)).

    For each term: the items that use it (ascending) and their weights as float16 of
    ``weight / scale`` (``scale`` puts the largest weight at :data:`POSTINGS_TOP`; a
    non-zero weight never rounds to 0). The items are uint16 ``row mod B`` with the
    (term, block) table of :mod:`.posting_blocks` when :func:`~.posting_blocks.blocks_pay`
    says it is smaller, else int32 rows. Search scores from them approximately, then
    rescores its candidates exactly from the CSR rows (see
    :meth:`lexlens.analysis.retrieval.scorer.Scorer.top`). The CSR is read with plain reads
    and the output's pages are written back and dropped after every chunk, so the
    process's resident memory stays near one chunk (and the block table, 8 bytes a term
    and block) whatever the index's size.
    """
    indptr = np.load(folder / "indptr.npy")
    ids_dtype = np.load(folder / "indices.npy", mmap_mode="r").dtype  # uint16 or int32
    n, nnz = indptr.shape[0] - 1, int(indptr[-1])
    step = 4_000_000
    block = POSTINGS_BLOCK
    blocked = blocks_pay(vocab_size, n, nnz, block)
    cells = block_count(n, block) if blocked else 1
    counts = np.zeros((vocab_size, cells), dtype=np.int64)  # postings of each term and block
    for cell in range(cells):
        r0, r1 = (cell * block, min(n, (cell + 1) * block)) if blocked else (0, n)
        a, b = int(indptr[r0]), int(indptr[r1])
        for start in range(a, b, step):
            chunk = read_chunk(folder / "indices.npy", ids_dtype, start, min(step, b - start))
            counts[:, cell] += np.bincount(chunk, minlength=vocab_size)
    table = np.zeros(vocab_size * cells + 1, dtype=np.int64)
    np.cumsum(counts.ravel(), out=table[1:])
    p_indptr = np.ascontiguousarray(table[::cells])
    scale = max_weight / POSTINGS_TOP if max_weight > 0 else 1.0
    tiny = np.float16(2.0**-24)
    items_path, weights_path = folder / "postings_items.npy", folder / "postings_weights.npy"
    files = []
    items_dtype = np.uint16 if blocked else np.int32
    for path, dtype in ((items_path, items_dtype), (weights_path, np.float16)):
        with open(path, "wb") as handle:
            handle.write(npy_header(np.dtype(dtype), nnz))
            handle.truncate(NPY_HEADER + nnz * np.dtype(dtype).itemsize)
        handle = open(path, "r+b")  # noqa: SIM115
        mapped = mmap.mmap(handle.fileno(), 0) if nnz else None
        view = (
            np.frombuffer(mapped, dtype=dtype, count=nnz, offset=NPY_HEADER)
            if mapped is not None
            else np.zeros(0, dtype)
        )
        files.append((handle, mapped, view))
    (_, items_map, items), (_, weights_map, weights) = files
    try:
        cursor = p_indptr[:-1].copy()
        rows_per_chunk = max(1, step // max(1, nnz // max(n, 1)))
        for r0 in range(0, n, rows_per_chunk):
            r1 = min(n, r0 + rows_per_chunk)
            a, b = int(indptr[r0]), int(indptr[r1])
            if a == b:
                continue
            cols = read_chunk(folder / "indices.npy", ids_dtype, a, b - a)
            vals = read_chunk(folder / "data.npy", np.float32, a, b - a)
            # The chunk by term, items ascending within each: scipy's CSR → CSC counting sort.
            by_term = sp.csr_matrix(
                (vals, cols, indptr[r0 : r1 + 1] - a), shape=(r1 - r0, vocab_size)
            ).tocsc()
            rows, vals = by_term.indices + np.int32(r0), by_term.data
            per_term = np.diff(by_term.indptr)
            cols = np.repeat(np.arange(vocab_size, dtype=np.int32), per_term)
            starts = by_term.indptr[:-1][per_term > 0]
            group = np.repeat(starts, per_term[per_term > 0])
            positions = cursor[cols] + (np.arange(cols.size) - group)
            halves = (vals / scale).astype(np.float16)
            lost = (halves == 0) & (vals != 0)
            halves[lost] = np.copysign(tiny, vals[lost]).astype(np.float16)
            items[positions] = np.remainder(rows, block) if blocked else rows
            weights[positions] = halves
            np.add.at(cursor, cols[starts], np.diff(np.r_[starts, cols.size]))
            for mapped in (items_map, weights_map):
                if mapped is not None:
                    _drop_pages(mapped)
    finally:
        del items, weights, view
        files = [(handle, mapped) for handle, mapped, _ in files]  # drop the array views
        for handle, mapped in files:
            if mapped is not None:
                mapped.flush()
                mapped.close()
            os.fsync(handle.fileno())
            handle.close()
    sizes = {
        "postings_items.npy": items_path.stat().st_size,
        "postings_weights.npy": weights_path.stat().st_size,
        "postings_indptr.npy": write_npy(folder / "postings_indptr.npy", p_indptr),
    }
    recorded: dict = {"scale": scale}
    if blocked:
        sizes["postings_blocks.npy"] = write_npy(folder / "postings_blocks.npy", table)
        recorded["block"] = block
    (folder / "postings_scale.json").write_text(json.dumps(recorded))
    sizes["postings_scale.json"] = (folder / "postings_scale.json").stat().st_size
    return sizes
