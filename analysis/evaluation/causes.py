"""Each cause of failure against its base rate: how often it holds among the failures, how
often the same test holds among the successful queries, their ratio (lift), Fisher's exact
test on the 2×2 table (scipy's ``fisher_exact``, two-sided) and Benjamini–Hochberg's
adjustment across the causes (scipy's ``false_discovery_control``).

A cause that successes share as often as failures explains little: its lift is about 1 and
its p about 1, however many failures it holds for.

Which queries count: every query evaluated with at least one relevant judgement; it succeeds
when its first relevant item is first, else it is a failure (:mod:`.failures`). The tests:

- a failure's causes are the ones it records (:func:`~.failures.causes`), so the rate among
  failures is the cause count over the failures;
- a success is tested on the same two items as a failure would be — its relevant item
  (first) and the highest-ranked non-relevant item (below it):

  - *lexical mismatch*: a content word of the query the relevant item spells in no form
    (Snowball stems: a variant is not missing), as for a failure;
  - *won on expansion terms*: the expansion terms favour the non-relevant item while the
    query's own terms do not (``query_delta ≤ 0 < expansion_delta``): the condition under
    which a failure of this cause lost, here outweighed (without a non-relevant item in the
    ranking it cannot hold);
  - *not retrieved*, *not in the collection*: never (the relevant item is first);
  - *other*: none of the above.

A failure whose item ranked first is not judged at all is marked *rival unjudged* and counted
apart per cause (sparse judgements, as BEIR's, make such false failures common).

Lift is the failure rate over the success rate (``None`` when no success has the cause:
unbounded, or when there are no failures or no successes)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lexlens.analysis.core.results import Record
from lexlens.analysis.core.words import entry_label
from lexlens.analysis.evaluation.explain import Failure
from lexlens.analysis.evaluation.failures import (
    CAUSES,
    EXPANSION_WIN,
    LEXICAL_MISMATCH,
    OTHER,
)

#: causes.csv's columns, as the JSON rows and the command name them.
CAUSE_COLUMNS = (
    "cause",
    "failures_with",
    "failures",
    "failure_rate",
    "successes_with",
    "successes",
    "success_rate",
    "lift",
    "odds_ratio",
    "p",
    "p_bh",
    "failures_rival_unjudged",
)


@dataclass(frozen=True)
class QueryCauses(Record):
    """One query's causes as tested for the base rates: whether it succeeds, the causes that
    hold (a failure's own; a success's by the same tests), the query words its relevant item
    spells in no form and those it spells only in another form (``"terminate ≈ terminates"``)."""

    id: str
    success: bool
    causes: list[str] = field(default_factory=list)
    missing_words: list[str] = field(default_factory=list)
    variants: list[str] = field(default_factory=list)
    #: a failure whose item ranked first (above every relevant one) is not judged at all: it
    #: may be relevant, a hole in the judgements rather than a failure of the system
    rival_unjudged: bool = False
    #: the words tested for the blame words' base rate: a failure's decisive words; a
    #: success's words favouring its highest-ranked non-relevant item (δ > 0, outweighed)
    blame_words: list[str] = field(default_factory=list)
    #: the query features sliced on (:mod:`.slices`; ``None``: the query has no such value)
    query_length: int | None = None
    expansion_share: float | None = None
    mean_idf: float | None = None


def success_causes(record: Failure) -> list[str]:
    """The causes that hold for a successful query, tested on its relevant item (first) and the
    highest-ranked non-relevant item as ``record`` (explained as a failure would be) has them:
    see the module docstring."""
    found = []
    if record.missing_words:
        found.append(LEXICAL_MISMATCH)
    delta, expansion = record.query_delta, record.expansion_delta
    if delta is not None and expansion is not None and delta <= 0 < expansion:
        found.append(EXPANSION_WIN)
    return found or [OTHER]


def query_causes(
    record: Failure,
    success: bool,
    variants: Sequence[str],
    rival_unjudged: bool = False,
    features: Mapping[str, float | None] | None = None,
) -> QueryCauses:
    """A query's :class:`QueryCauses`: ``record`` is its failure, or (``success``) its
    success explained as a failure would be; ``rival_unjudged``: a failure whose first item
    is not judged; ``features``: its ``expansion_share`` and ``mean_idf`` (:mod:`.slices`)."""
    features = features or {}
    decisive = [d["word"] for d in record.decisive]
    return QueryCauses(
        id=record.query_id,
        success=success,
        causes=success_causes(record) if success else list(record.causes),
        missing_words=list(record.missing_words),
        variants=list(variants),
        rival_unjudged=rival_unjudged and not success,
        blame_words=list(record.pushing_words) if success else decisive,
        query_length=record.query_length,
        expansion_share=features.get("expansion_share"),
        mean_idf=features.get("mean_idf"),
    )


def _fisher(table: list[list[int]]) -> tuple[float | None, float]:
    """(odds ratio — ``None`` when unbounded or undefined —, two-sided p) of a 2×2 table."""

    from scipy.stats import fisher_exact  # heavy: scipy loads on first use

    odds, p = fisher_exact(table, alternative="two-sided")
    odds = float(odds)
    return (odds if math.isfinite(odds) else None), float(p)


def contrast(with_failures: int, failures: int, with_successes: int, successes: int) -> dict:
    """A feature held by ``with_failures`` of ``failures`` and ``with_successes`` of
    ``successes``: both rates, lift (failure rate / success rate; ``None`` when unbounded or
    undefined), Fisher's odds ratio and two-sided p on the 2×2 table (p 1 when either side is
    empty). The one rule causes, blame words and slices are tested by."""
    a, b = with_failures, with_successes
    f_rate = a / failures if failures else None
    s_rate = b / successes if successes else None
    lift = f_rate / s_rate if f_rate is not None and s_rate else None
    table = [[a, failures - a], [b, successes - b]]
    odds, p = _fisher(table) if failures and successes else (None, 1.0)
    return {
        "failures_with": a,
        "failures": failures,
        "failure_rate": f_rate,
        "successes_with": b,
        "successes": successes,
        "success_rate": s_rate,
        "lift": lift,
        "odds_ratio": odds,
        "p": p,
    }


def with_bh(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` (each with its ``p``) with ``p_bh``: Benjamini–Hochberg across them (scipy's
    ``false_discovery_control``)."""
    from scipy.stats import false_discovery_control  # heavy: scipy loads on first use

    adjusted = false_discovery_control([r["p"] for r in rows], method="bh") if rows else []
    for row, p_bh in zip(rows, adjusted, strict=True):
        row["p_bh"] = float(p_bh)
    return rows


