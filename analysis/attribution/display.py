"""Attributions and the masking table as people read them: the Attribution page, the CLI
and the HTML report show these tables (every exact number stays in the JSON and CSV)."""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np
import pandas as pd

from lexlens.analysis.attribution.mot_rankings import RANKINGS
from lexlens.analysis.attribution.subvector import SubvectorAttribution, randt_attributions


class MotTables(Protocol):
    """What the display needs of a masking result (a ``MotResult``)."""

    table: pd.DataFrame  # mean error: rows = rankings (+ reference rows), columns = M
    significance: pd.DataFrame  # one row per (M, baseline)


def completeness_table(a: SubvectorAttribution) -> pd.DataFrame:
    """Per attributed sub-vector: its code, F(x) − F(x′), Σ attributions and the deltas."""
    return pd.DataFrame(
        {
            "sub-vector": a.subvectors,
            "code": [int(a.codes[sv]) for sv in a.subvectors],
            "F(x) − F(x′)": a.gap(),
            "Σ attributions": a.attributions.sum(1),
            "delta": a.delta,
            "relative delta": a.relative_delta(),
            "delta / tolerance scale": np.abs(a.delta) / a.tolerance_scale(),
        }
    )


def subvector_labels(a: SubvectorAttribution) -> list[str]:
    """The heatmap's row labels: each attributed sub-vector with its code (``3 · code 17``)."""
    return [f"{sv} · code {int(a.codes[sv])}" for sv in a.subvectors]


def comparison_series(a: SubvectorAttribution, subvector: int) -> dict[str, np.ndarray]:
    """Word scores of one sub-vector (MoT) beside GlobalT, and RandT when all M were run."""
    r = a.row(subvector)
    series = {
        "MoT (this sub-vector)": a.attributions[r],
        "GlobalT (whole vector)": a.global_attributions,
    }
    if a.subvectors == list(range(a.m)) and a.m > 1:
        series["RandT (another sub-vector)"] = randt_attributions(a)[r]
    return series


def top_words(
    a: SubvectorAttribution, subvector: int | None, k: int = 4
) -> list[tuple[str, float]]:
    """The ``k`` words with the highest attribution to ``subvector`` (``None``: GlobalT)."""
    scores = a.global_attributions if subvector is None else a.attributions[a.row(subvector)]
    return [(a.words[j], float(scores[j])) for j in np.argsort(-np.asarray(scores))[:k]]


def format_p(p: float) -> str:
    """A p-value as people read it: ``3.0e-15`` below 0.001, else three decimals."""
    if p is None or not math.isfinite(p):
        return "–"
    return f"{p:.1e}" if p < 1e-3 else f"{p:.3f}"


def format_error(v: float) -> str:
    """A masking error to four significant digits (``–`` when missing)."""
    return "–" if v is None or not math.isfinite(v) else f"{v:.4g}"


def display_tables(result: MotTables) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The masking table and the tests as shown to people (the app and the HTML report).

    Table: a ``ranking`` column and one ``M=…`` column per M (4 significant digits). Tests:
    one row per baseline, per M the Wilcoxon p and its FDR q (``3.0e-15`` style) and the
    share of documents where MoT is lower.
    """
    table = result.table
    shown = pd.DataFrame({"ranking": list(table.index)})
    for m in table.columns:
        shown[f"M={m}"] = [format_error(float(v)) for v in table[m]]
    sig = result.significance
    tests = pd.DataFrame({"baseline": [b for b in RANKINGS if b != "MoT"]})
    for m in table.columns:
        part = sig[sig["m"] == int(m)].set_index("baseline")
        tests[f"M={m} p"] = [format_p(float(part.loc[b, "wilcoxon_p"])) for b in tests["baseline"]]
        tests[f"M={m} q (FDR)"] = [
            format_p(float(part.loc[b, "wilcoxon_q"])) for b in tests["baseline"]
        ]
        tests[f"M={m} MoT lower"] = [
            f"{float(part.loc[b, 'mot_lower_share']):.0%}" for b in tests["baseline"]
        ]
    return shown, tests


def best_rows(result: MotTables) -> dict[int, str]:
    """Per M, the ranking with the lowest error (reference rows are not contenders)."""
    contenders = result.table.loc[list(RANKINGS)]
    return {int(m): str(contenders[m].idxmin()) for m in result.table.columns}
