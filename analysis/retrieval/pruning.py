"""Exact dynamic pruning of a query's top n over inverted postings: MaxScore.

MaxScore (Turtle & Flood 1995, "Query evaluation: strategies and optimizations") with
per-term upper bounds: when every weight and query weight is non-negative, an item's score
``Σ_t q_t w_it`` is at least any partial sum of it, so the ``n``-th best lower bound found
among distinct items is a valid floor ``θ`` of the top ``n``'s threshold; and an item that
holds only terms whose upper bounds ``q_t · max_i w_it`` sum below ``θ`` cannot reach the
top. Those *non-essential* terms' postings are never accumulated: only the items on the
other (*essential*) terms' postings are candidates, and the non-essential terms' weights are
looked up for the few candidates that remain (binary search in their item-sorted postings),
candidates dropping out as soon as their upper bound falls below the floor.

Every bound carries the postings' rounding (float16 quantisation of a stored index, float64
sums), so pruning only removes items whose *exact* score is below the threshold; the
candidates left are rescored exactly by the caller. The per-term maxima are read once per
index (:func:`term_maxima`) from the postings themselves, so they are never stale.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

#: Postings read at once while the per-term maxima are computed (entries).
MAXIMA_CHUNK = 1_000_000
#: Terms with the largest upper bounds whose own n-th best posting seeds the floor.
SEED_TERMS = 4
#: Postings of a seed term whose n-th best contribution is taken (a prefix of a long list
#: gives a lower floor, still a valid one, in bounded time).
SEED_POSTINGS = 32768
#: Listings of the essential postings sampled to raise the floor before candidates are
#: made distinct.
SAMPLE_LISTINGS = 4096
#: MaxScore's look-ups are used when the non-essential terms hold at least this share of
#: the query's postings (else every term is accumulated, cheaper per posting: measured on
#: 1,000,000 items, skipping a fifth of the postings cost more in look-ups than it saved).
LOOKUP_SHARE = 0.5
#: Listings made distinct by a sort up to this many (else through an item-indexed table).
DISTINCT_BY_SORT = 2048
#: MaxScore's non-essential terms are those whose bounds sum below this share of the floor
#: (1: every term MaxScore allows; less keeps the candidates to look up few).
LOOKUP_FLOOR = 1.0
#: A margin on every upper bound for the rounding of the bounds' own arithmetic.
_MARGIN = 1.0 + 2.0**-40

_MAXIMA: weakref.WeakKeyDictionary[Any, np.ndarray] = weakref.WeakKeyDictionary()

#: ``read(name, starts, stops)``: a postings array's ranges, concatenated.
Read = Callable[[str, np.ndarray, np.ndarray], np.ndarray]


def term_maxima(postings: Any, read: Read) -> np.ndarray:
    """Each term's largest ``|weight|`` in its postings (float64, the postings' units; 0 for
    an unused term), computed once per postings in chunks of :data:`MAXIMA_CHUNK` (memory
    O(chunk)) and kept while the postings live."""
    cached = _MAXIMA.get(postings)
    if cached is not None:
        return cached
    indptr = np.asarray(postings.indptr, np.int64)
    terms = indptr.size - 1
    maxima = np.zeros(terms)
    total = int(indptr[-1])
    for a in range(0, total, MAXIMA_CHUNK):
        b = min(total, a + MAXIMA_CHUNK)
        magnitude = _magnitudes(read("weights", np.array([a]), np.array([b])))
        first = int(np.searchsorted(indptr, a, side="right")) - 1  # the term holding entry a
        owners = np.arange(first, int(np.searchsorted(indptr, b, side="left")))
        owners = owners[indptr[owners + 1] > indptr[owners]]  # the non-empty terms overlapping
        cuts = np.maximum(indptr[owners], a) - a
        part = np.maximum.reduceat(magnitude, cuts).astype(np.float64)
        np.maximum.at(maxima, owners, part)
    maxima = _values(maxima.astype(_magnitudes(postings.weights[:0]).dtype))
    _MAXIMA[postings] = maxima
    return maxima


def _magnitudes(weights: np.ndarray) -> np.ndarray:
    """``|w|`` in an order-preserving form: float16 as the bits of ``|w|`` (an unsigned
    integer that orders like the value), others as their absolute value."""
    if weights.dtype == np.float16:
        return weights.view(np.uint16) & np.uint16(0x7FFF)
    return np.abs(weights)


def _values(magnitudes: np.ndarray) -> np.ndarray:
    """The values (float64) of :func:`_magnitudes` (float16 bit patterns read back)."""
    if magnitudes.dtype == np.uint16:
        return magnitudes.view(np.float16).astype(np.float64)
    return magnitudes.astype(np.float64)


@dataclass(frozen=True)
class Rounding:
    """The error of an accumulated partial score ``ŝ`` over any subset of the query's
    terms against its exact value: ``|exact − ŝ| ≤ rel · ŝ + absolute`` (``ŝ ≥ 0``); and each
    posting's error against its exact weight: ``|w − scale · w̃| ≤ r16 · scale · w̃ + a16``."""

    rel: float
    absolute: float
    r16: float
    a16: float


