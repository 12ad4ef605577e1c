"""The one metrics layer: each measure parsed once, every spelling of it given its value."""

from __future__ import annotations

import ir_measures

from lexlens.analysis.core.metrics import measure

#: q1 finds its one relevant item second; q2 never finds its own.
RUN = {"q1": [("d1", 3.0), ("d2", 2.0), ("d3", 1.0)], "q2": [("d9", 1.0)]}
QRELS = {"q1": {"d2": 1}, "q2": {"d4": 1}}


def test_unbounded_each_measure_is_parsed_once(monkeypatch):
    parse = ir_measures.parse_measure
    asked = []
    monkeypatch.setattr(
        ir_measures, "parse_measure", lambda name: asked.append(name) or parse(name)
    )
    measure(RUN, QRELS, ["RR@10", "R@5", "nDCG@10", "RR@10"])
    assert asked == ["RR@10", "R@5", "nDCG@10"]


def test_silent_wrong_two_spellings_of_one_measure_both_get_its_value():
    """``R@5`` and ``Recall@5`` name one measure: each column holds its value (the second
    spelling took them all and the first stayed 0). By hand: q1's relevant item is at rank
    2 (RR 1/2, recall 1), q2's is not found (0)."""
    aggregate, per_query = measure(RUN, QRELS, ["R@5", "Recall@5", "RR@10"])
    assert per_query == {
        "q1": {"R@5": 1.0, "Recall@5": 1.0, "RR@10": 0.5},
        "q2": {"R@5": 0.0, "Recall@5": 0.0, "RR@10": 0.0},
    }
    assert aggregate == {"R@5": 0.5, "Recall@5": 0.5, "RR@10": 0.25}
