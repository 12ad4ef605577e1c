"""``make bench-scale``'s writer: the JsonVectorCollection and the queries it writes have the
stated non-zero averages of SPLADE on MS MARCO, integer impacts, distinct terms; and the
Seismic setting picked for an accuracy target is the fastest that reaches it."""

from __future__ import annotations

import json

import numpy as np

from bench import scale


def _read(path):
    """Every line's vector, its keys as written (a repeated key would be kept)."""
    vectors = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            vectors.append(json.loads(line, object_pairs_hook=lambda pairs: pairs))
    return [dict(v)["vector"] for v in vectors], [dict(v)["id"] for v in vectors]


def test_the_collection_has_splades_document_sparsity_in_integer_impacts(tmp_path):
    items = 4000
    stated = scale.write_collection(tmp_path / "docs.jsonl", items)
    vectors, ids = _read(tmp_path / "docs.jsonl")
    assert ids == [f"d{i}" for i in range(items)]
    counts = np.array([len(v) for v in vectors])
    # counts ~ gamma(8, 119 / 8): sd 119 / √8 ≈ 42, so the mean of 4,000 has sd ≈ 0.67
    assert abs(counts.mean() - scale.DOC_NNZ) < 3.0
    assert stated["mean_nnz"] == counts.mean() and stated["vectors"] == items
    assert stated["max_nnz"] == counts.max() and stated["min_nnz"] == counts.min() >= 1
    for pairs in vectors[:500]:
        terms = [t for t, _ in pairs]
        assert len(set(terms)) == len(terms)  # no term twice in an item
        assert all(isinstance(w, int) and w >= 1 for _, w in pairs)


def test_the_queries_have_splades_query_sparsity_around_a_judged_item(tmp_path):
    from lexlens.analysis.collections.store import open_index
    from lexlens.analysis.collections.vector_import import import_vectors

    scale.write_collection(tmp_path / "docs.jsonl", 3000)
    import_vectors(None, tmp_path / "docs.jsonl", tmp_path / "ix", scale=scale.SCALE)
    stated = scale.write_queries(tmp_path / "ix", tmp_path / "q.jsonl", tmp_path / "qrels", 2000)
    vectors, ids = _read(tmp_path / "q.jsonl")
    counts = np.array([len(v) for v in vectors])
    # sd 43 / √8 ≈ 15.2 per query: the mean of 2,000 has sd ≈ 0.34
    assert abs(counts.mean() - scale.QUERY_NNZ) < 2.0
    assert stated["mean_nnz"] == counts.mean()
    assert all(w > 0 for pairs in vectors for _, w in pairs)
    for pairs in vectors:
        terms = [t for t, _ in pairs]
        assert len(set(terms)) == len(terms)
    # one judgement a query: the item it was drawn around, which holds half its terms
    judged = [line.split() for line in (tmp_path / "qrels").read_text().splitlines()]
    assert [q for q, *_ in judged] == ids and all(r == "1" for *_, r in judged)
    ix = open_index(tmp_path / "ix")
    row_of = {item: r for r, item in enumerate(ix.column("id"))}
    for (_, _, item, _), pairs in zip(judged[:300], vectors[:300], strict=True):
        own = {ix.vocab[c] for c in ix.row(row_of[item])[0].tolist()}
        shared = sum(t in own for t, _ in pairs)
        assert shared >= min(len(pairs) // 2, len(own))


def test_the_seismic_setting_is_the_fastest_reaching_the_target():
    sweep = [
        {"accuracy_at_10": 0.91, "median_ms": 0.2},
        {"accuracy_at_10": 0.96, "median_ms": 0.5},
        {"accuracy_at_10": 0.98, "median_ms": 0.4},
        {"accuracy_at_10": 0.99, "median_ms": 0.9},
    ]
    assert scale.seismic_at(sweep, 0.90) == sweep[0]
    assert scale.seismic_at(sweep, 0.95) == sweep[2]  # faster than the 0.96 one
    assert scale.seismic_at(sweep[:2], 0.97) == sweep[1]  # none reaches it: the most accurate
