"""The paired statistics, corrections and risk measures against references computed
independently: scipy's ttest_rel and wilcoxon on the per-query values, a randomization test
and a bootstrap written here (within sampling error), Holm and Benjamini–Hochberg by hand,
URisk/TRisk/GeoRisk from the papers' formulas on a small table worked by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from lexlens.analysis.systems.risk import georisk, trisk, urisk
from lexlens.analysis.systems.statistics import (
    bootstrap_interval,
    corrected,
    effect_size,
    paired_tests,
    randomization_test,
)


@pytest.fixture(scope="module")
def pair():
    """Two systems' nDCG-like values on 300 queries: B a little better, with ties (zeros)."""
    rng = np.random.default_rng(7)
    a = rng.beta(2, 3, 300)
    b = np.clip(a + rng.normal(0.03, 0.12, 300), 0, 1)
    b[:40] = a[:40]  # 40 tied queries (zero differences)
    return a, b


def test_silent_wrong_t_and_wilcoxon_equal_scipy_on_the_per_query_values(pair):
    a, b = pair
    found = paired_tests(a, b, resamples=1000, seed=0)
    t = stats.ttest_rel(b, a)
    assert found.t == pytest.approx(t.statistic, rel=1e-12)
    assert found.p_t == pytest.approx(t.pvalue, rel=1e-12)
    # zero differences dropped before ranking (Wilcoxon's rule): the same as ranking the
    # non-zero differences alone
    nonzero = (b - a)[b != a]
    w = stats.wilcoxon(nonzero)
    assert found.wilcoxon == pytest.approx(w.statistic)
    assert found.p_wilcoxon == pytest.approx(w.pvalue, rel=1e-12)
    delta = b - a
    assert (found.wins, found.ties, found.losses) == (
        int((delta > 0).sum()),
        int((delta == 0).sum()),
        int((delta < 0).sum()),
    )
    assert found.ties == 40
    assert found.effect_size == pytest.approx(delta.mean() / delta.std(ddof=1))


def _sign_flip_p(delta: np.ndarray, resamples: int, seed: int) -> float:
    """Fisher's sharp null by hand: each difference's sign a fair coin; two-sided on the
    absolute mean; the observed assignment counted (p never 0)."""
    rng = np.random.default_rng(seed)
    observed = abs(delta.mean())
    signs = rng.choice([-1.0, 1.0], size=(resamples, delta.size))
    means = np.abs((signs * delta).mean(axis=1))
    return (np.sum(means >= observed - 1e-15) + 1) / (resamples + 1)


def _percentile_bootstrap(delta: np.ndarray, resamples: int, seed: int) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, delta.size, size=(resamples, delta.size))
    means = delta[picks].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def test_silent_wrong_randomization_p_agrees_with_a_sign_flip_test_written_here(pair):
    a, b = pair
    delta = b - a
    n = 10_000
    found = randomization_test(a, b, n, seed=3)
    reference = _sign_flip_p(delta, n, seed=11)
    # both estimate the same p; the Monte Carlo standard error of a proportion is
    # sqrt(p(1-p)/n): allow 4 of them on each side (plus the +1 rule's 1/n)
    se = math.sqrt(max(reference * (1 - reference), 1e-4) / n)
    assert abs(found - reference) <= 4 * se + 2 / n, (found, reference)
    # a strong difference: at the floor 1/(n+1) (the observed assignment counted); no
    # signal: near 1
    assert randomization_test(a, a + 0.5, n, seed=1) == pytest.approx(1 / (n + 1), abs=1e-12)
    same_sign_free = np.array([0.1, -0.1] * 50)
    assert randomization_test(np.zeros(100), same_sign_free, 2000, seed=1) > 0.9


def test_silent_wrong_bootstrap_interval_agrees_with_one_written_here(pair):
    a, b = pair
    delta = b - a
    low, high = bootstrap_interval(delta, 10_000, seed=5)
    ref_low, ref_high = _percentile_bootstrap(delta, 10_000, seed=99)
    width = ref_high - ref_low
    assert low == pytest.approx(ref_low, abs=0.05 * width)
    assert high == pytest.approx(ref_high, abs=0.05 * width)
    assert low < delta.mean() < high
    # seeded: the same seed gives the same interval
    assert bootstrap_interval(delta, 10_000, seed=5) == (low, high)


