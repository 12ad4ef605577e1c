"""The settings of a benchmark's evaluation, declared once
(:mod:`lexlens.analysis.core.options`): ``lexlens evaluate`` derives its flags from
:class:`EvaluationOptions`, the Evaluation page its widgets; ``evaluate`` and
``evaluate_benchmark`` check their keywords through it."""

from __future__ import annotations

from dataclasses import dataclass

from lexlens.analysis.core.gating import GATE_K
from lexlens.analysis.core.options import QUERY_MODE, Options, shared
from lexlens.analysis.retrieval.options import TOP


@dataclass(frozen=True)
class EvaluationOptions(Options):
    """How a benchmark is evaluated (``lexlens evaluate``, the Evaluation page,
    ``evaluate_benchmark``): the items ranked per query and how the queries are encoded."""

    what = "evaluate"

    top: int = shared(TOP)
    query_mode: str = shared(QUERY_MODE)
    gate_k: int = shared(GATE_K)
