"""The settings of a benchmark's evaluation, declared once
(:mod:`lexlens.analysis.core.options`): ``lexlens evaluate`` derives its flags from
:class:`EvaluationOptions`, the Evaluation page its widgets; ``evaluate`` and
``evaluate_benchmark`` check their keywords through it."""

from __future__ import annotations

from dataclasses import dataclass

from lexlens.analysis.core.gating import GATE_K
from lexlens.analysis.core.options import QUERY_MODE, Options, option, shared
from lexlens.analysis.retrieval.options import TOP

#: How an outside run's tied scores are ordered (``ties``): as trec_eval orders them (score
#: read as a C float, then item id descending), or in the order the run lists them.
TIES_TREC_EVAL = "trec_eval"
TIES_AS_LISTED = "as-listed"
TIE_RULES = (TIES_TREC_EVAL, TIES_AS_LISTED)


@dataclass(frozen=True)
class EvaluationOptions(Options):
    """How a benchmark is evaluated (``lexlens evaluate``, the Evaluation page,
    ``evaluate_benchmark``): the items ranked per query, how the queries are encoded, how a
    run's ties are ordered and whether unjudged items count."""

    what = "evaluate"

    top: int = shared(TOP)
    query_mode: str = shared(QUERY_MODE)
    gate_k: int = shared(GATE_K)
    ties: str = option(
        TIES_TREC_EVAL,
        "an outside run's tied scores: ordered as trec_eval orders them (score as a C float, "
        "then item id descending), so every measure equals trec_eval's, or as-listed (the "
        "file's order); Lexlens's own rankings always break ties by collection row",
        choices=TIE_RULES,
        label="Run ties",
        widget="select",
    )
    judged_only: bool = option(
        False,
        "evaluate on judged items only: every unjudged item removed from each ranking before "
        "measuring and explaining (the condensed-list convention, Sakai 2007)",
        label="Judged items only",
    )
