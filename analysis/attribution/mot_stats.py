"""Significance of the masking table: MoT against each baseline, and every pair of rankings.

Per M, on the per-document errors (mean over sub-vectors): the two-sided Wilcoxon
signed-rank test and the paired t-test RepMoT used; the p-values of all comparisons of a
table (every M × baseline, or every M × pair) are corrected for multiple comparisons by
Benjamini–Hochberg (``scipy.stats.false_discovery_control``) into q-values.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd

from lexlens.analysis.attribution.mot_rankings import RANKINGS


def significance(per_doc: dict[int, pd.DataFrame]) -> pd.DataFrame:
    """MoT against every baseline, per M: Wilcoxon and paired t-test, with BH q-values."""
    # heavy: scipy loads on first use
    from scipy.stats import false_discovery_control, ttest_rel, wilcoxon

    rows = []
    for m, frame in per_doc.items():
        mot = frame["MoT"].to_numpy()
        for base in RANKINGS:
            if base == "MoT":
                continue
            other = frame[base].to_numpy()
            diff = mot - other
            if len(diff) < 2 or np.allclose(diff, 0):
                p_w = p_t = 1.0
            else:
                p_w = float(wilcoxon(mot, other, alternative="two-sided").pvalue)
                p_t = float(ttest_rel(mot, other).pvalue)
            rows.append(
                {
                    "m": int(m),
                    "baseline": base,
                    "mean_mot": float(mot.mean()),
                    "mean_baseline": float(other.mean()),
                    "mot_lower_share": float((diff < 0).mean()),
                    "n_docs": len(diff),
                    "wilcoxon_p": p_w,
                    "ttest_p": p_t,
                }
            )
    frame = pd.DataFrame(rows)
    if len(frame):
        for test in ("wilcoxon", "ttest"):
            p = frame[f"{test}_p"].to_numpy()
            frame[f"{test}_q"] = false_discovery_control(p, method="bh") if len(p) > 1 else p
    return frame


def pairwise(per_doc: dict[int, pd.DataFrame]) -> pd.DataFrame:
    """Every pair of rankings, per M: which is lower, how often, and whether significantly.

    One row per (M, a, b) with ``a`` the ranking of lower mean error: mean errors, the share
    of documents where ``a`` is lower, the two-sided Wilcoxon p and its Benjamini–Hochberg q
    over all pairs of the table. This is what supports (or not) an ordering between two
    baselines, which the MoT-against-each-baseline tests do not cover.
    """
    from scipy.stats import false_discovery_control, wilcoxon  # heavy: scipy loads on first use

    rows = []
    for m, frame in per_doc.items():
        for x, y in combinations(RANKINGS, 2):
            a, b = (x, y) if frame[x].mean() <= frame[y].mean() else (y, x)
            diff = frame[a].to_numpy() - frame[b].to_numpy()
            p = 1.0 if len(diff) < 2 or np.allclose(diff, 0) else float(wilcoxon(diff).pvalue)
            rows.append(
                {
                    "m": int(m),
                    "lower": a,
                    "higher": b,
                    "mean_lower": float(frame[a].mean()),
                    "mean_higher": float(frame[b].mean()),
                    "lower_share": float((diff < 0).mean()),
                    "wilcoxon_p": p,
                }
            )
    out = pd.DataFrame(rows)
    if len(out) > 1:
        out["wilcoxon_q"] = false_discovery_control(out["wilcoxon_p"].to_numpy(), method="bh")
    elif len(out):
        out["wilcoxon_q"] = out["wilcoxon_p"]
    return out
