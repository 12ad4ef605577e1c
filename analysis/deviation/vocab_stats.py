"""Vocabulary statistics of a collection (VDR App. D dataset view), streamed over CSR batches.

For every term of the vocabulary, over the ``N`` items of a collection:

- ``mean_weight``: the mean of its weight over all items (zeros included), the quantity
  VDR App. D averages and shows as a top-100 word cloud;
- ``activation_rate``: the share of items where it is active (weight ``!= 0``, D2S's
  definition of an active dimension);
- ``mean_when_active``, ``max_weight``, ``min_active``: its weights where it is active;
- a distribution of its *active* weights for box plots (see below).

**Laziness.** A term active in at least ``lazy_rate`` of the items (default 0.9: nine items
in ten) is flagged *lazy*: VDR App. D calls dimensions that are on for nearly every input
"disentanglement laziness" (the model escapes into a few always-on dimensions). Special and
``[unused]`` tokens are never listed (they are not terms), nor drawn in the cloud.

**Bounded memory.** :class:`VocabAccumulator` keeps O(|V|) sums and counts, plus a reservoir
of at most ``reservoir`` active weights per term (Vitter's algorithm R). The reservoir's
random slot for the ``t``-th active weight of term ``j`` is a fixed hash of ``(j, t)``, so the
result depends only on the order of the items, never on how they were cut into batches;
while a term is active in at most ``reservoir`` items its distribution is exact.

**Why box plots of active weights.** A sparse encoder gives most terms a zero weight for most
items (``cat`` is active for one caption in ten), so a box over all items sits on a flat line
at 0. The boxes show each term's weights where it is active; its activation rate is shown
beside it (the share of items the box speaks for).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from lexlens.analysis.core.results import Record
from lexlens.analysis.core.vocabulary import special_mask
from lexlens.models.base import InputError

#: A term active in at least this share of the items is flagged lazy.
LAZY_RATE = 0.9
#: Active weights kept per term for its distribution.
RESERVOIR = 128
#: Terms in the dataset cloud (VDR App. D shows the top 100).
CLOUD_TERMS = 100

_MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """A fixed 64-bit mixing function (SplitMix64's finaliser), vectorised."""
    with np.errstate(over="ignore"):
        z = (x + np.uint64(0x9E3779B97F4A7C15)) & _MASK64
        z = ((z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & _MASK64
        z = ((z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & _MASK64
        return z ^ (z >> np.uint64(31))


def as_csr(batch: object, vocab_size: int) -> sp.csr_matrix:
    """A batch of vectors (CSR, any scipy sparse, or a dense ``[n, |V|]`` array) as CSR."""
    matrix = batch.tocsr() if sp.issparse(batch) else sp.csr_matrix(np.atleast_2d(batch))
    if matrix.shape[1] != vocab_size:
        raise InputError(
            f"vectors have {matrix.shape[1]} dimensions but the vocabulary has {vocab_size}"
        )
    return matrix


@dataclass
class VocabAccumulator:
    """Running per-term sums, counts, extremes and reservoirs over batches of items."""

    vocab_size: int
    reservoir: int = RESERVOIR
    seed: int = 0
    n: int = 0
    sums: np.ndarray = field(init=False, repr=False)
    counts: np.ndarray = field(init=False, repr=False)
    maxima: np.ndarray = field(init=False, repr=False)
    minima: np.ndarray = field(init=False, repr=False)
    samples: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.reservoir < 1:
            raise InputError("the reservoir must keep at least one value per term")
        v = self.vocab_size
        self.sums = np.zeros(v, dtype=np.float64)
        self.counts = np.zeros(v, dtype=np.int64)
        self.maxima = np.full(v, -np.inf, dtype=np.float64)
        self.minima = np.full(v, np.inf, dtype=np.float64)
        self.samples = np.zeros((v, self.reservoir), dtype=np.float32)

    def add(self, batch: object) -> None:
        """Fold a batch of items (rows) into the statistics."""
        matrix = as_csr(batch, self.vocab_size)
        active = matrix.data != 0
        cols, vals = matrix.indices[active], matrix.data[active]
        # Item order within each term: sort by (term, row); CSR holds the rows in order.
        order = np.argsort(cols, kind="stable")
        cols, vals = cols[order].astype(np.int64), vals[order].astype(np.float64)
        batch_counts = np.bincount(cols, minlength=self.vocab_size)
        self.sums += np.bincount(cols, weights=vals, minlength=self.vocab_size)
        if len(cols):
            starts = np.flatnonzero(np.r_[True, cols[1:] != cols[:-1]])
            terms = cols[starts]
            np.maximum.at(self.maxima, terms, np.maximum.reduceat(vals, starts))
            np.minimum.at(self.minima, terms, np.minimum.reduceat(vals, starts))
            # t: 0-based index of each value among all active values of its term so far.
            first = np.searchsorted(cols, cols, side="left")
            t = self.counts[cols] + (np.arange(len(cols)) - first)
            fill = t < self.reservoir
            self.samples[cols[fill], t[fill]] = vals[fill]
            if not fill.all():
                tc, cc, vc = t[~fill], cols[~fill], vals[~fill]
                key = (cc.astype(np.uint64) << np.uint64(32)) ^ tc.astype(np.uint64)
                slot = _splitmix64(key ^ np.uint64(self.seed)) % (tc + 1).astype(np.uint64)
                keep = slot < np.uint64(self.reservoir)
                # Later values of a term come later in the arrays: the last write wins, as
                # in the sequential algorithm.
                self.samples[cc[keep], slot[keep].astype(np.int64)] = vc[keep].astype(np.float32)
        self.counts += batch_counts
        self.n += matrix.shape[0]

    def distribution(self, term: int) -> np.ndarray:
        """The kept active weights of ``term`` (all of them while it is active ≤ reservoir)."""
        return self.samples[term, : min(int(self.counts[term]), self.reservoir)].copy()

    def result(
        self,
        vocab: list[str],
        *,
        top: int = CLOUD_TERMS,
        lazy_rate: float = LAZY_RATE,
    ) -> VocabStats:
        """The statistics: top terms by mean weight, lazy terms, distributions."""
        return vocab_stats_of(self, vocab, top=top, lazy_rate=lazy_rate)


@dataclass(frozen=True)
class TermStats(Record):
    """One term's statistics over a collection."""

    token: str
    index: int
    mean_weight: float
    activation_rate: float
    mean_when_active: float
    max_weight: float
    min_active: float
    active_items: int
    lazy: bool
    #: Five-number summary of its active weights (min, q1, median, q3, max) from the
    #: reservoir, and how many values it rests on.
    quartiles: list[float]
    sampled: int


@dataclass(frozen=True)
class VocabStats(Record):
    """Vocabulary statistics of a collection: the dataset view of VDR App. D."""

    n: int
    lazy_rate: float
    reservoir: int
    top_terms: list[TermStats]  # by mean weight, best first
    lazy_terms: list[TermStats]  # activation rate ≥ lazy_rate, most active first
    active_terms: int  # terms active for at least one item
    mean_active_per_item: float
    #: Active weights kept per top term (for box plots; not in the JSON).
    distributions: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict:
        """The JSON document (written by hand: the lazy terms are listed by name only)."""
        return {
            "n": self.n,
            "lazy_rate": self.lazy_rate,
            "reservoir": self.reservoir,
            "active_terms": self.active_terms,
            "mean_active_per_item": self.mean_active_per_item,
            "top_terms": [t.to_dict() for t in self.top_terms],
            "lazy_terms": [t.token for t in self.lazy_terms],
        }


def _quartiles(values: np.ndarray) -> list[float]:
    if values.size == 0:
        return []
    return [float(x) for x in np.quantile(values.astype(np.float64), [0, 0.25, 0.5, 0.75, 1])]


def vocab_stats_of(
    acc: VocabAccumulator, vocab: list[str], *, top: int = CLOUD_TERMS, lazy_rate: float = LAZY_RATE
) -> VocabStats:
    """Read a :class:`VocabStats` off an accumulator."""
    if len(vocab) != acc.vocab_size:
        raise InputError(f"vocabulary of {len(vocab)} terms for {acc.vocab_size}-dim vectors")
    if not 0 < lazy_rate <= 1:
        raise InputError("the laziness threshold is a share of items in (0, 1]")
    if top < 1:
        raise InputError("show at least one top term")
    n = max(acc.n, 1)
    mean = acc.sums / n
    rate = acc.counts / n
    eligible = ~special_mask(vocab)

    def stats(j: int) -> TermStats:
        count = int(acc.counts[j])
        values = acc.distribution(j)
        return TermStats(
            token=vocab[j],
            index=j,
            mean_weight=float(mean[j]),
            activation_rate=float(rate[j]),
            mean_when_active=float(acc.sums[j] / count) if count else 0.0,
            max_weight=float(acc.maxima[j]) if count else 0.0,
            min_active=float(acc.minima[j]) if count else 0.0,
            active_items=count,
            lazy=bool(acc.n and rate[j] >= lazy_rate),
            quartiles=_quartiles(values),
            sampled=int(values.size),
        )

    score = np.where(eligible & (acc.sums > 0), mean, -np.inf)
    order = np.lexsort((np.arange(len(vocab)), -score))  # mean desc, then index
    chosen = [int(j) for j in order[:top] if np.isfinite(score[j])]
    top_terms = [stats(j) for j in chosen]
    lazy_idx = np.flatnonzero(eligible & (rate >= lazy_rate) & (acc.counts > 0))
    lazy_idx = lazy_idx[np.lexsort((lazy_idx, -rate[lazy_idx]))]
    return VocabStats(
        n=acc.n,
        lazy_rate=lazy_rate,
        reservoir=acc.reservoir,
        top_terms=top_terms,
        lazy_terms=[stats(int(j)) for j in lazy_idx],
        active_terms=int(np.count_nonzero(acc.counts[eligible])),
        mean_active_per_item=float(acc.counts.sum() / n),
        distributions={t.token: acc.distribution(t.index) for t in top_terms},
    )
