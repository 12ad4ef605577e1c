"""Items' own tokens as id rows, and Exact@k / Semantic@k of a whole batch at once.

D2S's metrics compare an item's top-k terms with its own tokens; that needs neither the
encoder's forward pass nor the whole vocabulary: a stored collection keeps each text's
input token ids (:mod:`lexlens.analysis.collections.token_ids`), and a batch of items is
scored with one sort of its non-zeros (the top k of each row) and one batched product of
the top terms' static vectors with the item's own tokens' (``B × k × L`` cosines).

The numbers are those of :meth:`.scoring.Scorer.score`, item by item: the same top-k
(weight descending, then vocabulary order, special tokens and non-positive weights left
out), the same matches (a top term that is one of the item's tokens, compared as token
strings), the same Semantic@k sum (the best cosine in ``f_enc`` of each top term that has
a static vector to any of the item's tokens that has one, clipped to [-1, 1], summed in
float64).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from lexlens.analysis.collections.token_ids import canonical_ids, vocab_positions
from lexlens.analysis.deviation.scoring import Scorer

#: Numbers in the padded own-token vectors of one block of items (``items × longest × d``,
#: float64): 2M = 16 MB, so the blocks stay in cache-sized pieces whatever the batch.
COSINE_BLOCK = 2_000_000


@dataclass(frozen=True)
class TokenRows:
    """Each item's own tokens that count (no special tokens, each once, in order) as rows
    of vocabulary ids: item ``r``'s are ``ids[indptr[r]:indptr[r + 1]]``."""

    indptr: np.ndarray  # int64 [n + 1]
    ids: np.ndarray  # int64 [total]
    vocab: list[str]

    def __len__(self) -> int:
        return len(self.indptr) - 1

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.indptr)

    def strings(self, r: int) -> list[str]:
        """Item ``r``'s tokens as strings (what a kept row lists)."""
        return [self.vocab[i] for i in self.ids[self.indptr[r] : self.indptr[r + 1]]]

    @classmethod
    def from_ids(
        cls, indptr: np.ndarray, ids: np.ndarray, scorer: Scorer, vocab: list[str]
    ) -> TokenRows:
        """Rows of raw input token ids (vocabulary positions, specials and repeats included)
        → the tokens that count, each once, in the order they first appear."""
        n, size = len(indptr) - 1, len(vocab)
        rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
        canon = canonical_ids(scorer.vocab)[ids] if ids.size else ids
        keep = ~scorer.special[canon] if canon.size else np.zeros(0, bool)
        rows, canon = rows[keep], canon[keep]
        _, first = np.unique(rows * size + canon, return_index=True)
        first.sort()  # rows ascending, then first appearance within the row
        rows, canon = rows[first], canon[first]
        out = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=n), out=out[1:])
        return cls(out, canon.astype(np.int64), vocab)

    @classmethod
    def from_strings(cls, captions: Sequence[list[str]], scorer: Scorer) -> TokenRows | None:
        """Rows of token strings (each once, no specials, as :func:`.scoring.caption_terms`
        gives them) as ids; ``None`` when a token is not in the vocabulary (it may still
        have a static vector: such items are scored one by one)."""
        positions = vocab_positions(scorer.vocab)
        try:
            ids = [positions[t] for c in captions for t in c]
        except KeyError:
            return None
        indptr = np.zeros(len(captions) + 1, dtype=np.int64)
        np.cumsum([len(c) for c in captions], out=indptr[1:])
        return cls(indptr, np.asarray(ids, dtype=np.int64), scorer.vocab)


@dataclass(frozen=True)
class BatchNumbers:
    """Per item of a batch: positive terms, matches, the Semantic@k sum, top terms without
    a static vector."""

    positive: np.ndarray  # int64 [n]
    matches: np.ndarray  # int64 [n]
    semantic_sum: np.ndarray  # float64 [n]
    no_vector: np.ndarray  # int64 [n]
    #: every item's top terms, item after item, best first: ids, weights, and where each
    #: item's start (``[n + 1]``); ``None`` when scored one by one
    top: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def top_of(self, r: int) -> tuple[np.ndarray, np.ndarray]:
        """Item ``r``'s top terms (ids, weights), best first."""
        assert self.top is not None
        ids, weights, starts = self.top
        return ids[starts[r] : starts[r + 1]], weights[starts[r] : starts[r + 1]]


def top_k_entries(matrix: sp.csr_matrix, scorer: Scorer) -> tuple[np.ndarray, ...]:
    """(row, vocabulary id, weight, rank) of every row's top-k terms, row after row, best
    first, and each row's positive-term count: positive weights, special tokens left out,
    by weight descending then id."""
    n = matrix.shape[0]
    matrix.sort_indices()  # ids ascending within each row: the ties' order below
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(matrix.indptr))
    cols, vals = matrix.indices.astype(np.int64), matrix.data
    keep = (vals > 0) & ~scorer.special[cols]
    rows, cols, vals = rows[keep], cols[keep], vals[keep]
    positive = np.bincount(rows, minlength=n).astype(np.int64)
    # A positive float32's bits order like its value: one stable sort by (row, -weight)
    # keeps equal weights in id order.
    if vals.dtype == np.float32:
        key = (rows << 32) | (0x7FFFFFFF - vals.view(np.int32).astype(np.int64))
        order = np.argsort(key, kind="stable")
    else:
        order = np.lexsort((cols, -vals, rows))
    rows, cols, vals = rows[order], cols[order], vals[order]
    starts = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(positive, out=starts[1:])
    rank = np.arange(rows.size, dtype=np.int64) - starts[rows]
    top = rank < scorer.k
    return rows[top], cols[top], vals[top], rank[top], positive


