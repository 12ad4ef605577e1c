"""A stored index seen at a smaller gate k, without re-encoding (Compare's second side).

An index stores ``E_K = V ⊙ G_K`` (top-K of ``V`` plus the
item's own tokens); ``V`` itself is not kept. For ``k ≤ K`` the top-k of ``V`` are exactly
the k largest stored weights (they are all among the stored top-K), so the image vectors
re-gate exactly (up to ties at the k-th weight). A text's gate also keeps its own tokens
(bag of words), which the stored vector does not mark: each text is tokenised again by the
side's text encoder (``side="document"``, as ``lexlens index`` encodes) and its own tokens'
stored weights are kept, so ``E_k = V ⊙ (top-k ∪ bow)`` holds for texts too. A larger k
than the stored one cannot be recovered (refused). The re-gated vectors are held in memory
(O(non-zeros at the new k)); the query is gated at the same k as its side's documents.
"""

from __future__ import annotations

import numpy as np

from lexlens.analysis.collections.store import StoredIndex
from lexlens.analysis.core.gating import bag_of_words
from lexlens.models.base import Encoder, InputError


def check_regate(ix: StoredIndex, k: int) -> None:
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


def own_columns(ix: StoredIndex, encoder: Encoder, batch_size: int = 64) -> list[np.ndarray]:
    """Each text item's own tokens (bag of words) as vocabulary ids, by re-tokenising its
    text with ``encoder`` (document side, as the index was encoded)."""
    texts = [str(t or "") for t in ix.column("text")]
    out: list[np.ndarray] = [np.zeros(0, np.int64)] * len(texts)
    todo = [i for i, t in enumerate(texts) if t.strip()]
    for lo in range(0, len(todo), batch_size):
        chunk = todo[lo : lo + batch_size]
        encodings = encoder.encode_texts(
            [texts[i] for i in chunk], side="document", keep_units=False
        )
        for i, e in zip(chunk, encodings, strict=True):
            out[i] = np.flatnonzero(bag_of_words(e, encoder.vocab))
    return out


def regate_rows(
    indptr: np.ndarray,
    indices: np.ndarray,
    data: np.ndarray,
    k: int,
    own: list[np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Keep each stored row's ``k`` largest weights and its own tokens' (``own[i]``)."""
    n = len(indptr) - 1
    new_ptr = np.zeros(n + 1, dtype=np.int64)
    cols_out, vals_out = [], []
    for i in range(n):
        a, b = int(indptr[i]), int(indptr[i + 1])
        cols = np.asarray(indices[a:b])
        vals = np.asarray(data[a:b])
        if k >= 0 and cols.size > k:
            keep = np.zeros(cols.size, dtype=bool)
            if k > 0:
                keep[np.argpartition(-vals, k - 1)[:k]] = True
            if own is not None and own[i].size:
                keep |= np.isin(cols, own[i])
            cols, vals = cols[keep], vals[keep]
        cols_out.append(cols)
        vals_out.append(vals)
        new_ptr[i + 1] = new_ptr[i] + cols.size
    cat = np.concatenate
    return (
        new_ptr,
        cat(cols_out).astype(np.int32) if cols_out else np.zeros(0, np.int32),
        cat(vals_out).astype(np.float32) if vals_out else np.zeros(0, np.float32),
    )


class RegatedIndex(StoredIndex):
    """A stored index seen at a smaller gate k: the same items,
    metadata and vocabulary, its vectors re-gated in memory. Everything that reads a
    :class:`StoredIndex` (search, deviation) reads it unchanged."""

    def __init__(self, base: StoredIndex, k: int, own: list[np.ndarray] | None = None) -> None:
        super().__init__(base.path)  # its own handles (memory maps, metadata) on the folder
        check_regate(self, k)
        stored = self.gate_k
        self.indptr, self.indices, self.data = regate_rows(
            self.indptr, self.indices, self.data, k, own
        )
        squares = np.bincount(
            np.repeat(np.arange(len(self)), np.diff(self.indptr)),
            weights=self.data.astype(np.float64) ** 2,
            minlength=len(self),
        )
        self.norms = np.sqrt(squares).astype(np.float32)
        self.postings = None
        self.manifest = {
            **self.manifest,
            "gate_k": k,
            "regated_from": stored,
            "counts": {**self.manifest["counts"], "nnz": int(self.indices.size)},
        }
        self.label = f"{base.label} (re-gated at k = {k})"