def test_silent_wrong_holm_bonferroni_and_bh_equal_the_hand_computation():
    p = [0.01, 0.04, 0.03, 0.005, 0.20]
    # Holm by hand: sorted 0.005, 0.01, 0.03, 0.04, 0.20 times 5, 4, 3, 2, 1 →
    # 0.025, 0.04, 0.09, 0.08→0.09 (monotone), 0.20; back in the given order
    assert corrected(p, "holm") == pytest.approx([0.04, 0.09, 0.09, 0.025, 0.20])
    assert corrected(p, "bonferroni") == pytest.approx([0.05, 0.20, 0.15, 0.025, 1.0])
    # BH by hand: p_(i)·m/i from the largest down, running minimum:
    # 0.20·5/5 = 0.20; 0.04·5/4 = 0.05; 0.03·5/3 = 0.05; 0.01·5/2 = 0.025; 0.005·5/1 = 0.025
    assert corrected(p, "bh") == pytest.approx([0.025, 0.05, 0.05, 0.025, 0.20])
    assert corrected(p, "none") == p
    assert corrected([0.6, 0.7], "holm") == pytest.approx([1.0, 1.0])  # capped at 1


#: A small table worked by hand: 4 queries × 3 systems (columns: baseline, r1, r2).
TABLE = np.array(
    [
        [0.5, 0.7, 0.2],
        [0.4, 0.2, 0.4],
        [0.0, 0.0, 0.0],
        [0.6, 0.9, 0.3],
    ]
)


def test_silent_wrong_urisk_and_trisk_equal_the_papers_formulas_by_hand():
    delta = TABLE[:, 1] - TABLE[:, 0]  # +0.2, −0.2, 0, +0.3
    # URisk_α = (1/c)[Σ wins + (1+α) Σ losses]  (Dinçer, Macdonald, Ounis 2014)
    assert urisk(delta, 0) == pytest.approx((0.2 + 0.3 - 0.2) / 4)
    assert urisk(delta, 1) == pytest.approx((0.2 + 0.3 - 2 * 0.2) / 4)
    assert urisk(delta, 2) == pytest.approx((0.2 + 0.3 - 3 * 0.2) / 4)
    # TRisk_α = URisk_α / (s(z)/√c), z = (0.2, −0.4, 0, 0.3) at α = 1
    z = np.array([0.2, -0.4, 0.0, 0.3])
    mean = z.mean()
    s = math.sqrt(sum((x - mean) ** 2 for x in z) / 3)
    value, p = trisk(delta, 1)
    assert value == pytest.approx(mean / (s / 2))
    assert p == pytest.approx(2 * stats.t.sf(abs(mean / (s / 2)), 3))


def test_silent_wrong_georisk_equals_the_papers_formula_by_hand():
    # GeoRisk_α(j) = sqrt(S_j/c · Φ(ZRisk_α(j)/c)), z_ij = (x_ij − e_ij)/√e_ij,
    # e_ij = T_i·S_j/N (Dinçer, Macdonald, Ounis 2016); a row of zeros has z = 0
    x = TABLE
    n = x.sum()
    rows, cols = x.sum(axis=1), x.sum(axis=0)
    for alpha in (0, 1, 2):
        found = georisk(x, alpha)
        for j in range(3):
            zrisk = 0.0
            for i in range(4):
                e = rows[i] * cols[j] / n
                z = 0.0 if e == 0 else (x[i, j] - e) / math.sqrt(e)
                zrisk += z if z >= 0 else (1 + alpha) * z
            want = math.sqrt(cols[j] / 4 * stats.norm.cdf(zrisk / 4))
            assert found[j] == pytest.approx(want, rel=1e-12), (alpha, j)
    # risk-averse weights never raise a system's GeoRisk
    assert all(g2 <= g0 + 1e-15 for g0, g2 in zip(georisk(x, 0), georisk(x, 2), strict=True))


def test_silent_wrong_constant_differences_give_defined_values_not_nan():
    a = np.array([0.2, 0.4, 0.6])
    same = paired_tests(a, a, resamples=200, seed=0)
    assert (same.p_t, same.p_wilcoxon, same.p_randomization) == (1.0, 1.0, 1.0)
    assert same.effect_size == 0.0 and same.t is None
    shifted = paired_tests(a, a + 0.1, resamples=200, seed=0)
    assert shifted.effect_size is None  # d is infinite: not reported
    assert shifted.ci_low == pytest.approx(0.1) and shifted.ci_high == pytest.approx(0.1)
    assert effect_size(np.array([0.5])) is None
