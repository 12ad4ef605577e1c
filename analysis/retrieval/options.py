"""The settings retrieval shares, declared once (:mod:`lexlens.analysis.core.options`): the
items ranked per query (:data:`TOP`), for an evaluation and for a TREC run alike."""

from __future__ import annotations

from lexlens.analysis.core.metrics import MAX_RANKED
from lexlens.analysis.core.options import shared_option

#: Items ranked per query: R@100 and AP@100 need 100. At most 2^24: the longest ranking
#: whose scores stay distinct as trec_eval reads them (float32).
DEFAULT_TOP = 100
TOP = shared_option(
    "top",
    int,
    DEFAULT_TOP,
    low=1,
    high=MAX_RANKED,
    label="Items per query",
    widget="number",
    help="items ranked per query",
)
