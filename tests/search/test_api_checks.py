"""search, search_index and search_file refuse a wrong type or value of every argument with
one LexlensError naming it (never a TypeError or AttributeError traceback), before any
model loads; search's caches leave with their collection; any collection that answers the
Collection protocol is searched as the kinds the package makes."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

from lexlens.analysis.collections.indexing import build_index
from lexlens.analysis.collections.memory import MemoryCollection
from lexlens.analysis.collections.store import open_index
from lexlens.analysis.core.collection import Collection
from lexlens.analysis.retrieval import ranking
from lexlens.analysis.search.options import SearchOptions
from lexlens.analysis.search.search import search, search_file, search_index
from tests.helpers import refused
from tests.search.test_search import ToyEncoder, toy_collection

#: A wrong value of each option, and the start of the one message that refuses it.
WRONG_OPTIONS = [
    ({"top": 0}, "top must be an integer from 1 to 10,000, not 0"),
    ({"top": "3"}, "top must be an integer"),
    ({"gate_k": "all"}, "gate_k must be -1"),
    ({"gate_k": -2}, "gate_k must be -1"),
    ({"query_mode": "dense"}, "query_mode must be one of parametric, bow"),
    ({"method": "svm"}, "method must be one of sr, avg, text"),
    ({"k_items": 0}, "k_items must be an integer from 1 to 10,000"),
    ({"k_items": 2.5}, "k_items must be an integer"),
    ({"coverage": 0}, "coverage must be a share in (0, 1]"),
    ({"coverage": 1.5}, "coverage must be a share in (0, 1]"),
    ({"coverage": float("nan")}, "coverage must be a share in (0, 1]"),
    ({"magnitude": "max"}, "magnitude must be one of sum, l2"),
    ({"normalize": "yes"}, "normalize must be true or false"),
    ({"slq_template": 5}, "slq_template must be a text"),
    ({"slq_template": "{a} minus {c}"}, "slq_template may name {a} and {b} only"),
    ({"explain": -1}, "explain must be an integer from 0"),
    ({"evaluate": 1}, "evaluate must be true or false"),
    ({"bogus": 1}, "'bogus' is not an option of search"),
    ({"options": {"top": 3}}, "options must be SearchOptions, not dict"),
]


@pytest.fixture(scope="module")
def toy_index(tmp_path_factory):
    root = tmp_path_factory.mktemp("toy")
    (root / "toy.txt").write_text("dog beach\ndog park\ncat beach\ndog snow\n")
    build_index(ToyEncoder(), root / "toy.txt", root / "ix")
    return root / "ix"


@pytest.mark.parametrize(("given", "needle"), WRONG_OPTIONS)
def test_traceback_search_refuses_each_wrong_option(given, needle):
    refused(lambda: search(toy_collection(), ToyEncoder(), "dog", exclude="beach", **given), needle)


@pytest.mark.parametrize(("given", "needle"), WRONG_OPTIONS)
def test_traceback_search_index_and_file_refuse_each_wrong_option(given, needle, toy_index):
    refused(lambda: search_index(toy_index, ToyEncoder(), query="dog", **given), needle)
    refused(lambda: search_file("data/collection.csv", 42, query="dog", **given), needle)


def test_traceback_search_names_each_wrong_argument():
    col, enc = toy_collection(), ToyEncoder()
    for call, needle in [
        (lambda: search(42, enc, "dog"), "collection must be a stored index or a collection"),
        (lambda: search("data/collection.csv", enc, "dog"), "collection must be an opened"),
        (lambda: search(col, 42, "dog"), "encoder must be an encoder"),
        (lambda: search(col, enc, ["dog"]), "query must be text, not list"),
        (lambda: search(col, enc, query_image=42), "query_image must be an image file's path"),
        (lambda: search(col, enc, query_image=b"x", image_name=3), "image_name must be text"),
        (lambda: search(col, enc, "dog", exclude=7), "exclude must be text, not int"),
        (lambda: search(col, enc), "give a text query or a query image"),
        (lambda: search(col, enc, "  "), "the query is empty"),
        (lambda: search(col, enc, "dog", coverage=0.3), "coverage applies to the sr exclusion"),
        (
            lambda: search(col, enc, "dog", exclude="beach", method="avg", k_items=3),
            "k_items applies to the sr exclusion",
        ),
        (lambda: search(col, enc, query_image=b"x", exclude="beach"), "needs a text query A"),
        (lambda: search(col, enc, query_image=b"x", query_mode="bow"), "needs a text query"),
        (lambda: search(col, enc, query_image=b"not an image"), "not an image"),
    ]:
        refused(call, needle)


def test_traceback_search_index_names_each_wrong_argument(toy_index, tmp_path):
    enc = ToyEncoder()
    for call, needle in [
        (lambda: search_index(42, enc, query="dog"), "index must be a stored index or its folder"),
        (lambda: search_index(tmp_path / "none", enc, query="dog"), "none"),
        (lambda: search_index(toy_index, 42, query="dog"), "query_encoder must be an encoder"),
        (lambda: search_index(toy_index, enc, query=b"dog"), "query must be text, not bytes"),
        (lambda: search_index(toy_index, enc, query_image=4.5), "query_image must be"),
        (lambda: search_index(toy_index, enc, query_image=tmp_path / "no.png"), "not found"),
        (lambda: search_index(toy_index, enc, query="dog", exclude=["cat"]), "exclude must be"),
        (lambda: search_index(toy_index, enc, query="dog", device=0), "device must be"),
        (lambda: search_index(toy_index, enc, query="dog", device="tpu"), "unknown device"),
        (
            lambda: search_index(toy_index, enc, query="dog", options=SearchOptions, top=3),
            "options must be SearchOptions",
        ),
    ]:
        refused(call, needle)


def test_traceback_search_file_names_each_wrong_argument(tmp_path):
    enc = ToyEncoder()
    for call, needle in [
        (lambda: search_file(42, enc, query="dog"), "collection must be the path of a .txt"),
        (lambda: search_file(b"dog\n", enc, query="dog"), "collection must be the path"),
        (lambda: search_file(tmp_path / "no.csv", enc, query="dog"), "not found"),
        (lambda: search_file("data/collection.csv", 42, query="dog"), "encoder must be"),
        (lambda: search_file("data/collection.csv", enc, query=1), "query must be text"),
        (
            lambda: search_file("data/collection.csv", enc, query="dog", exclude=1),
            "exclude must be text",
        ),
        (
            lambda: search_file("data/collection.csv", enc, query="dog", device=1.0),
            "device must be",
        ),
    ]:
        refused(call, needle)


def test_unbounded_search_caches_leave_with_their_collection(toy_index):
    """Search keeps a stored index's CSR and exact postings beside it (never in its
    ``__dict__``) and drops them when the index goes."""
    index = open_index(toy_index)
    before = set(vars(index))
    result = search(index, ToyEncoder(), "dog", exclude="beach")
    assert [h.id for h in result.results] and set(vars(index)) == before
    assert index in ranking._POSTINGS
    gone = weakref.ref(index)
    entries = len(ranking._POSTINGS)
    del index, result
    gc.collect()
    assert gone() is None and len(ranking._POSTINGS) <= entries - 1


class _Rows:
    """A collection of another kind: only what the Collection protocol declares."""

    def __init__(self, inner: MemoryCollection) -> None:
        self._inner = inner
        self.modality, self.vocab, self.vocab_size = "text", inner.vocab, inner.vocab_size
        self.has_labels, self.encoder_name, self.norms = True, "toy", inner.norms

    def __len__(self) -> int:
        return len(self._inner)

    def row(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        return self._inner.row(i)

    def meta(self, rows, columns=None) -> list[dict]:
        return self._inner.meta(rows, columns)

    def column(self, name: str) -> list:
        return self._inner.column(name)

    def describe(self) -> dict:
        return self._inner.describe()

    label, path, gate_k, encoder_spec = "rows", None, 10, "toy"
    known_words, benchmark_files = frozenset(), None

    @property
    def vocab_hash(self) -> str:
        return self._inner.vocab_hash

    @property
    def fingerprint(self) -> str:
        return self._inner.fingerprint

    def matrix(self):
        return self._inner.matrix()

    def kept_benchmark(self) -> None:
        return None


def test_silent_wrong_any_collection_is_searched_as_the_packaged_kinds(toy_index):
    """Search reads a collection through the protocol only: one that is neither a stored
    index nor a MemoryCollection gets the same hits, scores and sets as both."""
    col = toy_collection()
    other = _Rows(col)
    assert isinstance(other, Collection) and isinstance(col, Collection)
    assert isinstance(open_index(toy_index), Collection)
    for kwargs in ({}, {"exclude": "beach", "k_items": 2}, {"exclude": "beach", "method": "avg"}):
        mine, theirs = (search(c, ToyEncoder(), "dog", **kwargs) for c in (col, other))
        assert mine.results and mine.to_dict() == theirs.to_dict()


def test_silent_wrong_an_empty_query_encoder_is_refused_not_read_as_the_default(toy_index):
    """An empty text is no encoder: search_index, evaluate_index and deviation_of_index refuse
    it naming the argument, as they refuse any other wrong spec (it was read as "the index's
    own encoder" by search_index alone)."""
    from lexlens.analysis.deviation.deviation import deviation_of_index
    from lexlens.analysis.search.table_evaluation import evaluate_index

    table = toy_index.parent / "queries.csv"
    table.write_text("query,relevant\ndog,0\n")
    for spec in ("", "   "):
        refused(lambda s=spec: search_index(toy_index, s, query="dog"), "query_encoder must be")
        refused(lambda s=spec: evaluate_index(toy_index, table, s), "query_encoder must be")
        refused(lambda s=spec: deviation_of_index(toy_index, s), "encoder must be")
