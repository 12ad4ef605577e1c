"""Two sides' terms of one input (or patch group): shared, only in A, only in B — on raw
vocabulary tokens and on the display view (word pieces joined into words) — and Spearman's
ρ of the shared weights (``scipy.stats.spearmanr``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from lexlens.analysis.compare.result import TermComparison
from lexlens.analysis.compare.sides import Side

#: Below this many shared terms, ρ comes with a note that it rests on very few points.
FEW_SHARED = 5


def spearman(a: Sequence[float], b: Sequence[float]) -> dict:
    """Spearman's ρ of paired weights, or ``None`` with a note when it is not defined."""
    n = len(a)
    out: dict[str, Any] = {"method": "spearman", "n": n, "rho": None, "p_value": None}
    if n < 2:
        out["note"] = (
            f"{'no term is' if n == 0 else 'only one term is'} active in both: a rank "
            "correlation needs at least two shared terms"
        )
        return out
    if len(set(a)) < 2 or len(set(b)) < 2:
        out["note"] = "one side gives every shared term the same weight: ρ is not defined"
        return out
    from scipy.stats import spearmanr  # heavy: scipy loads on first use

    rho, p = spearmanr(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
    rho, p = float(rho), float(p)
    out["rho"] = rho if math.isfinite(rho) else None
    out["p_value"] = p if math.isfinite(p) else None
    if out["rho"] is None:
        out["note"] = "ρ is not defined for these weights"
    elif n < FEW_SHARED:
        out["note"] = f"only {n} shared terms: ρ rests on very few points"
    else:
        out["note"] = None
    return out


def _by_weight_sum(row: dict) -> tuple[float, str]:
    return -(row["weight_a"] + row["weight_b"]), row["token"]


def _shared_rows(
    wa: dict[str, float],
    ra: dict[str, int],
    wb: dict[str, float],
    rb: dict[str, int],
    own: set[str],
) -> list[dict]:
    """The raw tokens active on both sides, heaviest (A + B) first."""
    rows = [
        {
            "token": t,
            "weight_a": wa[t],
            "weight_b": wb[t],
            "difference": wb[t] - wa[t],
            "rank_a": ra[t],
            "rank_b": rb[t],
            "in_input": t in own,
        }
        for t in wa
        if t in wb
    ]
    return sorted(rows, key=_by_weight_sum)


def _only_rows(
    mine: dict[str, float],
    ranks: dict[str, int],
    theirs: dict[str, float],
    other: Side,
    me: str,
    own: set[str],
) -> list[dict]:
    """The raw tokens active on side ``me`` only, with the other side's gated and ungated
    weight of the same token (``None`` when its vocabulary lacks it); heaviest first."""
    them = "b" if me == "a" else "a"
    rows = []
    for t, w in mine.items():
        if t in theirs:
            continue
        j = other.lookup.get(t)
        rows.append(
            {
                "token": t,
                f"weight_{me}": w,
                f"weight_{them}": None if j is None else float(other.gated[j]),
                f"rank_{me}": ranks[t],
                f"ungated_weight_{them}": None if j is None else float(other.ungated[j]),
                f"in_vocab_{them}": j is not None,
                "in_input": t in own,
            }
        )
    return rows


def _word_weight(side: Side, merged: dict, token: str, pieces: list[str]) -> float:
    """The side's merged weight of the word; else, for a word spelled in pieces, the
    smallest of its pieces' weights there (it is there only if every piece is); for a plain
    token, its weight there."""
    if token in merged:
        return merged[token][0]
    cols = [side.lookup.get(p) for p in (pieces or [token])]
    if any(c is None for c in cols):
        return 0.0
    return min(float(side.gated[c]) for c in cols)


def _merged_view(
    a: Side,
    b: Side,
    ma: dict[str, tuple[float, list[str]]],
    mb: dict[str, tuple[float, list[str]]],
    top: int,
) -> dict:
    """The display view: the words of either side's merged terms, each weighing on a side
    its merged weight there (or its pieces' there), split into shared / only A / only B."""
    shared, only_a, only_b = [], [], []
    for t in dict.fromkeys([*ma, *mb]):
        pieces = (ma.get(t) or mb.get(t))[1]
        x, y = _word_weight(a, ma, t, pieces), _word_weight(b, mb, t, pieces)
        row = {"token": t, "weight_a": x, "weight_b": y, "difference": y - x, "pieces": pieces}
        if x > 0 and y > 0:
            shared.append(row)
        elif x > 0:
            only_a.append(row)
        else:
            only_b.append(row)
    shared.sort(key=_by_weight_sum)
    only_a.sort(key=lambda r: (-r["weight_a"], r["token"]))
    only_b.sort(key=lambda r: (-r["weight_b"], r["token"]))
    return {
        "counts": {
            "active_a": len(shared) + len(only_a),
            "active_b": len(shared) + len(only_b),
            "shared": len(shared),
            "only_a": len(only_a),
            "only_b": len(only_b),
        },
        "shared": shared[:top],
        "only_a": only_a[:top],
        "only_b": only_b[:top],
    }


def compare_sides(a: Side, b: Side, *, top: int) -> TermComparison:
    """The :class:`TermComparison` of two gated vectors, matched by token string."""
    wa, ra = a.active()
    wb, rb = b.active()
    own = a.own | b.own
    shared = _shared_rows(wa, ra, wb, rb, own)
    only_a = _only_rows(wa, ra, wb, b, "a", own)
    only_b = _only_rows(wb, rb, wa, a, "b", own)
    counts = {
        "active_a": len(wa),
        "active_b": len(wb),
        "shared": len(shared),
        "only_a": len(only_a),
        "only_b": len(only_b),
        "only_a_no_counterpart": sum(not r["in_vocab_b"] for r in only_a),
        "only_b_no_counterpart": sum(not r["in_vocab_a"] for r in only_b),
    }
    rho = spearman([r["weight_a"] for r in shared], [r["weight_b"] for r in shared])
    rho["over"] = (
        f"the gated weights (E = V ⊙ G) of the {len(shared)} term{'s' * (len(shared) != 1)} "
        "active in both A and B, "
        "matched by token string (raw vocabulary tokens, special tokens left out)"
    )
    ma, mb = a.merged(), b.merged()
    return TermComparison(
        counts=counts,
        shared=shared[:top],
        only_a=only_a[:top],
        only_b=only_b[:top],
        merged=_merged_view(a, b, ma, mb, top),
        top_a=[{"token": t, "weight": w, "pieces": p} for t, (w, p) in list(ma.items())[:top]],
        top_b=[{"token": t, "weight": w, "pieces": p} for t, (w, p) in list(mb.items())[:top]],
        rank_correlation=rho,
    )
