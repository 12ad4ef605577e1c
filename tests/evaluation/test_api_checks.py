"""The benchmark's public functions (``evaluate``, ``evaluate_benchmark``, ``export_index``,
``open_benchmark``) refuse a wrong type or value of any argument with one LexlensError that
names the argument (an unknown keyword names itself, an older keyword too), never a
TypeError or AttributeError from deeper down; nothing is written on the way."""

from __future__ import annotations

from pathlib import Path

import pytest

import lexlens
from lexlens.analysis.evaluation.evaluate import evaluate
from lexlens.analysis.lexical.terms import TermsOptions
from tests.helpers import ROOT, argument_cases, refused

BEIR = ROOT / "data" / "benchmarks" / "imagenet_beir"
QUERIES = {"q1": "a dog on the beach", "q2": "a cup of espresso"}
QRELS = {"q1": {"d1": 1}, "q2": {"d2": 1, "d1": 0}}


@pytest.fixture(scope="module")
def index(three_texts_index):
    return three_texts_index


def _evaluate(ix: Path, **given):
    return evaluate(ix, given.pop("queries", QUERIES), given.pop("qrels", QRELS), **given)


def _benchmark(ix: Path, **given):
    given.setdefault("queries", QUERIES)
    given.setdefault("qrels", QRELS)
    return lexlens.evaluate_benchmark(ix, **given)


