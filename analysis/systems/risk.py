"""Risk-sensitive measures: how much a system loses on the queries where it does worse.

- **URisk** (Wang, Bennett and Collins-Thompson, SIGIR 2012, in the form of Dinçer,
  Macdonald and Ounis, "Hypothesis testing for risk-sensitive evaluation of retrieval
  systems", SIGIR 2014): with ``δ_q = r_q − b_q`` (the system r minus the baseline b) on
  ``c`` queries, ``URisk_α = (1/c)·[Σ_{δ_q>0} δ_q + (1+α)·Σ_{δ_q<0} δ_q]``: a loss weighs
  ``1+α`` times a win. α = 0 is the mean difference.
- **TRisk** (Dinçer, Macdonald and Ounis 2014): ``TRisk_α = URisk_α / SE(URisk_α)`` with
  ``SE = s(z)/√c``, ``z_q = δ_q`` for a win or tie and ``(1+α)·δ_q`` for a loss, ``s`` the
  sample standard deviation (c − 1): a Student's t statistic on ``z`` with ``c − 1``
  degrees of freedom; its two-sided p-value says whether the system is significantly less
  (TRisk > 0) or more (TRisk < 0) risky than the baseline.
- **GeoRisk** (Dinçer, Macdonald and Ounis, "Risk-sensitive evaluation and learning to rank
  using multiple baselines", SIGIR 2016), over ``r ≥ 3`` systems' scores ``x_ij`` (query i,
  system j): ``N = Σ x_ij``, query totals ``T_i``, system totals ``S_j``, the expected score
  ``e_ij = T_i·S_j/N`` and ``z_ij = (x_ij − e_ij)/√e_ij``; ``ZRisk_α(j) = Σ_{z_ij>0} z_ij +
  (1+α)·Σ_{z_ij<0} z_ij`` and ``GeoRisk_α(j) = √(S_j/c · Φ(ZRisk_α(j)/c))`` with Φ the
  standard normal distribution function: the geometric mean of a system's effectiveness and
  its risk against every other system. A query on which every system scores 0 (``e_ij = 0``)
  has ``z_ij = 0``: it tells nothing about any system.
"""

from __future__ import annotations

import math

import numpy as np

#: The risk weights reported (a loss counts 1 + α times a win).
ALPHAS = (0, 1, 2)


def _weighted(delta: np.ndarray, alpha: float) -> np.ndarray:
    """Each query's risk-reward term: δ for a win or tie, (1 + α)·δ for a loss."""
    delta = np.asarray(delta, np.float64)
    return np.where(delta < 0, (1.0 + alpha) * delta, delta)


def urisk(delta: np.ndarray, alpha: float) -> float:
    """``URisk_α`` of the per-query differences ``delta`` (system − baseline)."""
    return float(np.mean(_weighted(delta, alpha)))


def trisk(delta: np.ndarray, alpha: float) -> tuple[float | None, float]:
    """``TRisk_α`` and its two-sided p-value (Student's t, c − 1 degrees of freedom);
    (None, 1.0) when the risk-reward terms do not vary (or fewer than two queries)."""
    from scipy.stats import t as student  # heavy: scipy loads on first use

    z = _weighted(delta, alpha)
    c = z.size
    if c < 2:
        return None, 1.0
    spread = float(np.std(z, ddof=1))
    if spread == 0:
        return None, 1.0
    value = float(np.mean(z)) / (spread / math.sqrt(c))
    return value, float(2.0 * student.sf(abs(value), c - 1))


def georisk(scores: np.ndarray, alpha: float) -> list[float]:
    """``GeoRisk_α`` of every system (a column of ``scores``: queries × systems)."""
    from scipy.stats import norm  # heavy: scipy loads on first use

    x = np.asarray(scores, np.float64)
    c = x.shape[0]
    total = float(x.sum())
    if c == 0 or total <= 0:
        return [0.0] * x.shape[1]
    expected = np.outer(x.sum(axis=1), x.sum(axis=0)) / total
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(expected > 0, (x - expected) / np.sqrt(expected), 0.0)
    zrisk = np.where(z < 0, (1.0 + alpha) * z, z).sum(axis=0)
    per_system = x.sum(axis=0) / c
    return [float(math.sqrt(s * norm.cdf(zr / c))) for s, zr in zip(per_system, zrisk, strict=True)]
