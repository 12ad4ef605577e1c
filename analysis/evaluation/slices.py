"""The failure rate in slices of the queries by three features, each slice tested against the
rest of the queries.

The features, per query with at least one relevant judgement (the queries
:mod:`.causes` tests):

- ``query_length``: the words the query spells (runs of letters and digits);
- ``expansion_share``: the share of the first-ranked item's score ``q ⊙ d`` on expansion
  terms (every term that is not a word piece of a word the query spells), the split
  :mod:`.explain` makes of a failure's gap; ``None`` when the first item scores 0 or less,
  is not in the collection, or the ranking is another system's run (its score is not
  decomposed here: the query encoder's terms would explain another system's ranking);
- ``mean_idf``: the mean IDF of the query's own terms (the distinct word pieces of the words
  it spells that the vocabulary holds), BM25's IDF in Lucene's form
  ``ln(1 + (N − df + 0.5) / (df + 0.5))`` with ``N`` the collection's items and ``df`` the
  items whose stored vector weights the term (not 0); ``None`` when no word of the query is
  in the vocabulary.

Slices: tertiles of each feature over the queries that have it — edges at numpy's 1/3 and
2/3 quantiles (linear interpolation); a value at an edge is in the lower slice; equal edges
make two slices, an empty slice is dropped. A slice's row gives its queries, its failures,
its failure rate beside the rest's and the base rate (all the queries with the feature), and
Fisher's exact test of the slice against the rest on the 2×2 table of failures and
successes, by the one rule causes and blame words are tested with
(:func:`~.causes.contrast`: lift = the share of failures in the slice over the share of
successes in it, 1 when the slice fails as often as the rest); Benjamini–Hochberg across
every slice of the three features."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from lexlens.analysis.collections.stored import StoredCollection
from lexlens.analysis.core.vocabulary import token_positions
from lexlens.analysis.evaluation.causes import QueryCauses, contrast, with_bh
from lexlens.analysis.evaluation.explain import query_terms

#: The features sliced on, as the per-query table names them, and how a display names each.
FEATURES = {
    "query_length": "query length (words)",
    "expansion_share": "share of the first item's score on expansion terms",
    "mean_idf": "mean IDF of the query's own terms",
}
#: slices.csv's columns, as the JSON rows and the page name them.
SLICE_COLUMNS = (
    "feature",
    "slice",
    "low",
    "high",
    "queries",
    "failures",
    "failure_rate",
    "rest_failure_rate",
    "base_failure_rate",
    "failure_share",
    "success_share",
    "lift",
    "odds_ratio",
    "p",
    "p_bh",
)
#: How the slices are made and tested, as the JSON and the page say it.
SLICE_RULE = (
    "tertiles of each feature over the queries that have it (numpy quantiles 1/3, 2/3, "
    "linear; a value at an edge in the lower slice); each slice against the rest: Fisher's "
    "exact test (two-sided, scipy) on failures and successes, lift = share of failures in "
    "the slice / share of successes in it; p_bh: Benjamini–Hochberg across every slice"
)


def term_idf(index: StoredCollection) -> np.ndarray:
    """Every vocabulary term's IDF over the collection's stored vectors (see the module
    docstring: BM25's, Lucene's form; ``df`` the items weighting the term)."""
    indices = np.asarray(index.indices)
    weighted = indices[np.asarray(index.data) != 0]
    df = np.bincount(weighted, minlength=len(index.vocab)).astype(np.float64)
    n = float(len(index))
    return np.log1p((n - df + 0.5) / (df + 0.5))


def mean_idf(text: str, vocab: list[str], idf: np.ndarray) -> float | None:
    """The mean IDF of the query's own terms that ``vocab`` holds (``None``: none)."""
    positions = token_positions(vocab)
    columns = [positions[t][0] for t in sorted(query_terms(text, vocab)) if t in positions]
    if not columns:
        return None
    return float(math.fsum(float(idf[c]) for c in columns) / len(columns))


def expansion_share(
    index: StoredCollection, vector: np.ndarray, text: str, row: int | None
) -> float | None:
    """The share of item ``row``'s score ``q ⊙ d`` on terms that are not the query's own
    (``None``: no item, or a score of 0 or less)."""
    if row is None:
        return None
    cols, vals = index.row(row)
    parts = np.asarray(vector, np.float64)[cols] * np.asarray(vals, np.float64)
    score = math.fsum(parts.tolist())
    if score <= 0:
        return None
    own = query_terms(text, index.vocab)
    vocab = index.vocab
    expansion = math.fsum(
        p for c, p in zip(cols.tolist(), parts.tolist(), strict=True) if vocab[c] not in own
    )
    return float(expansion / score)