#: (argument, the call given the index and a folder, what the message says).
EVALUATE = [
    ("index", lambda ix, out: evaluate(5, QUERIES, QRELS), "index must be a stored index"),
    ("index", lambda ix, out: evaluate(None, QUERIES, QRELS), "index must be a stored index"),
    ("index", lambda ix, out: evaluate(out / "none", QUERIES, QRELS), "not found"),
    ("queries", lambda ix, out: _evaluate(ix, queries=["a dog"]), "queries: expected a mapping"),
    ("queries", lambda ix, out: _evaluate(ix, queries={"q1": 7}), "queries['q1']"),
    ("queries", lambda ix, out: _evaluate(ix, queries={}), "no queries to evaluate"),
    ("qrels", lambda ix, out: _evaluate(ix, qrels=5), "qrels: expected a mapping"),
    ("qrels", lambda ix, out: _evaluate(ix, qrels={"q1": ["d1"]}), "qrels['q1']"),
    ("qrels", lambda ix, out: _evaluate(ix, qrels={"q1": {"d1": "yes"}}), "qrels['q1']['d1']"),
    ("run", lambda ix, out: _evaluate(ix, run=5), "run: expected a mapping"),
    ("run", lambda ix, out: _evaluate(ix, run="run.trec"), "run: expected a mapping"),
    ("run", lambda ix, out: _evaluate(ix, run={"q1": 5}), "run['q1']"),
    ("run", lambda ix, out: _evaluate(ix, run={"q1": [("d1",)]}), "run['q1'][0]"),
    ("query_encoder", lambda ix, out: _evaluate(ix, query_encoder=5), "query_encoder must be"),
    (
        "query_encoder",
        lambda ix, out: _evaluate(ix, query_encoder=["splade-tiny"]),
        "query_encoder must be",
    ),
    (
        "query_encoder",
        lambda ix, out: _evaluate(ix, query_encoder="no-such-encoder"),
        "no-such-encoder",
    ),
    (
        "query_vectors",
        lambda ix, out: _evaluate(ix, query_vectors={"q1": [0.5]}),
        "query_vectors must be QueryVectors",
    ),
    ("device", lambda ix, out: _evaluate(ix, device=5), "device must be"),
    ("device", lambda ix, out: _evaluate(ix, device="quantum"), "device 'quantum'"),
    ("progress", lambda ix, out: _evaluate(ix, progress="50%"), "progress must be a function"),
    ("options", lambda ix, out: _evaluate(ix, options=5), "options must be EvaluationOptions"),
    (
        "options",
        lambda ix, out: _evaluate(ix, options=TermsOptions()),
        "options must be EvaluationOptions, not TermsOptions",
    ),
    ("top", lambda ix, out: _evaluate(ix, top=0), "top must be an integer from 1 to 16,777,216"),
    ("top", lambda ix, out: _evaluate(ix, top="10"), "top must be an integer"),
    ("top", lambda ix, out: _evaluate(ix, top=2.5), "top must be an integer"),
    ("top", lambda ix, out: _evaluate(ix, top=2**25), "top must be an integer"),
    ("query_mode", lambda ix, out: _evaluate(ix, query_mode="dense"), "query_mode must be one of"),
    ("query_mode", lambda ix, out: _evaluate(ix, query_mode=None), "query_mode must be one of"),
    ("gate_k", lambda ix, out: _evaluate(ix, gate_k=-2), "gate_k must be -1"),
    ("gate_k", lambda ix, out: _evaluate(ix, gate_k="768"), "gate_k must be -1"),
    ("mode", lambda ix, out: _evaluate(ix, mode="bow"), "'mode' is now 'query_mode'"),
    ("ties", lambda ix, out: _evaluate(ix, ties="docid"), "ties must be one of"),
    ("judged_only", lambda ix, out: _evaluate(ix, judged_only="yes"), "judged_only must be"),
    ("topk", lambda ix, out: _evaluate(ix, topk=5), "'topk' is now 'gate_k'"),
]
EVALUATE_BENCHMARK = [
    ("index", lambda ix, out: lexlens.evaluate_benchmark(5), "index must be a stored index"),
    ("index", lambda ix, out: lexlens.evaluate_benchmark(ix), "keeps no queries and judgements"),
    ("queries", lambda ix, out: _benchmark(ix, queries=5), "queries must be a file's path"),
    ("queries", lambda ix, out: _benchmark(ix, queries=out / "none.tsv"), "not found"),
    ("qrels", lambda ix, out: _benchmark(ix, qrels=[("q1", "d1", 1)]), "qrels must be a file's"),
    ("run", lambda ix, out: _benchmark(ix, run=5), "run must be a file's path"),
    ("run", lambda ix, out: _benchmark(ix, run=out / "none.trec"), "not found"),
    ("query_encoder", lambda ix, out: _benchmark(ix, query_encoder=5), "query_encoder must be"),
    ("query_vectors", lambda ix, out: _benchmark(ix, query_vectors=5), "query_vectors must be"),
    ("query_vectors", lambda ix, out: _benchmark(ix, query_vectors=out / "q.tsv"), "not found"),
    ("device", lambda ix, out: _benchmark(ix, device=0), "device must be"),
    ("progress", lambda ix, out: _benchmark(ix, progress=1), "progress must be a function"),
    ("options", lambda ix, out: _benchmark(ix, options={"top": 5}), "options must be"),
    ("top", lambda ix, out: _benchmark(ix, top=True), "top must be an integer"),
    ("query_mode", lambda ix, out: _benchmark(ix, query_mode=1), "query_mode must be one of"),
    ("gate_k", lambda ix, out: _benchmark(ix, gate_k=1.5), "gate_k must be -1"),
    ("mode", lambda ix, out: _benchmark(ix, mode="bow"), "'mode' is now 'query_mode'"),
    ("ties", lambda ix, out: _benchmark(ix, ties=None), "ties must be one of"),
    ("judged_only", lambda ix, out: _benchmark(ix, judged_only=2), "judged_only must be"),
]


def _export(ix: Path, out: Path, **given):
    given.setdefault("format", "anserini")
    given.setdefault("queries", QUERIES)
    return lexlens.export_index(ix, out / "export", **given)