def batch_numbers(matrix: sp.csr_matrix, tokens: TokenRows, scorer: Scorer) -> BatchNumbers:
    """Exact@k's matches and Semantic@k's sum of every item of a batch (module docstring)."""
    n = matrix.shape[0]
    rows, cols, vals, rank, positive = top_k_entries(matrix, scorer)
    size = len(scorer.vocab)
    canon = canonical_ids(scorer.vocab)
    own_rows = np.repeat(np.arange(n, dtype=np.int64), tokens.lengths)
    own_keys = np.sort(own_rows * size + tokens.ids)
    top_keys = rows * size + canon[cols]
    if own_keys.size:
        at = np.minimum(np.searchsorted(own_keys, top_keys), own_keys.size - 1)
        found = own_keys[at] == top_keys
    else:
        found = np.zeros(top_keys.size, dtype=bool)
    matches = np.bincount(rows, weights=found, minlength=n).astype(np.int64)
    static_rows = scorer.static_rows[cols]
    with_vec = static_rows >= 0
    no_vector = np.bincount(rows, weights=~with_vec, minlength=n).astype(np.int64)
    semantic = _semantic_sums(rows, static_rows, own_rows, tokens, scorer, n)
    starts = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.minimum(positive, scorer.k), out=starts[1:])
    return BatchNumbers(positive, matches, semantic, no_vector, (cols, vals, starts))


def _semantic_sums(
    rows: np.ndarray,
    static_rows: np.ndarray,
    own_rows: np.ndarray,
    tokens: TokenRows,
    scorer: Scorer,
    n: int,
) -> np.ndarray:
    """Σ over each item's top terms with a static vector of the best cosine to its own
    tokens with one (0 for an item with none), as :meth:`Scorer.score` sums it.

    Items go through in blocks of similar length (shortest first), each padded to its
    longest item by repeating an item's own first token (a repeat cannot change a max)."""
    out = np.zeros(n, dtype=np.float64)
    own_static = scorer.static_rows[tokens.ids] if tokens.ids.size else tokens.ids
    has = own_static >= 0
    own_rows, own_static = own_rows[has], own_static[has]
    own_count = np.bincount(own_rows, minlength=n)
    own_start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(own_count, out=own_start[1:])
    scored = (static_rows >= 0) & (own_count[rows] > 0)
    rows, static_rows = rows[scored], static_rows[scored]
    if rows.size == 0:
        return out
    top_count = np.bincount(rows, minlength=n)
    top_start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(top_count, out=top_start[1:])
    items = np.flatnonzero(top_count)
    items = items[np.argsort(own_count[items], kind="stable")]
    vectors = _float64_vectors(scorer)
    budget = max(1, COSINE_BLOCK // vectors.shape[1])
    lo = 0
    while lo < items.size:
        reach = min(items.size - 1, lo + budget // int(own_count[items[lo]]))
        hi = min(items.size, lo + max(1, budget // int(own_count[items[reach]])))
        block = items[lo:hi]
        own = vectors[own_static[_padded(own_start[block], own_count[block])]]
        top = vectors[static_rows[_padded(top_start[block], top_count[block])]]
        # float64 products rounded once to float32: each cosine is the float32 one, whatever
        # the batch around it (a float32 product's last bit depends on the shapes).
        sims = np.matmul(top, own.transpose(0, 2, 1)).astype(np.float32)
        best = np.clip(sims.max(axis=2), -1.0, 1.0)
        real = np.arange(best.shape[1])[None, :] < top_count[block][:, None]
        # Each item's terms in rank order: summed one after another, as Scorer.score does.
        out += np.bincount(
            np.repeat(block, top_count[block]), weights=best[real].astype(np.float64), minlength=n
        )
        lo = hi
    return out


def _padded(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``[m, max(counts)]`` positions: row ``i`` holds ``starts[i] + j`` for its ``counts[i]``
    entries, then repeats its last one."""
    width = np.arange(int(counts.max()))[None, :]
    return starts[:, None] + np.minimum(width, (counts - 1)[:, None])


#: The static vectors as float64, per table (the last few kept, keyed by the table's id).
_FLOAT64: dict[int, tuple[np.ndarray, np.ndarray]] = {}


def _float64_vectors(scorer: Scorer) -> np.ndarray:
    vectors = scorer.static.vectors
    cached = _FLOAT64.get(id(vectors))
    if cached is None or cached[0] is not vectors:
        if len(_FLOAT64) >= 4:
            _FLOAT64.clear()
        cached = _FLOAT64[id(vectors)] = (vectors, vectors.astype(np.float64))
    return cached[1]


def numbers_one_by_one(
    matrix: sp.csr_matrix, captions: Sequence[list[str]], scorer: Scorer
) -> BatchNumbers:
    """The same numbers from :meth:`Scorer.score`, item by item (captions with a token
    outside the vocabulary)."""
    n = matrix.shape[0]
    positive, matches, no_vector = (np.zeros(n, np.int64) for _ in range(3))
    semantic = np.zeros(n, dtype=np.float64)
    for r, caption in enumerate(captions):
        lo, hi = matrix.indptr[r], matrix.indptr[r + 1]
        if not caption:
            positive[r] = np.count_nonzero(
                (matrix.data[lo:hi] > 0) & ~scorer.special[matrix.indices[lo:hi]]
            )
            continue
        item = scorer.score("", "", matrix.indices[lo:hi], matrix.data[lo:hi], caption, words=False)
        positive[r], matches[r] = item.positive_terms, item.matches
        semantic[r], no_vector[r] = item.semantic_sum, item.no_vector
    return BatchNumbers(positive, matches, semantic, no_vector)
