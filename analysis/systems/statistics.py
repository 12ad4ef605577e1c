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
  Carterette, CIKM 2007): ``scipy.stats.permutation_test`` with
  ``permutation_type="samples"`` on the mean difference, the given number of random sign
  assignments from a seeded generator; each one-sided p-value counts the observed
  assignment (Phipson and Smyth 2010: never 0) and the two-sided one is twice the smaller
  (scipy's rule; the null distribution is symmetric), so the smallest is 2/(resamples+1).
- **Bootstrap confidence interval** of the mean δ: percentile interval of the mean over
  ``resamples`` resamples of the queries with replacement (``scipy.stats.bootstrap``,
  ``method="percentile"``, seeded; Efron and Tibshirani 1993).
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
    from scipy.stats import ttest_rel

    delta = b - a
    if constant(delta):
        return None, (1.0 if not np.any(delta) else 0.0)
    result = ttest_rel(b, a)
    return _finite(result.statistic), float(result.pvalue)


def wilcoxon_test(a: np.ndarray, b: np.ndarray) -> tuple[float | None, float]:
    """Wilcoxon's signed-rank statistic and two-sided p-value, zero differences dropped
    (``zero_method="wilcox"``); (None, 1.0) when every difference is 0."""
    from scipy.stats import wilcoxon

    delta = b - a
    if not np.any(delta != 0):
        return None, 1.0
    result = wilcoxon(delta, zero_method="wilcox", alternative="two-sided")
    return _finite(result.statistic), float(result.pvalue)


def _mean_last(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(x, axis=axis)


def randomization_test(a: np.ndarray, b: np.ndarray, resamples: int, seed: int) -> float:
    """The two-sided p-value of the paired randomization test (sign flips of δ) on the mean
    difference, ``resamples`` random assignments from ``numpy.random.default_rng(seed)``."""
    from scipy.stats import permutation_test

    delta = b - a
    if not np.any(delta != 0):
        return 1.0
    result = permutation_test(
        (delta,), _mean_last, permutation_type="samples", n_resamples=resamples,
        alternative="two-sided", vectorized=True, rng=np.random.default_rng(seed),
    )  # fmt: skip
    return float(min(1.0, result.pvalue))


def bootstrap_interval(
    delta: np.ndarray, resamples: int, seed: int, confidence: float = CONFIDENCE
) -> tuple[float, float]:
    """The percentile bootstrap interval of the mean of ``delta`` (queries resampled with
    replacement, ``numpy.random.default_rng(seed)``)."""
    from scipy.stats import bootstrap

    if constant(delta):
        return float(delta.mean()), float(delta.mean())
    result = bootstrap(
        (delta,), _mean_last, n_resamples=resamples, confidence_level=confidence,
        method="percentile", vectorized=True, rng=np.random.default_rng(seed),
    )  # fmt: skip
    interval = result.confidence_interval
    return float(interval.low), float(interval.high)


def effect_size(delta: np.ndarray) -> float | None:
    """Paired Cohen's d (``d_z``): mean δ / standard deviation of δ (n − 1)."""
    if delta.size < 2:
        return None
    if constant(delta):
        return 0.0 if not np.any(delta) else None
    spread = float(np.std(delta, ddof=1))
    return float(np.mean(delta)) / spread


def paired_tests(a: Sequence[float], b: Sequence[float], resamples: int, seed: int) -> PairedTests:
    """Every paired statistic of B against A on one measure (see the module docstring)."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    delta = b - a
    low, high = bootstrap_interval(delta, resamples, seed)
    t, p_t = t_test(a, b)
    w, p_w = wilcoxon_test(a, b)
    return PairedTests(
        mean_a=float(a.mean()), mean_b=float(b.mean()), delta=float(delta.mean()),
        ci_low=low, ci_high=high, t=t, p_t=p_t, wilcoxon=w, p_wilcoxon=p_w,
        p_randomization=randomization_test(a, b, resamples, seed),
        effect_size=effect_size(delta), wins=int(np.sum(delta > 0)),
        ties=int(np.sum(delta == 0)), losses=int(np.sum(delta < 0)),
    )  # fmt: skip


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
        from scipy.stats import false_discovery_control

        return [float(x) for x in false_discovery_control(p, method="bh")]
    if method != "holm":
        raise ValueError(f"unknown correction {method!r}")
    order = np.argsort(p, kind="stable")
    steps = np.maximum.accumulate(p[order] * (m - np.arange(m)))
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(1.0, steps)
    return [float(x) for x in adjusted]