EXPORT_INDEX = [
    (
        "index",
        lambda ix, out: lexlens.export_index(5, out, format="seismic"),
        "index must be a stored index",
    ),
    (
        "out",
        lambda ix, out: lexlens.export_index(ix, 5, format="seismic"),
        "out must be a folder path",
    ),
    (
        "out",
        lambda ix, out: lexlens.export_index(ix, "", format="seismic"),
        "out must be a folder path",
    ),
    (
        "out",
        lambda ix, out: lexlens.export_index(ix, ix / "inside", format="seismic"),
        "inside the index folder",
    ),
    ("queries", lambda ix, out: _export(ix, out, queries=5), "queries must be a file's path"),
    ("queries", lambda ix, out: _export(ix, out, queries={"q1": None}), "queries['q1']"),
    (
        "queries",
        lambda ix, out: _export(ix, out, queries={}, format="trec-run"),
        "a TREC run needs queries",
    ),
    ("query_encoder", lambda ix, out: _export(ix, out, query_encoder=5), "query_encoder must be"),
    ("device", lambda ix, out: _export(ix, out, device=["cpu"]), "device must be"),
    ("progress", lambda ix, out: _export(ix, out, progress=0.5), "progress must be a function"),
    (
        "options",
        lambda ix, out: _export(ix, out, options="anserini"),
        "options must be ExportOptions",
    ),
    ("format", lambda ix, out: lexlens.export_index(ix, out), "format must be given"),
    ("format", lambda ix, out: _export(ix, out, format="csv"), "format must be one of"),
    ("format", lambda ix, out: _export(ix, out, format=1), "format must be one of"),
    ("scale", lambda ix, out: _export(ix, out, scale=float("nan")), "scale must be a finite"),
    ("scale", lambda ix, out: _export(ix, out, scale="100"), "scale must be a finite"),
    ("scale", lambda ix, out: _export(ix, out, scale=0.5), "scale must be a finite"),
    ("top", lambda ix, out: _export(ix, out, format="trec-run", top=0), "top must be an integer"),
    (
        "negatives",
        lambda ix, out: _export(ix, out, format="hard-negatives", queries=None, negatives=0),
        "negatives must be an integer",
    ),
    (
        "evaluation",
        lambda ix, out: _export(ix, out, format="hard-negatives", queries=None),
        "give --evaluation",
    ),
    (
        "evaluation",
        lambda ix, out: _export(ix, out, format="expansions", queries=None, evaluation=5),
        "evaluation must be the folder",
    ),
    (
        "evaluation",
        lambda ix, out: _export(ix, out, format="expansions", queries=None, evaluation=out),
        "no evaluation.json there",
    ),
    ("evaluation", lambda ix, out: _export(ix, out, evaluation=out), "--evaluation applies to"),
    ("query_mode", lambda ix, out: _export(ix, out, query_mode="x"), "query_mode must be one of"),
    ("gate_k", lambda ix, out: _export(ix, out, gate_k=None), "gate_k must be -1"),
    ("fmt", lambda ix, out: _export(ix, out, fmt="anserini"), "'fmt' is not an option of export"),
    ("mode", lambda ix, out: _export(ix, out, mode="bow"), "'mode' is now 'query_mode'"),
]
OPEN_BENCHMARK = [
    ("path", lambda ix, out: lexlens.open_benchmark(5), "path must be a benchmark's path"),
    ("path", lambda ix, out: lexlens.open_benchmark(None), "path must be a benchmark's path"),
    ("path", lambda ix, out: lexlens.open_benchmark(""), "path must be a benchmark's path"),
    ("path", lambda ix, out: lexlens.open_benchmark(out / "none"), "not found"),
    ("path", lambda ix, out: lexlens.open_benchmark(out), "not a benchmark"),
    ("split", lambda ix, out: lexlens.open_benchmark(BEIR, split=5), "split must be a split name"),
    ("split", lambda ix, out: lexlens.open_benchmark(BEIR, split=" "), "split must be a split"),
    ("split", lambda ix, out: lexlens.open_benchmark(BEIR, split="train"), "no split 'train'"),
    ("images", lambda ix, out: lexlens.open_benchmark(BEIR, images=5), "images must be a folder"),
    (
        "image_column",
        lambda ix, out: lexlens.open_benchmark(BEIR, image_column=["img"]),
        "image_column must be a column name",
    ),
    (
        "text_columns",
        lambda ix, out: lexlens.open_benchmark(BEIR, text_columns="body"),
        "text_columns must be one or more column names",
    ),
    (
        "text_columns",
        lambda ix, out: lexlens.open_benchmark(BEIR, text_columns=[]),
        "text_columns must be one or more column names",
    ),
    (
        "text_columns",
        lambda ix, out: lexlens.open_benchmark(BEIR, text_columns=["a", 2]),
        "text_columns must be one or more column names",
    ),
    ("kind", lambda ix, out: lexlens.open_benchmark(BEIR, kind="trec"), "kind must be one of"),
    (
        "options",
        lambda ix, out: lexlens.open_benchmark(BEIR, options=5),
        "options must be BenchmarkOptions",
    ),
    (
        "format",
        lambda ix, out: lexlens.open_benchmark(BEIR, format="beir"),
        "'format' is not an option of open_benchmark",
    ),
]


