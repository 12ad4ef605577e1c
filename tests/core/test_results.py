"""The result contract: JSON derived from fields, and a full state that rebuilds the record."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lexlens.analysis.attribution.subvector import SubvectorAttribution
from lexlens.analysis.attribution.topics import Topic
from lexlens.analysis.core.results import (
    Record,
    Result,
    StateError,
    internal,
    progress_part,
)


@dataclass(frozen=True)
class Leaf(Record):
    """A record of the tests: stored states may not name it (only package records)."""

    token: str
    weight: float
    pieces: tuple[int, ...] = internal(default=())


@dataclass(frozen=True)
class Tree(Result):
    file_stem = "tree"

    name: str
    leaves: list[Leaf]
    topics: list[Topic]
    by_m: dict[int, pd.DataFrame]
    series: pd.Series
    matrix: np.ndarray
    labels: frozenset[str]
    where: Path
    gate_k: int = 768
    odd: float = float("nan")
    notes: list[str] = field(default_factory=list)


def tree() -> Tree:
    frame = pd.DataFrame({"a": [1.5, 2.0], "b": ["x", "y"]}, index=[3, 7])
    return Tree(
        name="t",
        leaves=[],
        topics=[Topic(1, 7, [0, 2], ["a cat", "a dog"], {"cat": 0.5}, [[("cat", 0.5)]], 3)],
        by_m={12: frame, 24: frame.assign(a=[0.0, -1.0])},
        series=pd.Series({12: 3, 24: 5}, name="steps"),
        matrix=np.arange(6, dtype=np.float16).reshape(2, 3),
        labels=frozenset({"b", "a"}),
        where=Path("/tmp/x"),
        gate_k=32,
        notes=["one"],
    )


def test_json_is_derived_from_fields_in_order_without_internal_ones():
    doc = Leaf("cat", 0.5, (1, 2)).to_dict()
    assert doc == {"token": "cat", "weight": 0.5}
    assert list(tree().to_dict())[:4] == ["name", "leaves", "topics", "by_m"]
    assert tree().to_dict()["gate_k"] == 32  # a JSON key is its field's name
    assert json.loads(tree().files()["tree.json"])["topics"][0]["code"] == 7


def test_state_survives_json_and_rebuilds_the_same_record():
    original = tree()
    state = json.loads(json.dumps(original.to_state(), allow_nan=False))
    back = Tree.from_state(state)
    assert back.topics == original.topics and back.topics[0].per_text[0][0] == ("cat", 0.5)
    for m in (12, 24):
        pd.testing.assert_frame_equal(back.by_m[m], original.by_m[m])
    pd.testing.assert_series_equal(back.series, original.series)
    assert back.matrix.dtype == np.float16 and np.array_equal(back.matrix, original.matrix)
    assert back.labels == original.labels and isinstance(back.labels, frozenset)
    assert back.where == original.where and back.gate_k == 32 and math.isnan(back.odd)


def test_a_real_record_with_derived_fields_round_trips():
    record = SubvectorAttribution(
        text="a cat",
        tokens=["[CLS]", "a", "cat", "[SEP]"],
        words=["a", "cat"],
        word_groups=[[1], [2]],
        subvectors=[0, 1],
        codes=np.array([3, 7]),
        token_attributions=np.array([[0.0, 0.1, 0.2, 0.0], [0.0, -0.1, 0.3, 0.0]]),
        attributions=np.array([[0.1, 0.2], [-0.1, 0.3]]),
        delta=np.array([0.01, -0.02]),
        global_attributions=np.array([0.05, 0.4]),
        global_delta=0.003,
        steps=16,
        truncated=False,
    )
    back = SubvectorAttribution.from_state(json.loads(json.dumps(record.to_state())))
    assert json.dumps(back.to_dict(), default=str) == json.dumps(record.to_dict(), default=str)
    assert np.array_equal(back.target_gap, record.target_gap)


@pytest.mark.parametrize(
    "state, message",
    [
        ({"token": {"__record__": ["tests.core.test_results", "Leaf", {}]}}, "not a Lexlens"),
        ({"token": "a", "weight": 1.0, "evil": 1}, "unknown fields"),
        ({"token": {"__record__": ["os", "system", {}]}, "weight": 1.0}, "not a Lexlens record"),
        (
            {"token": {"__record__": ["lexlens.analysis.core.results", "Nope", {}]}, "weight": 1},
            "does not exist",
        ),
        (
            {"token": {"__record__": ["lexlens.analysis.core.results", "Path", {}]}, "weight": 1},
            "not a record",
        ),
        (["not", "a", "mapping"], "not a mapping"),
    ],
)
def test_a_stored_state_that_is_not_one_of_our_records_is_refused(state, message):
    with pytest.raises(StateError, match=message):
        Leaf.from_state(state)


def test_progress_part_maps_onto_its_share_of_the_bar():
    seen = []
    part = progress_part(lambda f, m: seen.append((round(f, 6), m)), 0.5, 0.75, "b: ")
    part(0.0, "start")
    part(2.0, "over")
    assert seen == [(0.5, "b: start"), (0.75, "b: over")]
    assert progress_part(None, 0, 1) is None
