"""Failures across systems: for a pair (A, the baseline, and B), the queries B fixes and
breaks, McNemar's exact test on them, and the causes behind both.

Success and failure are the evaluation's (:mod:`lexlens.analysis.evaluation.failures`): a
query with a relevant judgement succeeds when its first relevant item is first, else it
fails; a query without a relevant item is neither and is left out. Per query, the pair is
one of four cells: both succeed, both fail, *fixed* (A fails, B succeeds: ``b``) or
*broken* (A succeeds, B fails: ``c``).

- **McNemar's exact test** (McNemar 1947; the exact form: Edwards 1948, Fagerland et al.
  2013): under the null that A and B fail as often, each discordant query is fixed or broken
  with probability ½, so ``b`` is Binomial(``b + c``, ½); two-sided p from
  ``scipy.stats.binomtest(b, b + c, 0.5)`` (the probability of every count no more likely
  than ``b``), 1 when there is no discordant query.
- **Causes of the fixed**: A's causes of failure on the queries B fixes (A's own
  decomposition, :data:`~lexlens.analysis.evaluation.failures.CAUSES`), counted per cause;
  **causes of the new failures**: B's causes on the queries B breaks. Causes are not
  exclusive: a query counts under each cause it has.
- **Causes reduced**: per cause, how many of A's failures and of B's failures it holds for
  (every failure, also those both share); a cause is *reduced* when B's count is below A's.
- **Each system by its own scores.** Lexlens's own causes read the collection's ``q ⊙ d``;
  BM25 and an outside run are not scored by it. For BM25 (no expansion terms) *won on
  expansion terms* cannot hold and is dropped; for an outside run it cannot be told, so a
  failure with no cause left is *not decomposed*, never another system's reason. Lexical
  mismatch (the item's words), not retrieved and not in the collection (ranks) hold for any
  system.
- A failure whose first item is not judged at all (*rival unjudged*: it may be a hole in the
  judgements) is counted apart among the fixed and the broken.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lexlens.analysis.evaluation.failures import CAUSES, EXPANSION_WIN, OTHER
from lexlens.analysis.evaluation.result import Evaluation
from lexlens.analysis.systems.systems import BM25, LEXLENS

#: The cause of an outside run's failure that only its own scores could tell.
NOT_DECOMPOSED = "not decomposed"
#: Every cause a pair's counts may hold, in order.
PAIR_CAUSES = (*CAUSES, NOT_DECOMPOSED)

#: The fixed and broken query ids listed per pair (the counts cover all).
LISTED = 200


def outcomes(evaluation: Evaluation) -> dict[str, bool]:
    """Query id → whether it succeeds (first relevant item first), for every evaluated
    query with a relevant judgement, in the evaluation's order."""
    return {
        q["id"]: q["first_relevant_rank"] == 1
        for q in evaluation.metrics["per_query"]
        if q.get("relevant", 0) > 0
    }


def failure_causes(evaluation: Evaluation, kind: str = LEXLENS) -> dict[str, list[str]]:
    """Query id → the causes of its failure that a system of ``kind`` can be given by its own
    scores (see the module docstring)."""
    out = {}
    for f in evaluation.failures:
        causes = list(f.causes)
        if kind != LEXLENS:
            causes = [c for c in causes if c not in (EXPANSION_WIN, OTHER)]
            causes = causes or [OTHER if kind == BM25 else NOT_DECOMPOSED]
        out[f.query_id] = causes
    return out


def rival_unjudged(evaluation: Evaluation) -> set[str]:
    """The failures whose first item is not judged at all."""
    rows = (evaluation.cause_rates or {}).get("per_query", [])
    return {q["id"] for q in rows if q.get("rival_unjudged")}


def mcnemar_exact(fixed: int, broken: int) -> float:
    """McNemar's exact two-sided p on the discordant counts: ``binomtest(fixed, fixed +
    broken, 0.5)``; 1 when both are 0."""
    from scipy.stats import binomtest  # heavy: scipy loads on first use

    if fixed + broken == 0:
        return 1.0
    return float(binomtest(fixed, fixed + broken, 0.5, alternative="two-sided").pvalue)


