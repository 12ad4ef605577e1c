"""The significance table of a comparison: per pair of systems and measure, the means (with
both systems' FLOPs, postings per query, latency and index bytes beside them), the
difference with its bootstrap interval, the three paired tests (their p-values corrected
over every comparison × measure), the effect size, wins/ties/losses, URisk and TRisk; per
measure, GeoRisk of every system when there are three or more.

The tests and their rules are in :mod:`lexlens.analysis.systems.statistics`, the risk
measures in :mod:`lexlens.analysis.systems.risk`. The bootstrap and randomization test of
every comparison and measure draw from the same seed, so a result is reproduced exactly
by the same inputs and seed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict

import numpy as np

from lexlens.analysis.systems.efficiency import EFFICIENCY_COLUMNS
from lexlens.analysis.systems.options import ComparisonOptions
from lexlens.analysis.systems.risk import ALPHAS, georisk, trisk, urisk
from lexlens.analysis.systems.statistics import corrected, paired_table

#: The p-value fields each corrected over the whole family, and the test each belongs to.
P_FIELDS = {"t-test": "p_t", "wilcoxon": "p_wilcoxon", "randomization": "p_randomization"}


def pairs_of(names: Sequence[str], baseline: str, all_pairs: bool) -> list[tuple[str, str]]:
    """(A, B) pairs compared, B against A: every system against the baseline, then (with
    ``all_pairs``) every other pair in the order listed."""
    pairs = [(baseline, n) for n in names if n != baseline]
    if all_pairs:
        others = [n for n in names if n != baseline]
        pairs += [(a, b) for i, a in enumerate(others) for b in others[i + 1 :]]
    return pairs


def significance_rows(
    values: Mapping[str, Mapping[str, np.ndarray]],
    pairs: Sequence[tuple[str, str]],
    measures: Sequence[str],
    options: ComparisonOptions,
) -> list[dict]:
    """One row per pair × measure: the paired statistics, risk, and corrected p-values;
    ``significant`` says whether the chosen test's corrected p is below the level."""
    rows = []
    for a, b in pairs:
        x = np.column_stack([values[a][m] for m in measures])
        y = np.column_stack([values[b][m] for m in measures])
        tests = paired_table(x, y, options.resamples, options.seed)
        for j, m in enumerate(measures):
            delta = y[:, j] - x[:, j]
            risk = {}
            for alpha in ALPHAS:
                t, p = trisk(delta, alpha)
                risk |= {
                    f"urisk_{alpha}": urisk(delta, alpha),
                    f"trisk_{alpha}": t,
                    f"p_trisk_{alpha}": p,
                }
            rows.append({"system_a": a, "system_b": b, "measure": m, **asdict(tests[j]), **risk})
    for name in P_FIELDS.values():
        adjusted = corrected([r[name] for r in rows], options.correction)
        for row, p in zip(rows, adjusted, strict=True):
            row[f"{name}_corrected"] = p
    chosen = P_FIELDS[options.test] + "_corrected"
    for row in rows:
        row["significant"] = bool(row[chosen] < options.significance)
    return rows


def georisk_table(
    values: Mapping[str, Mapping[str, np.ndarray]], names: Sequence[str], measures: Sequence[str]
) -> dict[str, dict[str, dict[str, float]]] | None:
    """{measure: {system: {"alpha_0": GeoRisk, …}}} over all systems; ``None`` with fewer
    than three systems (GeoRisk compares each system with the others)."""
    if len(names) < 3:
        return None
    out: dict[str, dict[str, dict[str, float]]] = {}
    for m in measures:
        matrix = np.column_stack([values[n][m] for n in names])
        per_alpha = {alpha: georisk(matrix, alpha) for alpha in ALPHAS}
        out[m] = {
            n: {f"alpha_{alpha}": per_alpha[alpha][j] for alpha in ALPHAS}
            for j, n in enumerate(names)
        }
    return out


def with_efficiency(rows: Sequence[Mapping], efficiency: Mapping[str, Mapping]) -> list[dict]:
    """The significance rows with both systems' efficiency beside their means (``flops_a``,
    ``flops_b``, …: :mod:`lexlens.analysis.systems.efficiency`)."""
    out = []
    for row in rows:
        extra = {}
        for column in EFFICIENCY_COLUMNS:
            extra[f"{column}_a"] = efficiency.get(row["system_a"], {}).get(column)
            extra[f"{column}_b"] = efficiency.get(row["system_b"], {}).get(column)
        out.append({**row, **extra})
    return out


def deltas_of(
    values: Mapping[str, Mapping[str, np.ndarray]],
    order: Sequence[str],
    texts: Mapping[str, str],
    pairs: Sequence[tuple[str, str]],
    measures: Sequence[str],
) -> list[dict]:
    """per_query_deltas: one row per pair × query × measure (A's value, B's, B − A)."""
    rows = []
    for a, b in pairs:
        for m in measures:
            x, y = values[a][m], values[b][m]
            for i, q in enumerate(order):
                rows.append(
                    {
                        "system_a": a,
                        "system_b": b,
                        "query_id": q,
                        "query": texts[q],
                        "measure": m,
                        "a": float(x[i]),
                        "b": float(y[i]),
                        "delta": float(y[i] - x[i]),
                    }
                )
    return rows


def extremes(
    values: Mapping[str, Mapping[str, np.ndarray]],
    order: Sequence[str],
    pair: tuple[str, str],
    measure: str,
    count: int,
) -> tuple[list[str], list[str]]:
    """The ``count`` largest wins of B over A and its ``count`` largest losses on
    ``measure`` (largest first; equal differences by query order)."""
    delta = values[pair[1]][measure] - values[pair[0]][measure]
    ranked = np.lexsort((np.arange(len(order)), -delta))
    wins = [order[i] for i in ranked if delta[i] > 0][:count]
    ranked = np.lexsort((np.arange(len(order)), delta))
    losses = [order[i] for i in ranked if delta[i] < 0][:count]
    return wins, losses
