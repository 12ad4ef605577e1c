"""A table's evaluation (``evaluate_index``, ``lexlens search --eval``, and ``evaluate`` on any
collection) refuses a wrong type or value of any argument with one LexlensError naming the
argument (an unknown or older keyword names itself), and on the command line as the flag."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

import lexlens
from lexlens.analysis.collections.indexing import build_index
from lexlens.analysis.collections.store import open_index
from lexlens.analysis.search.options import SearchOptions
from lexlens.analysis.search.table_evaluation import TableEvaluationOptions, evaluate
from lexlens.models.base import InputError
from tests.helpers import ROOT, argument_cases, one_line_error, refused

PAIRS = [{"a": "dog", "b": "beach"}, {"a": "cat", "b": "snow"}]


@pytest.fixture(scope="module")
def index(tmp_path_factory, splade) -> Path:
    """The labelled sample texts (data/collection.csv) indexed with splade-tiny, and a pairs
    file."""
    folder = tmp_path_factory.mktemp("eval-api")
    build_index(splade, ROOT / "data" / "collection.csv", folder / "ix")
    (folder / "pairs.csv").write_text("a,b\ndog,beach\ncat,snow\n")
    return folder / "ix"


def _index(ix: Path, **given):
    return lexlens.evaluate_index(ix, ix.parent / "pairs.csv", **given)


def _evaluate(ix: Path, splade, **given):
    return evaluate(open_index(ix), splade, given.pop("rows", PAIRS), **given)


#: (argument, the call given the index and splade-tiny, what the message says).
EVALUATE_INDEX = [
    (
        "index",
        lambda ix, s: lexlens.evaluate_index(5, ix.parent / "pairs.csv"),
        "index must be a stored index",
    ),
    (
        "index",
        lambda ix, s: lexlens.evaluate_index(ix.parent / "none", ix.parent / "pairs.csv"),
        "not found",
    ),
    ("eval_file", lambda ix, s: lexlens.evaluate_index(ix, 5), "eval_file must be"),
    ("eval_file", lambda ix, s: lexlens.evaluate_index(ix, ix.parent / "none.csv"), "not found"),
    ("eval_file", lambda ix, s: lexlens.evaluate_index(ix, ix / "manifest.json"), "manifest"),
    ("query_encoder", lambda ix, s: _index(ix, query_encoder=5), "query_encoder must be"),
    ("query_encoder", lambda ix, s: _index(ix, query_encoder="nope-encoder"), "nope-encoder"),
    ("device", lambda ix, s: _index(ix, device=1), "device must be"),
    ("device", lambda ix, s: _index(ix, device="tpu"), "device 'tpu'"),
    ("progress", lambda ix, s: _index(ix, progress=True), "progress must be a function"),
    (
        "options",
        lambda ix, s: _index(ix, options=SearchOptions()),
        "options must be TableEvaluationOptions, not SearchOptions",
    ),
    ("gate_k", lambda ix, s: _index(ix, gate_k=-3), "gate_k must be -1"),
    ("query_mode", lambda ix, s: _index(ix, query_mode="sparse"), "query_mode must be one of"),
    ("methods", lambda ix, s: _index(ix, methods="sr"), "methods must be one or more of"),
    ("methods", lambda ix, s: _index(ix, methods=("sr", "sr")), "methods must be one or more"),
    ("methods", lambda ix, s: _index(ix, methods=()), "methods must be one or more of"),
    ("k_items", lambda ix, s: _index(ix, k_items=0), "k_items must be an integer"),
    ("coverage", lambda ix, s: _index(ix, coverage=1.5), "coverage must be a share"),
    ("magnitude", lambda ix, s: _index(ix, magnitude="max"), "magnitude must be one of"),
    ("normalize", lambda ix, s: _index(ix, normalize="yes"), "normalize must be true or false"),
    ("slq_template", lambda ix, s: _index(ix, slq_template="{a} only"), "slq_template needs"),
    ("slq_template", lambda ix, s: _index(ix, slq_template=5), "slq_template must be"),
    ("min_relevant", lambda ix, s: _index(ix, min_relevant=0), "min_relevant must be"),
    ("min_relevant", lambda ix, s: _index(ix, min_relevant=1.0), "min_relevant must be"),
    ("topk", lambda ix, s: _index(ix, topk=5), "'topk' is now 'gate_k'"),
    ("mode", lambda ix, s: _index(ix, mode="bow"), "'mode' is now 'query_mode'"),
]
EVALUATE = [
    ("target", lambda ix, s: evaluate(str(ix), s, PAIRS), "collection must be an opened"),
    ("target", lambda ix, s: evaluate(5, s, PAIRS), "collection must be a stored index"),
    (
        "encoder",
        lambda ix, s: evaluate(open_index(ix), "splade-tiny", PAIRS),
        "encoder must be a loaded encoder",
    ),
    ("rows", lambda ix, s: _evaluate(ix, s, rows="a,b"), "rows: expected rows of a table"),
    ("rows", lambda ix, s: _evaluate(ix, s, rows=[]), "rows: holds no rows"),
    ("rows", lambda ix, s: _evaluate(ix, s, rows=[{"a": "dog"}]), "needs columns 'a' and 'b'"),
    ("rows", lambda ix, s: _evaluate(ix, s, rows=[{"a": "dog", "b": ""}]), "row 1 needs both"),
    ("progress", lambda ix, s: _evaluate(ix, s, progress=3), "progress must be a function"),
    ("options", lambda ix, s: _evaluate(ix, s, options=5), "options must be TableEvaluation"),
    ("gate_k", lambda ix, s: _evaluate(ix, s, gate_k="all"), "gate_k must be -1"),
    ("query_mode", lambda ix, s: _evaluate(ix, s, query_mode=None), "query_mode must be one of"),
    ("methods", lambda ix, s: _evaluate(ix, s, methods=["sr", "bm25"]), "methods must be one"),
    ("k_items", lambda ix, s: _evaluate(ix, s, k_items=10**6), "k_items must be an integer"),
    ("coverage", lambda ix, s: _evaluate(ix, s, coverage=0), "coverage must be a share"),
    ("magnitude", lambda ix, s: _evaluate(ix, s, magnitude=2), "magnitude must be one of"),
    ("normalize", lambda ix, s: _evaluate(ix, s, normalize=None), "normalize must be true"),
    (
        "slq_template",
        lambda ix, s: _evaluate(ix, s, slq_template="{a} {c} {b}"),
        "slq_template may name {a} and {b} only",
    ),
    ("min_relevant", lambda ix, s: _evaluate(ix, s, min_relevant=-1), "min_relevant must be"),
    ("top", lambda ix, s: _evaluate(ix, s, top=5), "'top' is not an option of search --eval"),
]


@argument_cases(EVALUATE_INDEX)
def test_traceback_evaluate_index_names_each_wrong_argument(argument, call, needle, index, splade):
    refused(lambda: call(index, splade), needle)


@argument_cases(EVALUATE)
def test_traceback_evaluate_names_each_wrong_argument(argument, call, needle, index, splade):
    refused(lambda: call(index, splade), needle)


def test_traceback_every_argument_of_a_tables_evaluation_is_checked():
    """Each parameter and each option has a wrong-value case above."""
    options = {d.name for d in TableEvaluationOptions.declared()}
    for function, table in ((lexlens.evaluate_index, EVALUATE_INDEX), (evaluate, EVALUATE)):
        names = set(inspect.signature(function).parameters) - {"given"}
        assert names | options <= {argument for argument, _, _ in table}, function.__name__


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        (("--min-relevant", "0"), "--min-relevant must be an integer from 1 to 10,000, not 0"),
        (("--min-relevant", "two"), "--min-relevant must be an integer from 1 to 10,000"),
        (("--gate-k", "-7"), "--gate-k must be -1"),
        (("--coverage", "2"), "--coverage must be a share in (0, 1]"),
        (("--topk", "5"), "--topk is now --gate-k"),
    ],
)
def test_traceback_search_eval_flags_are_one_line_naming_the_flag(flags, line, index, cli):
    proc = cli("search", "--index", index, "--eval", index.parent / "pairs.csv", *flags)
    one_line_error(proc, line)


def test_traceback_a_good_table_still_evaluates(index, splade, cli):
    """The checks refuse only what is wrong: the API and the command line agree."""
    result = _evaluate(index, splade, methods=["sr", "avg"], k_items=5)
    assert set(result.metrics["aggregate"]) == {"sr", "avg"}
    assert result.settings["k_items"] == 5 and result.kind == "pairs"
    proc = cli("search", "--index", index, "--eval", index.parent / "pairs.csv", "--json")
    assert proc.returncode == 0, proc.stderr
    assert proc.json() == lexlens.evaluate_index(index, index.parent / "pairs.csv").to_dict()


def test_unbounded_the_ids_and_labels_cache_leaves_with_its_collection(index, splade):
    """The ids and labels an evaluation reads once per collection are kept beside it (a
    WeakKeyDictionary), never written into it, and dropped with it."""
    import gc

    from lexlens.analysis.search import table_evaluation as evaluation

    collection = open_index(index)
    before = dict(vars(collection))
    evaluate(collection, splade, PAIRS)
    assert set(vars(collection)) == set(before)  # nothing written into the collection
    assert evaluation.labelled(collection) is evaluation.labelled(collection)  # computed once
    assert collection in evaluation._CACHE
    held = len(evaluation._CACHE)
    del collection
    gc.collect()
    assert len(evaluation._CACHE) == held - 1


def test_silent_wrong_a_table_whose_every_query_is_skipped_is_refused(index, splade, cli):
    """No query measured is no result: all-zero metrics would read as a ranking that found
    nothing (a table of pairs is refused alike)."""
    rows = [{"query": "dog", "relevant": "nope-1"}, {"query": "cat", "relevant": "x|y"}]
    with pytest.raises(InputError) as caught:
        _evaluate(index, splade, rows=rows)
    assert str(caught.value) == (
        "no usable query: every query was skipped (see the reasons); first: dog: unknown ids: "
        "nope-1"
    )
    table = index.parent / "unknown.csv"
    table.write_text("query,relevant\ndog,nope-1\ncat,x|y\n")
    one_line_error(cli("search", "--index", index, "--eval", table), "no usable query")
    # One row measured: the table evaluates, the other row is listed as skipped.
    rows = [{"query": "dog", "relevant": "nope-1"}, {"query": "cat", "relevant": "d04"}]
    result = _evaluate(index, splade, rows=rows)
    assert len(result.metrics["per_query"]) == 1 and len(result.skipped) == 1