def maxscore_candidates(
    size: int,
    postings: Any,
    q: np.ndarray,
    terms: np.ndarray,
    n: int,
    rounding: Rounding,
    maxima: np.ndarray,
    read: Read,
) -> np.ndarray | None:
    """The distinct rows whose exact score could still reach the top ``n``, for a query with
    positive weights over non-negative postings (MaxScore); ``None`` when a term's postings
    hold a weight above its kept maximum (the maxima are stale: nothing was pruned by them,
    and they are dropped to be read again)."""
    indptr = postings.indptr
    starts, stops = indptr[terms], indptr[terms + 1]
    used = stops > starts
    terms, starts, stops = terms[used], starts[used], stops[used]
    if terms.size == 0:
        return np.zeros(0, np.int64)
    read, (starts, stops) = _held(read, starts, stops), _local(starts, stops)
    rounding = _in_float32(rounding, terms.size)
    coefficient = q[terms].astype(np.float64) * postings.scale
    ceiling = (
        coefficient * maxima[terms] * (1 + rounding.r16) + q[terms] * rounding.a16
    ) * _MARGIN  # q_t · max_i w_it, exactly bounded
    floor = _seed_floor(coefficient, starts, stops, ceiling, n, rounding, read)
    ascending = np.argsort(ceiling, kind="stable")
    below = np.cumsum(ceiling[ascending]) * _MARGIN < floor * LOOKUP_FLOOR
    lookup = ascending[below]  # non-essential terms
    lengths = stops - starts
    if lengths[lookup].sum() < LOOKUP_SHARE * lengths.sum():
        lookup = lookup[:0]  # too few postings skipped to pay for the look-ups
    if not _hold(postings, maxima[terms[lookup]], starts[lookup], stops[lookup], read):
        _MAXIMA.pop(postings, None)
        return None
    essential = np.setdiff1d(np.arange(terms.size), lookup)
    rows, partial = _accumulated(postings, size, coefficient, starts, stops, essential, read)
    rest = float(ceiling[lookup].sum()) * _MARGIN
    floor = max(floor, _sampled_floor(rows, partial, rounding, n, essential.size))
    reach = np.flatnonzero(partial >= _least_reaching(floor - rest, rounding))
    rows, partial = _distinct(postings, size, rows[reach], partial[reach])
    if lookup.size and rows.size > n:
        partial = partial + _looked_up(
            postings, size, rows, coefficient, starts, stops, lookup, read
        )
        rest = 0.0
    if rows.size > n:
        err = rounding.rel * partial + rounding.absolute
        rows = rows[partial + err + rest >= max(floor, _nth(partial - err, n))]
    return rows.astype(np.int64)


def _in_float32(rounding: Rounding, terms: int) -> Rounding:
    """The bounds of partial scores summed in float32 (products and sums of ``terms``
    postings: 2·(T + 3) roundings of 2^-24, doubled), with the postings' own error."""
    rel = (1 + 4 * (terms + 3) * 2.0**-24) * (1 + rounding.r16) - 1
    return Rounding(
        max(rel, rounding.rel), rounding.absolute * (1 + rel), rounding.r16, rounding.a16
    )


