"""Search, SR exclusion mechanics and the ranking metrics, against independent references."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lexlens.analysis.search import (
    Collection,
    average_precision,
    covering_dimensions,
    evaluate_exclusion,
    exclusion_search,
    ndcg,
    reciprocal_rank,
    search,
)
from lexlens.models import InputError

VOCAB = ["dog", "beach", "park", "cat", "snow"]


def _toy() -> Collection:
    vectors = np.array(
        [
            [3, 2, 0, 0, 0],  # dog on beach
            [3, 0, 2, 0, 0],  # dog in park
            [0, 3, 0, 2, 0],  # cat on beach
            [2, 0, 0, 0, 1],  # dog in snow
        ],
        dtype=np.float32,
    )
    labels = [{"dog", "beach"}, {"dog", "park"}, {"cat", "beach"}, {"dog", "snow"}]
    return Collection(
        ["a", "b", "c", "d"], ["dog beach", "dog park", "cat beach", "dog snow"], vectors, labels
    )


def test_covering_dimensions_is_the_smallest_covering_set():
    vectors = np.array([[4, 3, 2, 1, 0]], dtype=np.float32)  # mass 10
    assert list(covering_dimensions(vectors, 0.4)) == [0]  # 4/10
    assert list(covering_dimensions(vectors, 0.5)) == [0, 1]  # 7/10
    assert list(covering_dimensions(vectors, 1.0)) == [0, 1, 2, 3]
    with pytest.raises(InputError):
        covering_dimensions(vectors, 0)


def test_exclusion_is_set_difference_then_magnitude_ranking():
    col = _toy()
    q_dog = np.array([1, 0, 0, 0, 0], dtype=np.float32)
    q_beach = np.array([0, 1, 0, 0, 0], dtype=np.float32)
    result = exclusion_search(col, q_dog, q_beach, VOCAB, k_items=1, coverage=0.5, top=4)
    # Top-1 for "dog": item a (score 3, first in order) → D1 = {dog}; top-1 for "beach":
    # item c → D2 = {beach}; D = {dog}.
    assert [VOCAB[i] for i in result.kept_dims] == ["dog"]
    norms = np.linalg.norm(col.vectors, axis=1)
    reference = col.vectors[:, 0] / norms
    assert [h.id for h in result.hits] == [
        col.ids[i] for i in np.argsort(-reference, kind="stable")
    ]
    assert result.hits[0].id == "d"  # the dog whose mass is least elsewhere
    assert result.hits[-1].id == "c"


def test_search_scores_are_inner_products_explained_by_terms():
    col = _toy()
    query = np.array([1, 0.5, 0, 0, 0], dtype=np.float32)
    hits = search(col, query, VOCAB, top=2)
    assert [h.id for h in hits] == ["a", "b"]
    assert hits[0].score == pytest.approx(4.0)
    assert sum(c["contribution"] for c in hits[0].top_contributions) == pytest.approx(4.0)


def test_ranking_metrics_by_hand():
    ranked = [False, True, False, True]
    assert reciprocal_rank(ranked, 1) == 0 and reciprocal_rank(ranked, 10) == 0.5
    assert average_precision(ranked, 2, 10) == pytest.approx((1 / 2 + 2 / 4) / 2)
    ideal = 1 + 1 / np.log2(3)
    assert ndcg(ranked, 2, 10) == pytest.approx((1 / np.log2(3) + 1 / np.log2(5)) / ideal)


def test_evaluate_exclusion_on_label_pairs():
    col = _toy()
    perfect = {
        "oracle": lambda a, b: ["b", "d", "a", "c"],
        "worst": lambda a, b: ["c", "a", "b", "d"],
    }
    table = evaluate_exclusion(col, [("dog", "beach")], perfect)
    assert table["oracle"]["MRR@1"] == 1.0 and table["oracle"]["AP@10"] == 1.0
    assert table["worst"]["MRR@10"] == pytest.approx(1 / 3)


def test_search_cli_with_exclusion(cli):
    proc = cli(
        "search", "--encoder", "splade-tiny", "--collection", "data/collection.csv",
        "--query", "dog", "--top", "5", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout)["results"]
    assert len(results) == 5 and all(
        {"id", "score", "top_contributions"} <= set(r) for r in results
    )
    proc = cli(
        "search", "--encoder", "splade-tiny", "--collection", "data/collection.csv",
        "--query", "dog", "--exclude", "beach", "--k-items", "5", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    assert set(payload["kept_terms"]) == set(payload["include_terms"]) - set(
        payload["exclude_terms"]
    )
    proc = cli("search", "--encoder", "splade-tiny", "--collection", "nope.csv", "--query", "x")
    assert proc.returncode == 2 and "not found" in proc.stderr
