"""A stored index seen at a smaller gate k, read from its stored vectors (Compare's sides).

VDR's gate keeps ``G_K(x) = top_K(V(x)) ∪ bow(x)``, and an index stores ``E_K = V ⊙ G_K``;
``V`` itself is not kept. For ``k ≤ K`` the top-k of ``V`` are exactly the k largest stored
weights (all of them are among the stored top-K), so ``E_k = V ⊙ (top_k ∪ bow)`` is the
stored row cut to its k largest weights plus its own tokens' weights — no encoder forward
pass. A text's own tokens are the input token ids the index kept at build time
(:mod:`lexlens.analysis.collections.token_ids`), or, for an index built before it kept
them, its stored text split again by the encoder's tokenizer (no model). Images have no own
tokens. A larger k than the stored one cannot be recovered: refused. Ties at the k-th
weight keep the lower vocabulary id. The re-gated rows are held in memory (O(non-zeros at
the new k)), computed a block of rows at a time, and given back as the stored collection's
view with these vectors (``with_vectors``): everything that reads a stored collection
(search, deviation) reads it unchanged.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from lexlens.analysis.collections.stored import StoredCollection
from lexlens.analysis.collections.token_ids import stored_token_ids
from lexlens.analysis.core.results import Progress
from lexlens.analysis.core.vocabulary import special_mask
from lexlens.analysis.deviation.item_tokens import tokenized_ids
from lexlens.models.base import Encoder, InputError

#: Stored items re-gated at once (bounds the sort's memory on a large index).
REGATE_BLOCK = 65_536


def check_regate(ix: StoredCollection, k: int) -> None:
    """Refuse a gate k the index's stored vectors cannot be re-gated to exactly."""
    stored = ix.gate_k
    if k == stored or stored == -1:
        return
    if k == -1 or k > stored or (stored == 0 and k != 0):
        raise InputError(
            f"{ix.path.name} stores vectors gated at k = {stored}: they re-gate exactly only "
            f"at a smaller k (0 … {stored}), not at {k}; re-index with `lexlens index --gate-k "
            f"{k}` for a larger gate"
        )


def own_token_rows(
    ix: StoredCollection, encoder: Encoder | None, start: int, stop: int
) -> tuple[np.ndarray, np.ndarray] | None:
    """Items ``[start, stop)``'s own tokens as (row pointers, vocabulary ids), special tokens
    left out: the ids the index kept, the rest (older indexes, items kept without them)
    split again by ``encoder``'s tokenizer; ``None`` for images."""
    if ix.modality != "text":
        return None
    stored = stored_token_ids(ix).rows(start, stop)
    if stored is not None:
        indptr, ids = stored
        lengths = np.diff(indptr)
        missing = []
    else:
        indptr, ids = np.zeros(stop - start + 1, np.int64), np.zeros(0, np.int64)
        lengths = np.zeros(stop - start, np.int64)
        missing = list(range(stop - start))
    if stored is not None and encoder is not None:
        empty = np.flatnonzero(lengths == 0)
        if empty.size:
            texts = ix.meta(range(start + int(empty[0]), start + int(empty[-1]) + 1), ["text"])
            missing = [int(r) for r in empty if (texts[r - empty[0]].get("text") or "").strip()]
    if missing:
        if encoder is None:
            raise InputError(
                f"{ix.path.name} keeps no token ids of its texts: give the text encoder that "
                "tokenises them to re-gate it"
            )
        rows = [ids[indptr[r] : indptr[r + 1]] for r in range(stop - start)]
        texts = [m.get("text") or "" for m in ix.meta([start + r for r in missing], ["text"])]
        for r, found in zip(missing, tokenized_ids(encoder, texts), strict=True):
            rows[r] = found
        lengths = np.fromiter((len(r) for r in rows), np.int64, len(rows))
        indptr = np.zeros(len(rows) + 1, np.int64)
        np.cumsum(lengths, out=indptr[1:])
        ids = np.concatenate(rows).astype(np.int64) if rows else ids
    keep = ~special_mask(ix.vocab)[ids] if ids.size else np.zeros(0, bool)
    owner = np.repeat(np.arange(stop - start), np.diff(indptr))[keep]
    pointers = np.zeros(stop - start + 1, np.int64)
    np.cumsum(np.bincount(owner, minlength=stop - start), out=pointers[1:])
    return pointers, ids[keep]


def _descending_keys(rows: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """One uint64 key per stored weight that sorts by row, then by weight from the largest:
    the row in the high 32 bits, the float32 weight's bits made order-preserving (sign bit
    flipped for a positive weight, every bit for a negative one) and inverted in the low."""
    bits = np.ascontiguousarray(weights, dtype=np.float32).view(np.uint32)
    ordered = np.where(bits >> 31, ~bits, bits | np.uint32(0x80000000))
    return (rows.astype(np.uint64) << np.uint64(32)) | (~ordered).astype(np.uint64)


def regate_block(
    block: sp.csr_matrix, k: int, own: tuple[np.ndarray, np.ndarray] | None = None
) -> sp.csr_matrix:
    """Keep each row's ``k`` largest weights (ties: the lower vocabulary id) and its own
    tokens' (``own``: row pointers, vocabulary ids); ``k = -1`` keeps every weight."""
    if k < 0:
        return block
    block = block.copy() if not block.has_sorted_indices else block
    block.sort_indices()  # ids ascending in each row: a stable sort keeps ties by lower id
    n, width = block.shape
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(block.indptr))
    order = np.argsort(_descending_keys(rows, block.data), kind="stable")
    rank = np.empty(rows.size, dtype=np.int64)
    rank[order] = np.arange(rows.size) - block.indptr[rows[order]]
    keep = rank < k
    if own is not None and own[1].size and block.nnz:
        stored = rows * width + block.indices.astype(np.int64)  # ascending: sorted ids
        own_rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(own[0]))
        wanted = own_rows * width + own[1].astype(np.int64)
        at = np.minimum(np.searchsorted(stored, wanted), stored.size - 1)
        keep[at[stored[at] == wanted]] = True
    counts = np.bincount(rows[keep], minlength=n)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    return sp.csr_matrix(
        (block.data[keep].astype(np.float32), block.indices[keep].astype(np.int32), indptr),
        shape=block.shape,
    )


def regated_index(
    base: StoredCollection,
    k: int,
    encoder: Encoder | None = None,
    progress: Progress | None = None,
) -> StoredCollection:
    """``base`` seen at a smaller gate ``k``: the same items, metadata and vocabulary, its
    vectors re-gated in memory from the stored ones (``encoder``: the text encoder that
    tokenises texts whose token ids the index did not keep)."""
    check_regate(base, k)
    n = len(base)
    parts = []
    for start in range(0, n, REGATE_BLOCK):
        stop = min(n, start + REGATE_BLOCK)
        parts.append(
            regate_block(base.rows(start, stop), k, own_token_rows(base, encoder, start, stop))
        )
        if progress:
            progress(stop / max(n, 1), f"Re-gated {stop:,} of {n:,} items at k = {k}")
    matrix = sp.vstack(parts, format="csr") if parts else sp.csr_matrix((0, base.vocab_size))
    return base.with_vectors(matrix, k, f"{base.label} (re-gated at k = {k})")


def held_bytes(view: StoredCollection) -> int:
    """Bytes of a re-gated view's vectors held in memory."""
    return int(view.indptr.nbytes + view.indices.nbytes + view.data.nbytes + view.norms.nbytes)