def _edges(values: Sequence[float]) -> list[float]:
    """The tertile edges of ``values`` (one when both are equal)."""
    low, high = (float(e) for e in np.quantile(np.asarray(values, np.float64), [1 / 3, 2 / 3]))
    return [low] if low == high else [low, high]


def _label(feature: str, low: float, high: float) -> str:
    """A slice as shown: its observed range (whole words for the query's length)."""
    if feature == "query_length":
        span = f"{low:.0f}" if low == high else f"{low:.0f}–{high:.0f}"
        return f"{span} word" if high == 1 else f"{span} words"
    return f"{low:.2f}" if low == high else f"{low:.2f}–{high:.2f}"


def feature_slices(queries: Sequence[QueryCauses]) -> list[dict[str, Any]]:
    """One row per slice of each feature under :data:`SLICE_COLUMNS` (see the module
    docstring), in the order of :data:`FEATURES`, lowest slice first; BH across all."""
    rows = []
    for feature in FEATURES:
        having = [(v, q.success) for q in queries if (v := getattr(q, feature)) is not None]
        if not having:
            continue
        failures = sum(not ok for _, ok in having)
        successes = len(having) - failures
        edges = _edges([v for v, _ in having])
        bounds = [-math.inf, *edges, math.inf]
        for lower, upper in zip(bounds, bounds[1:], strict=False):
            inside = [(v, ok) for v, ok in having if lower < v <= upper]
            if not inside:
                continue
            failed = sum(not ok for _, ok in inside)
            rest = len(having) - len(inside)
            rates = contrast(failed, failures, len(inside) - failed, successes)
            values = [v for v, _ in inside]
            rows.append(
                {
                    "feature": feature,
                    "slice": _label(feature, min(values), max(values)),
                    "low": min(values),
                    "high": max(values),
                    "queries": len(inside),
                    "failures": failed,
                    "failure_rate": failed / len(inside),
                    "rest_failure_rate": (failures - failed) / rest if rest else None,
                    "base_failure_rate": failures / len(having),
                    "failure_share": rates["failure_rate"],
                    "success_share": rates["success_rate"],
                    "lift": rates["lift"],
                    "odds_ratio": rates["odds_ratio"],
                    "p": rates["p"],
                }
            )
    return with_bh(rows)


def query_slices(queries: Sequence[QueryCauses], from_run: bool = False) -> dict[str, Any]:
    """The ``slices`` of an evaluation: the rule, the features and how many queries lack
    each, and one row per slice (:func:`feature_slices`)."""
    lacking = {f: sum(getattr(q, f) is None for q in queries) for f in FEATURES}
    notes = []
    if from_run:
        notes.append(
            "expansion_share: not measured for another system's run (its scores are not "
            "decomposed here)"
        )
    return {
        "rule": SLICE_RULE,
        "features": dict(FEATURES),
        "queries": len(queries),
        "lacking": lacking,
        "notes": notes,
        "slices": feature_slices(queries),
    }


def slice_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """One row of slices.csv under :data:`SLICE_COLUMNS` (a missing number is ``None``)."""
    return {column: row.get(column) for column in SLICE_COLUMNS}


def _share(value: float | None) -> str:
    """A rate as a percentage, or an em dash."""
    return "—" if value is None else f"{100 * value:.0f} %"


def slice_lines(slices: Mapping[str, Any]) -> list[str]:
    """The slices as the command prints them: one line per slice under its feature."""
    if not slices or not slices.get("slices"):
        return []
    out = ["failure rate by query feature (tertiles; each slice against the rest: Fisher, BH):"]
    feature = None
    for row in slices["slices"]:
        if row["feature"] != feature:
            feature = row["feature"]
            out.append(
                f"  {slices['features'].get(feature, feature)} (base rate "
                f"{_share(row['base_failure_rate'])}):"
            )
        out.append(
            f"    {row['slice']}: {_share(row['failure_rate'])} fail ({row['failures']} of "
            f"{row['queries']}), rest {_share(row['rest_failure_rate'])}, "
            f"p {row['p']:.3g} (BH {row['p_bh']:.3g})"
        )
    return out