@argument_cases(EVALUATE)
def test_traceback_evaluate_names_each_wrong_argument(argument, call, needle, index, tmp_path):
    refused(lambda: call(index, tmp_path), needle)


@argument_cases(EVALUATE_BENCHMARK)
def test_traceback_evaluate_benchmark_names_each_wrong_argument(
    argument, call, needle, index, tmp_path
):
    refused(lambda: call(index, tmp_path), needle)


@argument_cases(EXPORT_INDEX)
def test_traceback_export_index_names_each_wrong_argument(argument, call, needle, index, tmp_path):
    refused(lambda: call(index, tmp_path), needle)
    assert not (tmp_path / "export").exists()  # refused before anything is written


@argument_cases(OPEN_BENCHMARK)
def test_traceback_open_benchmark_names_each_wrong_argument(
    argument, call, needle, index, tmp_path
):
    refused(lambda: call(index, tmp_path), needle)


def test_traceback_every_argument_is_checked():
    """Each parameter of each function (and each option) has at least one wrong-value case
    above: a new argument without a check fails here."""
    import inspect

    from lexlens.analysis.datasets.options import BenchmarkOptions
    from lexlens.analysis.evaluation.options import EvaluationOptions
    from lexlens.analysis.export.options import ExportOptions

    def parameters(function, options) -> set[str]:
        names = set(inspect.signature(function).parameters) - {"given"}
        return names | {d.name for d in options.declared()}

    expected = {
        "evaluate": parameters(evaluate, EvaluationOptions),
        "evaluate_benchmark": parameters(lexlens.evaluate_benchmark, EvaluationOptions),
        "export_index": parameters(lexlens.export_index, ExportOptions),
        "open_benchmark": parameters(lexlens.open_benchmark, BenchmarkOptions),
    }
    tables = {
        "evaluate": EVALUATE,
        "evaluate_benchmark": EVALUATE_BENCHMARK,
        "export_index": EXPORT_INDEX,
        "open_benchmark": OPEN_BENCHMARK,
    }
    for name, table in tables.items():
        assert expected[name] <= {argument for argument, _, _ in table}, name


def test_traceback_good_arguments_still_work(index, tmp_path, splade):
    """The checks refuse only what is wrong: numpy integers, Paths and keyword options pass."""
    import numpy as np

    result = _evaluate(index, top=np.int64(5), query_encoder=splade)
    assert result.settings["top"] == 5
    written = _export(index, tmp_path, format="trec-run", top=np.int64(2), query_encoder=splade)
    assert set(written.written) == {"run.trec"} and 2 <= written.written["run.trec"] <= 4
    bench = lexlens.open_benchmark(Path(BEIR), split="test", text_columns=("text",))
    assert bench.queries
