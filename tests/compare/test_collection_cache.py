"""Compare on stored collections reads the stored vectors once per (index state, gate):
re-gating is the k largest stored weights plus the item's own tokens (checked against an
index built at that k and against a hand-made top-k), a second query reads no stored vector
and encodes only the query (counted), a changed index is read again, the cache stays
bounded, and a kept query brings its judgements (metrics checked with ir-measures)."""

from __future__ import annotations

import json
import shutil

import ir_measures
import numpy as np
import pytest

from lexlens.analysis.collections.indexing import build_index
from lexlens.analysis.collections.store import StoredIndex, open_index
from lexlens.analysis.collections.store_writer import write_index
from lexlens.analysis.compare.compare_collections import compare_indexes
from lexlens.analysis.compare.regate import regated_index
from lexlens.analysis.compare.side_cache import SIDE_CACHE
from lexlens.analysis.core.vocabulary import is_special_token
from lexlens.models import InputError
from tests.helpers import ROOT

SOURCE = ROOT / "data" / "collection.csv"
QUERIES = ["a dog on the beach", "snow", "a cat sleeping"]
N_ITEMS = 3000


def _numbers(value, path=""):
    """Every number of a JSON document with its path (to compare two documents to 1e-6)."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _numbers(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _numbers(v, f"{path}[{i}]")
    else:
        yield path, value


def _same(a: dict, b: dict) -> None:
    left, right = dict(_numbers(a)), dict(_numbers(b))
    assert left.keys() == right.keys()
    for key, x in left.items():
        if isinstance(x, float) and isinstance(right[key], float):
            assert x == pytest.approx(right[key], rel=1e-6, abs=1e-9), key
        else:
            assert x == right[key], key


@pytest.fixture(scope="module")
def built(tmp_path_factory, splade) -> dict[str, StoredIndex]:
    """The sample collection encoded at gate 768 and, directly, at gate 3."""
    root = tmp_path_factory.mktemp("cache")
    for k in (768, 3):
        build_index(splade, SOURCE, root / f"ix{k}", gate_k=k, encoder_spec="splade-tiny")
    return {k: root / f"ix{k}" for k in (768, 3)}


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory, splade) -> str:
    """3,000 texts of whole words, each stored at gate 40 with its token ids."""
    return str(_synthetic(tmp_path_factory.mktemp("synthetic") / "ix", splade.vocab, seed=0))


def _synthetic(path, vocab, seed: int):
    rng = np.random.default_rng(seed)
    words = [i for i, t in enumerate(vocab) if t.isalpha() and len(t) > 3][:5000]
    cls, sep = vocab.index("[CLS]"), vocab.index("[SEP]")
    rows = []
    for i in range(N_ITEMS):
        own = rng.choice(words, 8, replace=False)
        cols = np.unique(np.r_[own, rng.choice(words, 60, replace=False)])
        weights = rng.random(cols.size).astype(np.float32) + 0.01
        text = " ".join(vocab[t] for t in own)
        rows.append(({"id": f"t{i}", "text": text}, cols, weights, np.r_[cls, own, sep]))
    write_index(
        path,
        vocab,
        rows,
        encoder={"name": "splade-tiny"},
        gate_k=40,
        source={"path": "synthetic", "fingerprint": f"synthetic-{seed}"},
    )
    return path


def test_silent_wrong_regated_rows_are_the_k_largest_stored_weights_and_own_tokens(
    synthetic, splade
):
    base = open_index(synthetic)
    view = regated_index(base, 5, splade)
    vocab = base.vocab
    for i in range(0, N_ITEMS, 97):
        cols, vals = base.row(i)
        order = sorted(range(cols.size), key=lambda j: (-float(vals[j]), int(cols[j])))
        own = {vocab.index(w) for w in base.meta([i], ["text"])[0]["text"].split()}
        keep = {int(cols[j]) for j in order[:5]} | (own & {int(c) for c in cols})
        got_cols, got_vals = view.row(i)
        assert set(got_cols.tolist()) == keep
        expected = {int(c): float(v) for c, v in zip(cols, vals, strict=True) if int(c) in keep}
        assert dict(zip(got_cols.tolist(), got_vals.tolist(), strict=True)) == expected
    assert not any(is_special_token(vocab[c]) for c in view.indices[:1000])


def test_silent_wrong_regating_equals_an_index_built_at_that_k_for_several_queries(built, splade):
    """The old path (each side encoded at its own gate: the index built at k = 3) and the
    re-gated stored vectors give the same comparison, query after query (the later ones
    served by the cache), to 1e-6."""
    SIDE_CACHE.clear()
    for query in QUERIES:
        regated = compare_indexes(built[768], encoder_a=splade, gate_k=[768, 3], query=query)
        direct = compare_indexes(
            built[768], built[3], encoder_a=splade, gate_k=[768, 3], query=query
        )
        got, want = regated.collection, direct.collection
        _same(got["deviation"]["b"]["sets"], want["deviation"]["b"]["sets"])
        _same(got["vocabulary"], want["vocabulary"])
        _same(got["search"], want["search"])


def test_silent_wrong_an_index_without_token_ids_is_tokenised_again(built, splade, tmp_path):
    """An index built before token ids were kept: its own tokens come from the tokenizer,
    and the re-gated vectors are those of the index built at k = 3."""
    base = open_index(built[768])
    rows = [(m, *base.row(m["row"])) for m in base.meta(range(len(base)), ["id", "text", "labels"])]
    old = write_index(
        tmp_path / "old",
        base.vocab,
        rows,
        encoder={"name": "splade-tiny"},
        gate_k=768,
        source=base.manifest.source.to_dict(),
    )
    assert "token_ids.npy" not in old.manifest.files
    view, direct = regated_index(old, 3, splade), open_index(built[3])
    for i in range(len(direct)):
        assert np.array_equal(view.vector(i), direct.vector(i))


class _Reads:
    """Counts what a comparison reads: stored rows (every read of a stored index's vectors
    goes through ``StoredIndex.rows`` or ``mean_weights``; rows re-gated in memory are not
    stored reads) and the texts encoded."""

    def __init__(self, monkeypatch, encoder) -> None:
        self.rows = self.means = 0
        self.texts: list[str] = []
        rows, means, encode = StoredIndex.rows, StoredIndex.mean_weights, encoder.encode_texts

        def counted_rows(ix, start, stop):
            if isinstance(ix.data, np.memmap):  # the stored file (not vectors re-gated in memory)
                self.rows += stop - start
            return rows(ix, start, stop)

        def counted_means(ix, *args):
            self.means += 1
            return means(ix, *args)

        def counted_encode(texts, *args, **kwargs):
            self.texts += list(texts)
            return encode(texts, *args, **kwargs)

        monkeypatch.setattr(StoredIndex, "rows", counted_rows)
        monkeypatch.setattr(StoredIndex, "mean_weights", counted_means)
        monkeypatch.setattr(encoder, "encode_texts", counted_encode)


def test_unbounded_a_second_query_reads_no_stored_vector_and_encodes_only_itself(
    synthetic, splade, monkeypatch
):
    SIDE_CACHE.clear()
    reads = _Reads(monkeypatch, splade)
    first = compare_indexes(synthetic, encoder_a=splade, gate_k=[40, 6], query="alpha beta")
    assert reads.rows >= 2 * N_ITEMS and reads.means == 2  # both sides read every item
    assert reads.texts == ["alpha beta"]  # no item encoded: only the query, once
    reads.rows = reads.means = 0
    reads.texts.clear()
    second = compare_indexes(synthetic, encoder_a=splade, gate_k=[40, 6], query="gamma")
    assert reads.rows == 0 and reads.means == 0 and reads.texts == ["gamma"]
    assert second.collection["deviation"] == first.collection["deviation"]
    assert second.collection["search"]["query"] == "gamma"


def test_silent_wrong_a_changed_index_is_read_again(splade, tmp_path, monkeypatch):
    path = _synthetic(tmp_path / "ix", splade.vocab, seed=1)
    before = compare_indexes(path, encoder_a=splade, gate_k=[40, 6])
    rewritten = _synthetic(tmp_path / "new", splade.vocab, seed=2)
    shutil.rmtree(path)
    shutil.copytree(rewritten, path)
    reads = _Reads(monkeypatch, splade)
    after = compare_indexes(path, encoder_a=splade, gate_k=[40, 6])
    assert reads.rows >= 2 * N_ITEMS
    dev = "deviation"
    assert before.collection[dev] != after.collection[dev]
    SIDE_CACHE.clear()
    fresh = compare_indexes(path, encoder_a=splade, gate_k=[40, 6])
    assert json.dumps(after.to_dict()) == json.dumps(fresh.to_dict())


def test_unbounded_the_cache_keeps_a_bounded_number_of_sides(synthetic, splade):
    SIDE_CACHE.clear()
    for k in range(1, 10):
        compare_indexes(synthetic, encoder_a=splade, gate_k=[40, k])
        assert len(SIDE_CACHE.sides) <= SIDE_CACHE.max_sides
    assert len(SIDE_CACHE.sides) == SIDE_CACHE.max_sides


@pytest.fixture(scope="module")
def beir(tmp_path_factory, splade):
    """A BEIR folder of 6 items and 2 queries with graded judgements, indexed."""
    root = tmp_path_factory.mktemp("beir")
    docs = {
        "d1": "a dog on the beach",
        "d2": "a dog in the park",
        "d3": "a cat in the snow",
        "d4": "a red car on the road",
        "d5": "two dogs playing",
        "d6": "a kitten asleep",
    }
    (root / "qrels").mkdir()
    (root / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": d, "title": "", "text": t}) + "\n" for d, t in docs.items())
    )
    (root / "queries.jsonl").write_text(
        json.dumps({"_id": "q1", "text": "dogs"})
        + "\n"
        + json.dumps({"_id": "q2", "text": "a cat"})
        + "\n"
    )
    (root / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td5\t1\nq1\td3\t0\nq2\td3\t1\nq2\td6\t2\n"
    )
    build_index(splade, root, root / "ix", gate_k=768, encoder_spec="splade-tiny")
    return root / "ix"


def test_silent_wrong_a_kept_query_marks_its_judged_items_and_is_measured_by_them(beir, splade):
    qrels = {"q1": {"d1": 2, "d5": 1, "d3": 0}}
    result = compare_indexes(beir, encoder_a=splade, gate_k=[768, 2], query_id="q1")
    search = result.collection["search"]
    assert search["query"] == "dogs" and result.input["query_id"] == "q1"
    for side in ("a", "b"):
        hits = search[f"hits_{side}"]
        assert [h["relevance"] for h in hits] == [qrels["q1"].get(h["id"], 0) for h in hits]
        run = {"q1": {h["id"]: float(len(hits) - r) for r, h in enumerate(hits)}}
        expected = ir_measures.calc_aggregate(
            [ir_measures.parse_measure(m) for m in ("RR@10", "nDCG@10", "AP@10")], qrels, run
        )
        for name, value in expected.items():
            assert search["metrics"][side][str(name)] == pytest.approx(value)
    assert search["metrics"]["relevant"] == 2 and search["metrics"]["judged"] == "kept"
    assert all(h["relevance"] == qrels["q1"].get(h["id"], 0) for h in search["hits"])


def test_traceback_a_kept_query_is_refused_in_one_line_naming_it(beir, built, splade):
    with pytest.raises(InputError, match="'q9' is not one of the 2 queries"):
        compare_indexes(beir, encoder_a=splade, gate_k=[768, 2], query_id="q9")
    with pytest.raises(InputError, match="keeps no queries and judgements"):
        compare_indexes(built[768], encoder_a=splade, gate_k=[768, 2], query_id="q1")
    with pytest.raises(InputError, match="query_id: give a typed query or a kept query's id"):
        compare_indexes(beir, gate_k=[768, 2], query_id="q1", query="dogs")
