"""The one scorer of a collection and the one query rule: one scorer per collection, kept no
longer than the collection; an item's rank at any depth and every item's scores agree to the
bit (one arithmetic), against a numpy reference; the query rule's sparse form is the gate's."""

from __future__ import annotations

import ast
import gc
import json
import weakref
from pathlib import Path

import numpy as np
import pytest

from lexlens.analysis.collections.indexing import build_index
from lexlens.analysis.collections.store import open_index
from lexlens.analysis.core.gating import gate
from lexlens.analysis.retrieval import scorer as scorer_module
from lexlens.analysis.retrieval.queries import QuerySpec
from lexlens.analysis.retrieval.scorer import place, scorer_for

ROOT = Path(__file__).resolve().parents[2]
BEIR = ROOT / "data" / "benchmarks" / "imagenet_beir"
QUERIES = [json.loads(line)["text"] for line in (BEIR / "queries.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def folder(tmp_path_factory, splade):
    """The packaged BEIR sample (223 items) indexed with splade-tiny."""
    out = tmp_path_factory.mktemp("scorer") / "ix"
    build_index(splade, BEIR, out)
    return out


def test_one_scorer_per_collection_kept_no_longer_than_it(folder):
    index = open_index(folder)
    scorer = scorer_for(index)
    assert scorer_for(index) is scorer and scorer.collection is index
    again = open_index(folder)  # another opened collection: its own scorer
    assert scorer_for(again) is not scorer
    alive = weakref.ref(index)
    del index
    gc.collect()
    assert alive() is None  # the scorer does not keep its collection open
    assert len([s for s in scorer_module._SCORERS.values() if s is scorer]) == 0
    with pytest.raises(ReferenceError):
        _ = scorer.collection


def test_rank_of_and_every_item_scores_are_one_arithmetic(folder, splade):
    """An item's exact score from its stored row equals its score among every item's, to
    the bit, so the rank an evaluation gives it and its place among all scores agree; both
    against a numpy ranking of the dense vectors."""
    index = open_index(folder)
    scorer = scorer_for(index)
    dense = index.rows(0, len(index)).toarray().astype(np.float64)
    spec = QuerySpec(splade)
    checked = 0
    for text in QUERIES[:12]:
        q = spec.vector(text)
        every = scorer.all_scores(q)[0]
        reference = dense @ q.astype(np.float64)
        order = [int(r) for r in np.lexsort((np.arange(len(index)), -reference))]
        for row in order[:8] + order[60:64]:
            rank, score = scorer.rank_of(q, row)
            assert score == every[row]  # bit for bit: the same products, in the same order
            assert rank == place(every, row).rank
            assert score == pytest.approx(reference[row], rel=1e-12)
            if reference[row] > 0:
                assert rank == order.index(row) + 1
                checked += 1
        # another row is another rank
        assert scorer.rank_of(q, order[0])[0] == 1 != scorer.rank_of(q, order[1])[0]
    assert checked > 50


def test_the_sparse_form_is_the_gates_vector(splade):
    """Kept sparse, a query vector holds exactly the gate's non-zero terms and weights,
    whether the gate keeps every positive weight (read without it) or cuts some; each
    distinct text is encoded once and counted."""
    texts = QUERIES[:20] + QUERIES[:5] + [""]
    for gate_k in (768, 16):
        spec = QuerySpec(splade, "parametric", gate_k)
        spec.encode_sparse(texts)
        assert spec.calls == 20  # distinct, non-empty texts only
        reference = QuerySpec(splade, "parametric", gate_k).encode(QUERIES[:20])
        kept_whole = [np.count_nonzero(e.weights) <= gate_k for _, e in reference]
        assert any(kept_whole) if gate_k == 768 else not all(kept_whole)  # both ways exercised
        for text, (vector, encoding) in zip(QUERIES[:20], reference, strict=True):
            cols, vals = spec.sparse(text)
            gated = gate(encoding, splade.vocab, gate_k)
            assert np.array_equal(vector, gated)
            assert np.array_equal(cols, np.flatnonzero(gated))
            assert vals.dtype == np.float32 and np.array_equal(vals, gated[cols])
        cols, vals = spec.sparse("")
        assert cols.size == vals.size == 0  # every word deleted: an empty query scores 0
        assert spec.calls == 20  # nothing encoded again


def _importers(name: str) -> set[str]:
    """The package's modules (analysis/, app/) that import from ``name``."""
    found = set()
    for path in [*(ROOT / "analysis").rglob("*.py"), *(ROOT / "app").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == name:
                found.add(path.relative_to(ROOT).as_posix())
    return found


def test_one_place_makes_query_vectors_and_one_scores_them():
    """The exact MaxScore engine is called by the scorer alone, and the bag-of-words query
    is made by the query rule alone."""
    assert _importers("lexlens.analysis.retrieval.ranking") == {"analysis/retrieval/scorer.py"}
    assert _importers("lexlens.analysis.retrieval.pruning") == {"analysis/retrieval/ranking.py"}
    bow = {
        p
        for p in _importers("lexlens.analysis.core.gating")
        if "bow_query" in (ROOT / p).read_text(encoding="utf-8")
    }
    assert bow == {"analysis/retrieval/queries.py"}
