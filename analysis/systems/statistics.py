"""Paired significance tests, confidence intervals, effect sizes and multiple-comparison
corrections for two systems' per-query values of one measure.

Every test pairs the systems by query: the differences ``δ_q = b_q − a_q`` (system B minus
system A, the baseline) are what is tested.

- **Paired t-test**: ``scipy.stats.ttest_rel(b, a)`` (Student's t on δ, n − 1 degrees of
  freedom, two-sided).
- **Wilcoxon signed-rank**: ``scipy.stats.wilcoxon(δ, zero_method="wilcox")``: a query whose
  difference is exactly 0 is *dropped* before ranking (Wilcoxon's original rule, scipy's
  default); ties among the non-zero |δ| share their mean rank. When every δ is 0 there is
  nothing to rank and the p-value is 1.
- **Randomization test** (Fisher's sharp null: the two systems' labels are exchangeable on
  every query, so each δ_q keeps its size and its sign is a coin flip; Smucker, Allan and
  Carterette, CIKM 2007): ``resamples`` random sign assignments from
  ``numpy.random.default_rng(seed)``; two-sided on the absolute mean difference, the
  observed assignment counted (Phipson and Smyth 2010): ``p = (1 + #{|mean(s·δ)| ≥
  |mean(δ)|}) / (resamples + 1)``, never 0.
- **Bootstrap confidence interval** of the mean δ: the 2.5th and 97.5th percentiles of the
  mean over ``resamples`` resamples of the queries with replacement (Efron and Tibshirani
  1993), from ``numpy.random.default_rng(seed)``.

  Both draw their resamples once for a pair of systems and apply them to every measure at
  once (one product of a resample matrix with the queries × measures differences): the
  measures of one comparison are tested on the same resamples, and 10,000 of them over
  1,000 queries take a fraction of a second (``scipy.stats.bootstrap`` and
  ``permutation_test``, one measure at a time, take seconds each).
- **Effect size**: the paired Cohen's d (``d_z``): mean δ over the sample standard
  deviation of δ (n − 1); 0 when every δ is 0, and ``None`` (never ±inf) when δ is a
  non-zero constant. Differences equal up to float rounding count as constant.
- **Wins / ties / losses**: queries where B is above / equal to / below A.

Corrections over a family of p-values (all comparisons × measures): Holm's step-down
(1979), Bonferroni, Benjamini–Hochberg (1995; ``scipy.stats.false_discovery_control``) or
none.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: The corrections over all comparisons × measures (``none`` keeps each p-value).
CORRECTIONS = ("holm", "bonferroni", "bh", "none")
#: The significance tests a table's † may follow.
TESTS = ("t-test", "wilcoxon", "randomization")
#: The confidence of the bootstrap interval.
CONFIDENCE = 0.95


@dataclass(frozen=True)
class PairedTests:
    """The paired statistics of one measure between systems A and B (δ = B − A)."""

    mean_a: float
    mean_b: float
    delta: float
    ci_low: float
    ci_high: float
    t: float | None
    p_t: float
    wilcoxon: float | None
    p_wilcoxon: float
    p_randomization: float
    effect_size: float | None
    wins: int
    ties: int
    losses: int


def constant(delta: np.ndarray) -> bool:
    """Whether the differences do not vary (up to float rounding: 1e-12 of their size)."""
    return bool(np.ptp(delta) <= 1e-12 * max(1.0, float(np.max(np.abs(delta)))))


def _finite(value: float) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def t_test(a: np.ndarray, b: np.ndarray) -> tuple[float | None, float]:
    """Student's paired t (``None`` when δ is constant) and its two-sided p-value (1 when
    every δ is 0, 0 when δ is a constant other than 0)."""
    from scipy.stats import ttest_rel  # heavy: scipy loads on first use

    delta = b - a
    if constant(delta):
        return None, (1.0 if not np.any(delta) else 0.0)
    result = ttest_rel(b, a)
    return _finite(result.statistic), float(result.pvalue)


def wilcoxon_test(a: np.ndarray, b: np.ndarray) -> tuple[float | None, float]:
    """Wilcoxon's signed-rank statistic and two-sided p-value, zero differences dropped
    (``zero_method="wilcox"``); (None, 1.0) when every difference is 0."""
    from scipy.stats import wilcoxon  # heavy: scipy loads on first use

    delta = b - a
    if not np.any(delta != 0):
        return None, 1.0
    result = wilcoxon(delta, zero_method="wilcox", alternative="two-sided")
    return _finite(result.statistic), float(result.pvalue)


#: Resamples drawn per block (a block of resamples × queries is held at once).
BLOCK = 500


def _blocks(resamples: int):
    for start in range(0, resamples, BLOCK):
        yield start, min(resamples, start + BLOCK)


def bootstrap_means(deltas: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """The mean of every column of ``deltas`` (queries × measures) over ``resamples``
    resamples of its rows with replacement: ``[resamples × measures]``."""
    rng = np.random.default_rng(seed)
    n = deltas.shape[0]
    out = np.empty((resamples, deltas.shape[1]))
    for start, stop in _blocks(resamples):
        rows = stop - start
        picks = rng.integers(0, n, size=(rows, n))
        flat = (np.arange(rows)[:, None] * n + picks).ravel()
        counts = np.bincount(flat, minlength=rows * n).reshape(rows, n)
        out[start:stop] = counts @ deltas / n
    return out


def sign_flip_means(deltas: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """The mean of every column of ``deltas`` under ``resamples`` random sign assignments
    of its rows (a fair coin per query): ``[resamples × measures]``."""
    rng = np.random.default_rng(seed)
    n = deltas.shape[0]
    out = np.empty((resamples, deltas.shape[1]))
    for start, stop in _blocks(resamples):
        signs = rng.integers(0, 2, size=(stop - start, n)).astype(np.float64) * 2.0 - 1.0
        out[start:stop] = signs @ deltas / n
    return out


def randomization_p(deltas: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """The two-sided randomization p-value of every column of ``deltas`` (see the module
    docstring); 1 for a column of zeros."""
    observed = np.abs(deltas.mean(axis=0))
    flipped = np.abs(sign_flip_means(deltas, resamples, seed))
    tolerance = 1e-12 * np.maximum(1.0, observed)  # the observed assignment counts itself
    extreme = (flipped >= observed - tolerance).sum(axis=0)
    p = (1.0 + extreme) / (resamples + 1.0)
    return np.where(np.any(deltas != 0, axis=0), np.minimum(1.0, p), 1.0)


def bootstrap_intervals(
    deltas: np.ndarray, resamples: int, seed: int, confidence: float = CONFIDENCE
) -> list[tuple[float, float]]:
    """The percentile bootstrap interval of the mean of every column of ``deltas``."""
    tail = (1.0 - confidence) / 2.0 * 100.0
    means = bootstrap_means(deltas, resamples, seed)
    low, high = np.percentile(means, [tail, 100.0 - tail], axis=0)
    out = []
    for j in range(deltas.shape[1]):
        if constant(deltas[:, j]):
            out.append((float(deltas[:, j].mean()),) * 2)
        else:
            out.append((float(low[j]), float(high[j])))
    return out


def randomization_test(a: np.ndarray, b: np.ndarray, resamples: int, seed: int) -> float:
    """The two-sided p-value of the paired randomization test of B against A on one measure."""
    delta = (np.asarray(b, np.float64) - np.asarray(a, np.float64))[:, None]
    return float(randomization_p(delta, resamples, seed)[0])


def bootstrap_interval(
    delta: np.ndarray, resamples: int, seed: int, confidence: float = CONFIDENCE
) -> tuple[float, float]:
    """The percentile bootstrap interval of the mean of ``delta`` (one measure)."""
    column = np.asarray(delta, np.float64)[:, None]
    return bootstrap_intervals(column, resamples, seed, confidence)[0]


def effect_size(delta: np.ndarray) -> float | None:
    """Paired Cohen's d (``d_z``): mean δ / standard deviation of δ (n − 1)."""
    if delta.size < 2:
        return None
    if constant(delta):
        return 0.0 if not np.any(delta) else None
    spread = float(np.std(delta, ddof=1))
    return float(np.mean(delta)) / spread


