"""A query searched on two collections side by side is read as a label the way search reads
it (``match_label``: "A dog" is the label dog), and its metrics are those of each side's
top 10, computed here by hand from the hits."""

from __future__ import annotations

import csv

import pytest

from lexlens.analysis.collections.indexing import build_index
from lexlens.analysis.compare.compare_collections import compare_indexes
from lexlens.analysis.search.search import search_index
from tests.helpers import ROOT

SOURCE = ROOT / "data" / "collection.csv"


def _reciprocal_rank(ids: list[str], relevant: set[str]) -> float:
    """1 / the rank of the first relevant id, 0 when none is."""
    return next((1.0 / r for r, i in enumerate(ids, start=1) if i in relevant), 0.0)


@pytest.mark.parametrize("query", ["A dog", "  the   Dog "])
def test_silent_wrong_a_query_naming_a_label_with_an_article_gets_metrics(query, tmp_path, splade):
    build_index(splade, SOURCE, tmp_path / "ix")
    with SOURCE.open(newline="") as handle:
        relevant = {r["id"] for r in csv.DictReader(handle) if "dog" in r["labels"].split(";")}
    result = compare_indexes(
        tmp_path / "ix", encoder_a=splade, gate_k=[768, 8], query=query, top=10
    )
    search = result.collection["search"]
    assert search["metrics"] is not None, "the label named with an article got no metrics"
    assert search["metrics"]["relevant"] == len(relevant) == 8
    for side in ("a", "b"):
        ids = [h["id"] for h in search[f"hits_{side}"]]
        assert search["metrics"][side]["RR@10"] == pytest.approx(_reciprocal_rank(ids, relevant))
        assert search["metrics"][side]["RR@1"] == (1.0 if ids[0] in relevant else 0.0)
    # lexlens search reads the same query as the same label: the same metric on side A.
    searched = search_index(tmp_path / "ix", splade, query=query, top=10)
    assert searched.relevant_count == len(relevant)
    assert searched.metrics["search"]["RR@10"] == search["metrics"]["a"]["RR@10"]
