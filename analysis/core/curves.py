"""The measures of faithfulness, the same for every explanation: comprehensiveness and the
area over the perturbation curve (AOPC), each against a seeded random baseline.

An explanation ranks parts of the input (query words, image cells, words of a text). The
model is run again on the input with the top parts removed, and the drop of its output
``f`` is measured:

- **comprehensiveness** (DeYoung et al. 2020, "ERASER: A Benchmark to Evaluate Rationalized
  NLP Models", §4): ``f(x) − f(x \\ r)`` for the explanation's parts ``r``; Lexlens reports it
  as a share of ``f(x)`` (``1`` when the output drops to 0, above 1 when it changes sign);
- **AOPC** (Samek et al. 2017, "Evaluating the visualization of what a deep neural network
  has learned", eq. 12; DeYoung et al. 2020 use it for comprehensiveness over bins): with
  ``x^(k)`` the input with the explanation's first ``k`` parts removed,
  ``AOPC = 1/(K+1) · Σ_{k=0..K} (f(x^(0)) − f(x^(k)))``. Higher: the parts the explanation
  puts first move the model most. Lexlens divides each drop by ``f(x^(0))`` so the curves
  of different inputs average (``normalized``), and keeps the raw drop beside it;
- **insertion AOPC** (Petsiuk et al. 2018, "RISE", deletion and insertion games): from the
  baseline ``x'``, the first ``k`` parts put back: ``1/(K+1) · Σ_k (f(x^(+k)) − f(x'))``.

The random baseline removes the same number of parts drawn at random (uniformly, without
replacement), averaged over seeded draws; a random *order* is a seeded permutation, and the
first ``n`` parts of a uniform random permutation are a uniform random ``n``-subset, so one
set of permutations serves both.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np

from lexlens.analysis.core.results import Record

#: Says in every result where its numbers come from: the model run on the edited input.
MEASURED_BY = "re-encoding"


def aopc(curve: np.ndarray | list[float]) -> float:
    """``1/(K+1) · Σ_{k=0..K} (curve[0] − curve[k])`` (Samek et al. 2017): the mean drop of
    a deletion curve ``curve[k] = f(x^(k))``, ``curve[0]`` the untouched input."""
    values = np.asarray(curve, dtype=np.float64)
    if values.size == 0:
        return 0.0
    return float(np.mean(values[0] - values))


def insertion_aopc(curve: np.ndarray | list[float]) -> float:
    """``1/(K+1) · Σ_{k=0..K} (curve[k] − curve[0])``: the mean gain of an insertion curve,
    ``curve[0]`` the baseline."""
    values = np.asarray(curve, dtype=np.float64)
    if values.size == 0:
        return 0.0
    return float(np.mean(values - values[0]))


def share(drop: float, whole: float) -> float | None:
    """``drop / whole`` (``None`` when ``whole`` is 0: nothing to take a share of)."""
    return None if whole == 0 else float(drop / whole)


def rng_for(seed: int, *key: str | int) -> np.random.Generator:
    """A generator fixed by ``seed`` and the input's key (a query id, a text): the same draws
    for the same input whatever else is measured beside it."""
    parts = [int(seed)] + [zlib.crc32(str(k).encode("utf-8")) for k in key]
    return np.random.default_rng(np.random.SeedSequence(parts))


def permutations(n: int, draws: int, rng: np.random.Generator) -> list[list[int]]:
    """``draws`` random orders of ``range(n)``."""
    return [rng.permutation(n).tolist() for _ in range(draws)]


@dataclass(frozen=True)
class DeletionCurve(Record):
    """One explanation's deletion (or insertion) curve against random orders.

    ``explained[k]`` is the model's output with the explanation's first ``k`` parts removed
    (``k = 0``: the input as given), ``random[k]`` the mean over the random orders;
    ``parts`` names the removed parts in the explanation's order. ``aopc``/``random_aopc``
    are in the output's units, ``normalized_*`` divided by ``explained[0]`` (``None`` when it
    is 0); an insertion curve's AOPC is its mean gain instead.
    """

    parts: list[str]
    explained: list[float]
    random: list[float]
    aopc: float
    random_aopc: float
    normalized_aopc: float | None
    normalized_random_aopc: float | None
    kind: str = "deletion"
    draws: int = 0
    measured_by: str = MEASURED_BY
    random_curves: list[list[float]] = field(default_factory=list)


def deletion_curve(
    parts: list[str],
    explained: list[float],
    random_curves: list[list[float]],
    kind: str = "deletion",
    whole: float | None = None,
) -> DeletionCurve:
    """The :class:`DeletionCurve` of measured outputs (``explained`` and each random order's
    curve, all of the same length ``K + 1``); the normalized AOPCs divide by ``whole``
    (default: ``explained[0]`` for a deletion curve, the gain ``explained[-1] −
    explained[0]`` for an insertion curve)."""
    values = np.asarray(explained, dtype=np.float64)
    rand = np.asarray(random_curves, dtype=np.float64).reshape(-1, values.size)
    mean = rand.mean(axis=0) if rand.size else np.full(values.size, np.nan)
    measure = aopc if kind == "deletion" else insertion_aopc
    a, r = measure(values), measure(mean) if rand.size else float("nan")
    if whole is None:
        whole = float(values[0]) if kind == "deletion" else float(values[-1] - values[0])
    base = float(whole)
    return DeletionCurve(
        parts=list(parts),
        explained=values.tolist(),
        random=mean.tolist(),
        aopc=a,
        random_aopc=r,
        normalized_aopc=share(a, base),
        normalized_random_aopc=share(r, base),
        kind=kind,
        draws=int(rand.shape[0]),
        random_curves=rand.tolist(),
    )