def base_rates(queries: Iterable[QueryCauses]) -> list[dict[str, Any]]:
    """One row per cause (in the order of ``failures.CAUSES``) under :data:`CAUSE_COLUMNS`:
    how many failures and successes it holds for, both rates, lift, Fisher's odds ratio and
    p (:func:`contrast`), and p adjusted by Benjamini–Hochberg across the causes."""
    queries = list(queries)
    failed = [q for q in queries if not q.success]
    succeeded = [q for q in queries if q.success]
    rows = []
    for cause in CAUSES:
        a = sum(cause in q.causes for q in failed)
        b = sum(cause in q.causes for q in succeeded)
        rows.append(
            {
                "cause": cause,
                **contrast(a, len(failed), b, len(succeeded)),
                "failures_rival_unjudged": sum(
                    cause in q.causes and q.rival_unjudged for q in failed
                ),
            }
        )
    return with_bh(rows)


#: What each blame row adds beside its counts (blame.csv's columns after ``mismatch``).
BLAME_RATE_COLUMNS = (
    "failure_rate",
    "successes_with",
    "success_rate",
    "lift",
    "odds_ratio",
    "p",
    "p_bh",
)
#: How the blame words are tested, as the JSON and the page say it.
BLAME_RULE = (
    "a word decides a failure when it is among its decisive words (pushed); a successful "
    "query has it when it favours the success's highest-ranked non-relevant item (δ > 0, "
    "outweighed); lift = failure rate / success rate; p: Fisher's exact test (two-sided, "
    "scipy), p_bh: Benjamini–Hochberg across the words that decide at least one failure "
    "(a word only missing from relevant items is not tested)"
)


def blame_rates(
    blamed: Iterable[Mapping[str, Any]], queries: Sequence[QueryCauses]
) -> list[dict[str, Any]]:
    """The blame rows (``explain.blame``'s, as dicts) each with its base rate
    (:data:`BLAME_RATE_COLUMNS`, by :func:`contrast`): the share of failures it decides
    beside the share of successes where it favours the non-relevant item; BH across the
    words deciding a failure; a word deciding none has ``None`` there."""
    failed = [set(q.blame_words) for q in queries if not q.success]
    succeeded = [set(q.blame_words) for q in queries if q.success]
    rows = [dict(b) for b in blamed]
    tested = []
    for row in rows:
        a = sum(row["word"] in words for words in failed)
        if not a:
            row.update(dict.fromkeys(BLAME_RATE_COLUMNS))
            continue
        b = sum(row["word"] in words for words in succeeded)
        rates = contrast(a, len(failed), b, len(succeeded))
        row.update({k: rates[k] for k in BLAME_RATE_COLUMNS if k in rates})
        tested.append(row)
    with_bh(tested)
    return rows