def paired_table(a: np.ndarray, b: np.ndarray, resamples: int, seed: int) -> list[PairedTests]:
    """Every paired statistic of B against A on each measure (the columns of ``a`` and
    ``b``: queries × measures), the resamples shared by the measures."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    deltas = b - a
    intervals = bootstrap_intervals(deltas, resamples, seed)
    randomization = randomization_p(deltas, resamples, seed)
    out = []
    for j in range(deltas.shape[1]):
        x, y, delta = a[:, j], b[:, j], deltas[:, j]
        t, p_t = t_test(x, y)
        w, p_w = wilcoxon_test(x, y)
        out.append(
            PairedTests(
                mean_a=float(x.mean()),
                mean_b=float(y.mean()),
                delta=float(delta.mean()),
                ci_low=intervals[j][0],
                ci_high=intervals[j][1],
                t=t,
                p_t=p_t,
                wilcoxon=w,
                p_wilcoxon=p_w,
                p_randomization=float(randomization[j]),
                effect_size=effect_size(delta),
                wins=int(np.sum(delta > 0)),
                ties=int(np.sum(delta == 0)),
                losses=int(np.sum(delta < 0)),
            )
        )
    return out


def paired_tests(a: Sequence[float], b: Sequence[float], resamples: int, seed: int) -> PairedTests:
    """Every paired statistic of B against A on one measure (see the module docstring)."""
    column = np.asarray(a, np.float64)[:, None], np.asarray(b, np.float64)[:, None]
    return paired_table(*column, resamples, seed)[0]


def corrected(pvalues: Sequence[float], method: str) -> list[float]:
    """``pvalues`` adjusted for the family they form: Holm's step-down (each sorted p times
    the hypotheses left, made non-decreasing), Bonferroni (times the family's size),
    Benjamini–Hochberg (``scipy.stats.false_discovery_control``), or ``none``; capped at 1."""
    p = np.asarray(pvalues, np.float64)
    m = p.size
    if m == 0 or method == "none":
        return [float(x) for x in p]
    if method == "bonferroni":
        return [float(x) for x in np.minimum(1.0, p * m)]
    if method == "bh":
        from scipy.stats import false_discovery_control  # heavy: scipy loads on first use

        return [float(x) for x in false_discovery_control(p, method="bh")]
    if method != "holm":
        raise ValueError(f"unknown correction {method!r}")
    order = np.argsort(p, kind="stable")
    steps = np.maximum.accumulate(p[order] * (m - np.arange(m)))
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(1.0, steps)
    return [float(x) for x in adjusted]
