"""What trec_eval makes of judgements and runs, and the rules Lexlens follows so that its
numbers are the ones trec_eval (through ir-measures) gives for the order Lexlens shows.

Relevance. A relevance is a whole number that fits a 32-bit signed int (−2,147,483,648 to
2,147,483,647), as trec_eval and pytrec_eval store it: a larger value wraps silently there
(pytrec_eval turns a gain of 2**32 into an nDCG of 0). A file may write it as ``2`` or
``2.0``; ``0.5``, ``inf``, ``nan``, ``1e400`` and ``99999999999999999999999`` are refused.
A relevance of 0 or below means *not relevant*, everywhere: in the measures (a negative
relevance is clamped to a gain of 0 before ir-measures sees it, so it can never lower an
nDCG; the item stays judged) and in failures and blame.

Order. trec_eval ignores a run's rank column and sorts each query's items by score, ties by
docid (descending), whatever order the run lists them in; it reads scores as C floats, so two
scores equal in float32 are a tie there. (ir-measures also splits one ranking: it computes
RR@10 with its msmarco provider, which orders ties otherwise, and nDCG, R@k and AP with
pytrec_eval.) Lexlens's rankings break ties by
collection row, as search does, and a run read from a file keeps its tied items in the order
listed; so the measures are handed each ranking with strictly decreasing scores
(:func:`rank_scores`) and a written run gets strictly decreasing scores
(:func:`strictly_decreasing`): every measure, the first relevant rank and the run file agree
on the one order shown.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from numbers import Integral, Real

import numpy as np

from lexlens.models.base import InputError

#: The smallest and largest relevance accepted (a 32-bit signed int, trec_eval's).
MIN_RELEVANCE = -(2**31)
MAX_RELEVANCE = 2**31 - 1
#: The largest float32: trec_eval reads a run's scores as C floats.
FLOAT32_MAX = float(np.finfo(np.float32).max)
#: The longest ranking whose ranks are all distinct as float32 scores (2**24).
MAX_RANKED = 2**24
#: A whole number as a file writes it: ``3``, ``-1``, ``+2``, ``1.0``.
_WHOLE = re.compile(r"[+-]?\d+(?:\.0*)?")


def _in_range(value: int) -> bool:
    return MIN_RELEVANCE <= value <= MAX_RELEVANCE


def _range() -> str:
    return f"outside trec_eval's range ({MIN_RELEVANCE:,} to {MAX_RELEVANCE:,})"


def relevance_from_text(text: str) -> int:
    """The relevance a qrels field writes; ``ValueError`` (its message says why) otherwise."""
    field = text.strip()
    if not _WHOLE.fullmatch(field):
        raise ValueError(f"relevance {text!r} is not a whole number")
    value = int(field.split(".", 1)[0])
    if not _in_range(value):
        raise ValueError(f"relevance {text!r} is {_range()}")
    return value


def relevance_value(value: object, name: str) -> int:
    """A relevance given through the API (an int, or a float holding a whole number),
    refused with an :class:`InputError` naming ``name`` otherwise."""
    if type(value) is int and MIN_RELEVANCE <= value <= MAX_RELEVANCE:
        return value  # the common case, read from a file
    if isinstance(value, bool) or not isinstance(value, Real):
        raise InputError(f"{name}: relevance must be a whole number, not {value!r}")
    if not isinstance(value, Integral):
        number = float(value)
        if not math.isfinite(number) or not number.is_integer():
            raise InputError(f"{name}: relevance must be a whole number, not {value!r}")
        value = int(number)
    value = int(value)
    if not _in_range(value):
        raise InputError(f"{name}: relevance {value} is {_range()}")
    return value


def gain(relevance: int) -> int:
    """The gain the measures use: the relevance, or 0 for a non-relevant (0 or negative) one."""
    return max(0, int(relevance))


def is_relevant(relevance: int) -> bool:
    """Relevant means a relevance of 1 or more (trec_eval's default relevance level)."""
    return relevance > 0


def score_value(value: object, name: str) -> float:
    """A run's score given through the API: a finite real number, refused naming ``name``."""
    if type(value) is float and math.isfinite(value):
        return value  # the common case, read from a file
    if isinstance(value, bool) or not isinstance(value, Real):
        raise InputError(f"{name}: a score must be a number, not {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise InputError(f"{name}: score {value!r} is not a finite number")
    return number


def rank_scores(items: Sequence[str]) -> dict[str, float]:
    """Scores for the measures that say exactly the order ``items`` (best first) are in:
    ``n, n − 1, …, 1`` (whole numbers, distinct in float32 up to :data:`MAX_RANKED` items: no
    tie for trec_eval to re-sort)."""
    n = len(items)
    if n > MAX_RANKED:
        raise InputError(f"a ranking of {n:,} items: at most {MAX_RANKED:,} can be evaluated")
    return {item: float(n - i) for i, item in enumerate(items)}


def strictly_decreasing(scores: Sequence[float]) -> list[np.float32]:
    """``scores`` (best first, non-increasing, finite) as trec_eval reads them — C floats
    (float32): two doubles closer than float32's precision are a tie there — and strictly
    decreasing: an item equal (in float32) to the one above it gets the next float32 below
    that one's, so the k-th item of a tie moves by k float32 units in the last place; the
    order is kept. Written as ``str`` of each (the shortest text that reads back the same)."""
    out: list[np.float32] = []
    previous = math.inf
    for score in scores:
        value = float(score)
        if not math.isfinite(value):
            raise InputError(f"a run's score {score!r} is not a finite number")
        if value > previous:
            raise InputError("a run's items are not in decreasing score order")
        previous = value
        single = np.float32(value) if abs(value) <= FLOAT32_MAX else np.float32(math.nan)
        if not np.isfinite(single):
            raise InputError(f"a run's score {score!r} is beyond float32, as trec_eval reads it")
        if out and single >= out[-1]:
            single = np.nextafter(out[-1], np.float32(-np.inf))
        out.append(single)
    return out


def has_ties(scores: Sequence[float]) -> bool:
    """Whether two neighbouring scores of a ranking are equal."""
    return any(a == b for a, b in zip(scores, scores[1:], strict=False))
