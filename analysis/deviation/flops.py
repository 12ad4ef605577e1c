"""FLOPs, the co-activation of sparse vectors, from per-dimension activation counts.

Two numbers of one set, both reported and each labelled (:data:`FLOPS_LABEL`,
:data:`PAIRS_LABEL`): *FLOPs* as SPLADE (after Paria et al.) and D2S define it, ``Σ_j p̄_j²``
with ``p̄_j`` the share of items activating dimension j — every ordered pair of items, a
self-pair included (D2S's ``(1/(|C||I|)) Σ_c Σ_i s_c⁰·s_i⁰`` with C = I) —; and the mean
number of dimensions two *different* items share, the self-pairs left out (``n(n−1)``
pairs), which a small set's self-pairs do not inflate. Between two sets (captions × images)
there is no self-pair: D2S's FLOPs."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

#: How a display names ``flops_with_self_pairs`` and ``flops`` of a set.
FLOPS_LABEL = "FLOPs Σⱼ p̄ⱼ² (SPLADE's and D2S's: every pair, self-pairs included)"
PAIRS_LABEL = "co-activation of two different items (self-pairs left out)"


def activation_counts(batch: object, vocab_size: int | None = None) -> np.ndarray:
    """Per dimension, how many rows of ``batch`` activate it (``!= 0``)."""
    matrix = batch.tocsr() if sp.issparse(batch) else sp.csr_matrix(np.atleast_2d(batch))
    matrix = matrix.copy()
    matrix.eliminate_zeros()
    size = vocab_size or matrix.shape[1]
    return np.bincount(matrix.indices, minlength=size).astype(np.int64)


def flops_within(counts: np.ndarray, n: int) -> float | None:
    """Mean shared active dimensions over pairs of *different* items of one set.

    ``Σ_{a≠b} s_a⁰·s_b⁰ = Σ_j n(j)² − Σ_j n(j)``, over ``n(n−1)`` ordered pairs;
    ``None`` for fewer than two items.
    """
    if n < 2:
        return None
    c = counts.astype(np.float64)
    return float((np.dot(c, c) - c.sum()) / (n * (n - 1)))


def flops_with_self_pairs(counts: np.ndarray, n: int) -> float | None:
    """The same over all ``n²`` pairs, self-pairs included (``Σ_j p(j)²``), for comparison."""
    if n < 1:
        return None
    c = counts.astype(np.float64)
    return float(np.dot(c, c) / (n * n))


def flops_between(counts_a: np.ndarray, n_a: int, counts_b: np.ndarray, n_b: int) -> float | None:
    """D2S's FLOPs: ``(1/(|C||I|)) Σ_c Σ_i s_c⁰·s_i⁰ = Σ_j n_C(j) n_I(j) / (|C||I|)``."""
    if n_a < 1 or n_b < 1:
        return None
    return float(np.dot(counts_a.astype(np.float64), counts_b.astype(np.float64)) / (n_a * n_b))


def flops(a: np.ndarray, b: np.ndarray | None = None) -> float | None:
    """FLOPs of dense row sets: within ``a`` (no self-pairs), or between ``a`` and ``b``."""
    ca, na = activation_counts(a), np.atleast_2d(a).shape[0]
    if b is None:
        return flops_within(ca, na)
    return flops_between(ca, na, activation_counts(b, ca.shape[0]), np.atleast_2d(b).shape[0])