def _held(read: Read, starts: np.ndarray, stops: np.ndarray) -> Read:
    """A reader of the query terms' postings read once (each array in one pass), in the
    coordinates of :func:`_local`; adjacent ranges are one slice."""
    arrays = {name: np.asarray(read(name, starts, stops)) for name in ("items", "weights")}

    def local(name: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        array = arrays[name]
        if a.size > 1:
            joined = np.flatnonzero(a[1:] != b[:-1])  # a range not continuing the previous
            a, b = a[np.r_[0, joined + 1]], b[np.r_[joined, a.size - 1]]
        if a.size == 1:
            return array[int(a[0]) : int(b[0])]
        return np.concatenate([array[x:y] for x, y in zip(a.tolist(), b.tolist(), strict=True)])

    return local


def _local(starts: np.ndarray, stops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each term's range in the concatenation of the query terms' postings."""
    ends = np.cumsum(stops - starts)
    return ends - (stops - starts), ends


def _hold(
    postings: Any, maxima: np.ndarray, starts: np.ndarray, stops: np.ndarray, read: Read
) -> bool:
    """Whether every weight of the given terms' postings is at most its term's maximum (the
    terms whose maxima decide what is skipped: each check is one pass over 2-byte weights)."""
    for maximum, a, b in zip(maxima.tolist(), starts.tolist(), stops.tolist(), strict=True):
        largest = _magnitudes(read("weights", np.array([a]), np.array([b]))).max()
        if float(_values(np.array([largest]))[0]) > maximum:
            return False
    return True


def _seed_floor(
    coefficient: np.ndarray,
    starts: np.ndarray,
    stops: np.ndarray,
    ceiling: np.ndarray,
    n: int,
    rounding: Rounding,
    read: Read,
) -> float:
    """A first floor of the threshold: the best, over the terms with the largest upper
    bounds, of a term's own ``n``-th best contribution among its first
    :data:`SEED_POSTINGS` postings (those ``n`` items score at least that); −inf when none
    of them lists ``n`` items."""
    floor = -np.inf
    lengths = np.minimum(stops - starts, SEED_POSTINGS)
    for term in np.argsort(-ceiling, kind="stable")[:SEED_TERMS]:
        if lengths[term] < n:
            continue
        first = starts[term : term + 1]
        weights = _magnitudes(read("weights", first, first + lengths[term]))
        best = float(_values(np.partition(weights, weights.size - n)[weights.size - n :][:1])[0])
        value = coefficient[term] * best
        floor = max(floor, value - (rounding.rel * value + rounding.absolute))
    return floor


def _accumulated(
    postings: Any,
    size: int,
    coefficient: np.ndarray,
    starts: np.ndarray,
    stops: np.ndarray,
    chosen: np.ndarray,
    read: Read,
) -> tuple[np.ndarray, np.ndarray]:
    """The listings of the ``chosen`` terms' postings (an item once per term it holds) and
    each listing's item's partial score over those terms (summed in float32, in place in an
    item-indexed table lent for the query and left zeroed: half the memory traffic of
    float64; :func:`_in_float32` bounds its rounding)."""
    if chosen.size == 0:
        return np.zeros(0, np.int64), np.zeros(0)
    chosen = np.sort(chosen)
    a, b = starts[chosen], stops[chosen]
    rows = read("items", a, b)
    scaled = np.repeat(coefficient[chosen].astype(np.float32), b - a)
    weights = np.multiply(read("weights", a, b), scaled, dtype=np.float32)
    rows = rows.astype(np.intp)
    with _Table(postings, size, np.float32) as accumulator:
        try:
            np.add.at(accumulator, rows, weights)
            partial = accumulator[rows].astype(np.float64)
        finally:
            accumulator[rows] = 0.0
    return rows, partial


def _looked_up(
    postings: Any,
    size: int,
    rows: np.ndarray,
    coefficient: np.ndarray,
    starts: np.ndarray,
    stops: np.ndarray,
    chosen: np.ndarray,
    read: Read,
) -> np.ndarray:
    """The ``chosen`` terms' contributions ``c_t · w̃_it`` to each of the distinct ``rows``
    (0 where a term does not list the item): each term's items mapped to their slot among
    ``rows`` through an item-indexed table, one pass over its postings."""
    out = np.zeros(rows.size)
    with _Table(postings, size, np.int32) as slot:
        slot[rows] = np.arange(rows.size, dtype=np.int32)
        try:
            for term in chosen:
                a, b = starts[term : term + 1], stops[term : term + 1]
                where = slot[read("items", a, b)]
                hit = np.flatnonzero(where >= 0)
                if hit.size:
                    weights = read("weights", a, b)[hit].astype(np.float64)
                    out[where[hit]] += coefficient[term] * weights
        finally:
            slot[rows] = -1
    return out


def _distinct(
    postings: Any, size: int, rows: np.ndarray, values: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Each item of the listings ``rows`` once, with its value (every listing of an item
    carries the same): a sort when few, else the last listing written to an item-indexed
    table."""
    if rows.size <= DISTINCT_BY_SORT:
        rows, first = np.unique(rows, return_index=True)
        return rows, values[first]
    with _Table(postings, size, np.int32) as slot:
        order = np.arange(rows.size, dtype=np.int32)
        try:
            slot[rows] = order
            keep = slot[rows] == order
        finally:
            slot[rows] = -1
    return rows[keep], values[keep]


class _Table:
    """An item-indexed table (int32: −1, float32: 0 everywhere between uses; its user
    restores what it changed), kept per postings and dtype and lent to one search at a time
    (another search meanwhile gets a fresh one)."""

    _tables: weakref.WeakKeyDictionary[Any, dict[Any, tuple[threading.Lock, np.ndarray]]] = (
        weakref.WeakKeyDictionary()
    )

    def __init__(self, owner: Any, size: int, dtype: Any) -> None:
        blank = -1 if np.dtype(dtype) == np.int32 else 0
        tables = self._tables.setdefault(owner, {})
        kept = tables.get(np.dtype(dtype))
        if kept is None or kept[1].size != size:
            kept = (threading.Lock(), np.full(size, blank, dtype))
            tables[np.dtype(dtype)] = kept
        self.lock, self.table = kept
        self.held = self.lock.acquire(blocking=False)
        if not self.held:
            self.table = np.full(size, blank, dtype)

    def __enter__(self) -> np.ndarray:
        return self.table

    def __exit__(self, *exc: object) -> None:
        if self.held:
            self.lock.release()


def _nth(values: np.ndarray, n: int) -> float:
    """The ``n``-th largest of ``values`` (−inf when there are fewer)."""
    if values.size < n:
        return -np.inf
    return float(np.partition(values, values.size - n)[values.size - n])


def _least_reaching(target: float, rounding: Rounding) -> float:
    """A partial score at or below the least ``ŝ`` with ``ŝ + rel·ŝ + absolute ≥ target``
    (lowered by a margin for this division's own rounding): every listing whose upper bound
    reaches ``target`` has ``ŝ`` at or above it."""
    if not np.isfinite(target):
        return -np.inf
    least = (target - rounding.absolute) / (1 + rounding.rel)
    return least - abs(least) * 2.0**-40 - 1e-300


def _sampled_floor(
    rows: np.ndarray, partial: np.ndarray, rounding: Rounding, n: int, terms: int
) -> float:
    """A value at or below the ``n``-th best lower bound among distinct items: the ``n``-th
    best of the distinct items among a sample's best listings (each item is listed at most
    ``terms`` times, so n·terms listings name at least ``n``); −inf when the sample names
    fewer than ``n``."""
    if rows.size == 0:
        return -np.inf
    picked = np.arange(0, rows.size, max(1, rows.size // max(SAMPLE_LISTINGS, 8 * n)))
    values = partial[picked]
    low = values - (rounding.rel * values + rounding.absolute)
    for best in sorted({min(picked.size, 2 * n), min(picked.size, n * max(terms, 1))}):
        top = np.argpartition(low, picked.size - best)[picked.size - best :]
        _, first = np.unique(rows[picked[top]], return_index=True)
        if first.size >= n:
            return _nth(low[top[first]], n)
    return -np.inf