def cause_rates(queries: Sequence[QueryCauses]) -> dict[str, Any]:
    """The ``cause_rates`` of an evaluation: the rule in a sentence, the counts, one row per
    cause (:func:`base_rates`) and the per-query table they are counted from."""
    return {
        "rule": (
            "each cause tested on the failures and on the successful queries alike (a "
            "success on its relevant item, first, and the highest-ranked non-relevant one); "
            "lift = failure rate / success rate; p: Fisher's exact test (two-sided, scipy), "
            "p_bh: Benjamini–Hochberg across the causes; a missing word ignores variants of "
            "the same Snowball stem"
        ),
        "failures": sum(not q.success for q in queries),
        "successes": sum(q.success for q in queries),
        "rival_unjudged": sum(q.rival_unjudged for q in queries),
        "causes": base_rates(queries),
        "blame_rule": BLAME_RULE,
        "per_query": [q.to_dict() for q in queries],
    }


def _share(value: float | None) -> str:
    """A rate as a percentage, or an em dash."""
    return "—" if value is None else f"{100 * value:.0f} %"


def cause_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """One row of causes.csv under :data:`CAUSE_COLUMNS` (a missing number is ``None``)."""
    return {column: row.get(column) for column in CAUSE_COLUMNS}


def lift_label(row: Mapping[str, Any]) -> str:
    """A cause's lift as shown: two decimals; ∞ when failures have it and no success does;
    — when neither rate says anything (no failure has it, or there are no successes)."""
    if row["lift"] is not None:
        return f"{row['lift']:.2f}"
    return "∞" if row["failures_with"] and row["successes"] else "—"


def blame_lift_label(row: Mapping[str, Any], rates: Mapping[str, Any]) -> str:
    """A blame word's lift as shown (see :func:`lift_label`): ∞ when it decides failures and
    favours the wrong item in no success; — when it was not tested."""
    if row.get("lift") is not None:
        return f"{row['lift']:.2f}"
    return "∞" if row.get("p") is not None and rates.get("successes") else "—"


def cause_lines(rates: Mapping[str, Any]) -> list[str]:
    """The causes against their base rate as the command prints them, one line per cause."""
    if not rates or not rates.get("causes"):
        return []
    out = [
        f"causes against the base rate ({rates['failures']} failures, "
        f"{rates['successes']} successes; Fisher's exact test, Benjamini–Hochberg):"
    ]
    for row in rates["causes"]:
        lift = lift_label(row)
        out.append(
            f"  {row['cause']}: {_share(row['failure_rate'])} of failures "
            f"({row['failures_with']}), {_share(row['success_rate'])} of successes "
            f"({row['successes_with']}), lift {lift}, p {row['p']:.3g} "
            f"(BH {row['p_bh']:.3g})"
        )
    if rates.get("rival_unjudged"):
        out.append(
            f"  rival unjudged: {rates['rival_unjudged']} of the failures rank an unjudged item "
            "first (it may be relevant: a hole in the judgements, not surely a failure)"
        )
    return out


#: Blame words the command prints against their base rate (the JSON and blame.csv hold all).
PRINTED_BLAME = 5


def blame_lines(blame: Sequence[Mapping[str, Any]], rates: Mapping[str, Any]) -> list[str]:
    """The words to blame against their base rate as the command prints them: the
    :data:`PRINTED_BLAME` tested words with the lowest p (ties: the larger amount first);
    ``rates``: the evaluation's ``cause_rates`` (its counts)."""
    tested = [b for b in blame if b.get("p") is not None]
    if not tested or not rates:
        return []
    out = [
        f"words to blame against the base rate ({rates['failures']} failures, "
        f"{rates['successes']} successes; {len(tested)} words tested, Fisher's exact test, "
        "Benjamini–Hochberg):"
    ]
    for row in sorted(tested, key=lambda b: (b["p"], -b["amount"]))[:PRINTED_BLAME]:
        out.append(
            f"  {entry_label(row)}: decides {_share(row['failure_rate'])} of failures "
            f"({row['pushed']}), favours the wrong item in {_share(row['success_rate'])} of "
            f"successes ({row['successes_with']}), lift {blame_lift_label(row, rates)}, "
            f"p {row['p']:.3g} (BH {row['p_bh']:.3g})"
        )
    return out
