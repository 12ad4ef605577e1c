"""Conveniences of the deviation tests: one item's Exact@k / Semantic@k, and the vocabulary
statistics of a list of batches (the package streams these through its accumulators)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from lexlens.analysis.deviation.options import DEFAULT_K, DeviationOptions
from lexlens.analysis.deviation.scoring import ItemDeviation, Scorer
from lexlens.analysis.deviation.static_embeddings import StaticEmbeddings
from lexlens.analysis.deviation.vocab_stats import (
    CLOUD_TERMS,
    LAZY_RATE,
    RESERVOIR,
    VocabAccumulator,
    VocabStats,
)
from lexlens.models.base import InputError


def item_deviation(
    weights: np.ndarray,
    vocab: list[str],
    caption: list[str],
    static: StaticEmbeddings,
    k: int = DEFAULT_K,
    *,
    denominator: str = "k",
    text: str = "",
    item_id: str = "0",
) -> ItemDeviation:
    """Exact@k and Semantic@k of one (gated) vector against a caption's tokens."""
    DeviationOptions.of(k=k, denominator=denominator)
    weights = np.asarray(weights)
    idx = np.flatnonzero(weights)
    scorer = Scorer.build(vocab, static, k, denominator)
    return scorer.score(item_id, text, idx, weights[idx].astype(np.float32), caption)


def vocab_stats(
    batches: Iterable[object],
    vocab: list[str],
    *,
    top: int = CLOUD_TERMS,
    lazy_rate: float = LAZY_RATE,
    reservoir: int = RESERVOIR,
) -> VocabStats:
    """Statistics of a collection given as batches of vectors (CSR or dense rows)."""
    acc = VocabAccumulator(len(vocab), reservoir=reservoir)
    for batch in batches:
        acc.add(batch)
    if acc.n == 0:
        raise InputError("the collection holds no items")
    return acc.result(vocab, top=top, lazy_rate=lazy_rate)