def _counted(ids: Sequence[str], causes: Mapping[str, Sequence[str]]) -> list[dict[str, Any]]:
    """How many of ``ids`` each cause holds for (causes no query has left out)."""
    rows = [{"cause": c, "queries": sum(c in causes.get(q, ()) for q in ids)} for c in PAIR_CAUSES]
    return [r for r in rows if r["queries"]]


def pair_fixes(
    a: str,
    b: str,
    evaluation_a: Evaluation,
    evaluation_b: Evaluation,
    kinds: tuple[str, str] = (LEXLENS, LEXLENS),
) -> dict[str, Any]:
    """The fixed and broken queries of B against A, McNemar's exact p, the causes of the
    fixed (A's) and of the new failures (B's), each by its own scores (``kinds``: the two
    systems' kinds), and each cause's count among A's and B's failures (see the module
    docstring)."""
    won, got = outcomes(evaluation_a), outcomes(evaluation_b)
    order = [q for q in won if q in got]
    fixed = [q for q in order if not won[q] and got[q]]
    broken = [q for q in order if won[q] and not got[q]]
    causes_a = failure_causes(evaluation_a, kinds[0])
    causes_b = failure_causes(evaluation_b, kinds[1])
    failed_a = [q for q in order if not won[q]]
    failed_b = [q for q in order if not got[q]]
    reduced = []
    for cause in PAIR_CAUSES:
        in_a = sum(cause in causes_a.get(q, ()) for q in failed_a)
        in_b = sum(cause in causes_b.get(q, ()) for q in failed_b)
        if in_a or in_b:
            reduced.append(
                {
                    "cause": cause,
                    "failures_a": in_a,
                    "failures_b": in_b,
                    "change": in_b - in_a,
                    "reduced": in_b < in_a,
                }
            )
    return {
        "system_a": a,
        "system_b": b,
        "queries": len(order),
        "both_succeed": sum(won[q] and got[q] for q in order),
        "both_fail": sum(not won[q] and not got[q] for q in order),
        "fixed": len(fixed),
        "broken": len(broken),
        "p_mcnemar": mcnemar_exact(len(fixed), len(broken)),
        "failures_a": len(failed_a),
        "failures_b": len(failed_b),
        "fixed_causes": _counted(fixed, causes_a),
        "broken_causes": _counted(broken, causes_b),
        "fixed_rival_unjudged": len(set(fixed) & rival_unjudged(evaluation_a)),
        "broken_rival_unjudged": len(set(broken) & rival_unjudged(evaluation_b)),
        "causes": reduced,
        "fixed_queries": fixed[:LISTED],
        "broken_queries": broken[:LISTED],
    }


def fixes_lines(fixes: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each pair's fixed and broken queries and causes as the command prints them."""
    out = []
    for f in fixes:
        out.append(
            f"{f['system_b']} vs {f['system_a']}: fixes {f['fixed']}, breaks {f['broken']} of "
            f"{f['queries']} queries (both succeed {f['both_succeed']}, both fail "
            f"{f['both_fail']}); McNemar's exact p {f['p_mcnemar']:.3g}"
        )
        for key, what in (("fixed_causes", "fixed"), ("broken_causes", "new failures")):
            if f[key]:
                listed = ", ".join(f"{c['cause']} {c['queries']}" for c in f[key])
                out.append(f"  causes of the {what}: {listed}")
        for key, what, under in (
            ("fixed_rival_unjudged", "fixed", f["system_a"]),
            ("broken_rival_unjudged", "broken", f["system_b"]),
        ):
            if f[key]:
                out.append(
                    f"  {f[key]} of the {what} ranked an unjudged item first under {under} "
                    "(rival unjudged: perhaps a hole in the judgements)"
                )
        if f["causes"]:
            listed = ", ".join(
                f"{c['cause']} {c['failures_a']} → {c['failures_b']}"
                + (" (reduced)" if c["reduced"] else "")
                for c in f["causes"]
            )
            out.append(f"  failures per cause, {f['system_a']} → {f['system_b']}: {listed}")
    return out
