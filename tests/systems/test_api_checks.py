"""The comparison's public functions (``evaluate_systems``, ``compare_systems``,
``systems_of``, ``why_of``) refuse a wrong type or value of any argument with one
LexlensError naming the argument, never a TypeError or AttributeError from deeper down."""

from __future__ import annotations

import pytest

import lexlens
from lexlens.analysis.evaluation.options import EvaluationOptions
from lexlens.analysis.systems.comparison import compare_systems, evaluate_systems, why_of
from lexlens.analysis.systems.options import ComparisonOptions
from lexlens.analysis.systems.systems import SystemsSpec, systems_of
from tests.helpers import argument_cases, refused

QUERIES = {"q1": "a dog on the beach", "q2": "a cup of espresso"}
QRELS = {"q1": {"d1": 1}, "q2": {"d2": 1, "d1": 0}}


@pytest.fixture(scope="module")
def index(three_texts_index):
    return three_texts_index


@pytest.fixture(scope="module")
def compared(index):
    spec = SystemsSpec([index], gate_ks=[768, 1])
    return evaluate_systems(
        spec, queries=QUERIES, qrels=QRELS, options=ComparisonOptions(resamples=200)
    ).section("comparison")


def _spec(ix, **given):
    return SystemsSpec([ix], **given)


def _evaluate(ix, **given):
    spec = given.pop("spec", SystemsSpec([ix], gate_ks=[768, 1]))
    given.setdefault("queries", QUERIES)
    given.setdefault("qrels", QRELS)
    return evaluate_systems(spec, **given)


#: (argument, the call given the index, what the message says).
CASES = [
    ("spec", lambda ix: evaluate_systems([ix]), "spec must be a SystemsSpec"),
    (
        "query_vectors",
        lambda ix: _evaluate(ix, query_vectors="q.tsv"),
        "--query-vectors rank one collection as given: not with 2 systems",
    ),
    ("indexes", lambda ix: systems_of(SystemsSpec(ix), 768), "indexes must be a list"),
    ("indexes", lambda ix: systems_of(SystemsSpec([5]), 768), "index must be a stored index"),
    ("indexes", lambda ix: systems_of(SystemsSpec([]), 768), "at least one"),
    ("runs", lambda ix: systems_of(_spec(ix, runs=[5]), 768), "runs[0]"),
    ("runs", lambda ix: systems_of(_spec(ix, runs="a.trec"), 768), "runs must be a list"),
    ("names", lambda ix: systems_of(_spec(ix, runs=["a"], names=[3]), 768), "names[0]"),
    ("names", lambda ix: systems_of(_spec(ix, runs=["a"], names=["a", "b"]), 768), "--name"),
    ("gate_ks", lambda ix: systems_of(_spec(ix, gate_ks=["x"]), 768), "gate_k"),
    ("gate_ks", lambda ix: systems_of(_spec(ix, gate_ks=[-5]), 768), "gate_k"),
    (
        "query_encoders",
        lambda ix: systems_of(_spec(ix, query_encoders=[""]), 768),
        "query_encoders[0]",
    ),
    ("with_exact", lambda ix: systems_of(_spec(ix, with_exact="yes"), 768), "with_exact"),
    ("default_gate", lambda ix: systems_of(_spec(ix), "768"), "default_gate"),
    (
        "varying",
        lambda ix: systems_of(SystemsSpec([ix, ix], gate_ks=[1, 2]), 768),
        "vary one of them",
    ),
    ("names", lambda ix: systems_of(SystemsSpec([ix, ix]), 768), "two systems are named"),
    ("systems", lambda ix: systems_of(_spec(ix, gate_ks=list(range(1, 10))), 768), "at most 8"),
    ("queries", lambda ix: _evaluate(ix, queries=5), "queries must be"),
    ("queries", lambda ix: _evaluate(ix, queries={"q1": 7}), "queries['q1']"),
    ("qrels", lambda ix: _evaluate(ix, qrels=[1]), "qrels must be"),
    ("qrels", lambda ix: _evaluate(ix, qrels={"q1": {"d1": "yes"}}), "qrels['q1']['d1']"),
    ("device", lambda ix: _evaluate(ix, device=5), "device"),
    ("progress", lambda ix: _evaluate(ix, progress=5), "progress"),
    ("evaluation", lambda ix: _evaluate(ix, evaluation=ComparisonOptions()), "evaluation must"),
    ("options", lambda ix: _evaluate(ix, options=EvaluationOptions()), "options must be"),
    (
        "options",
        lambda ix: _evaluate(ix, options=ComparisonOptions(baseline="nobody")),
        "baseline 'nobody' is not a system",
    ),
    (
        "options",
        lambda ix: _evaluate(ix, spec=SystemsSpec([ix]), options=ComparisonOptions(all_pairs=True)),
        "--all-pairs: a comparison needs two or more systems",
    ),
    ("systems", lambda ix: compare_systems("ix"), "systems must be a list of System"),
    ("systems", lambda ix: compare_systems(systems_of(_spec(ix), 768)), "needs two or more"),
    (
        "resamples",
        lambda ix: compare_systems(systems_of(_spec(ix, gate_ks=[1, 2]), 768), resamples=5),
        "resamples must be",
    ),
    (
        "correction",
        lambda ix: compare_systems(systems_of(_spec(ix, gate_ks=[1, 2]), 768), correction="sidak"),
        "correction must be",
    ),
    ("api", lambda ix: lexlens.compare_systems(systems=[], spec=1), "'spec' is not an option"),
    ("api", lambda ix: lexlens.why_of(), "why_of(): missing"),
]


@argument_cases(CASES)
def test_traceback_each_wrong_argument_is_one_line_naming_it(argument, call, needle, index):
    refused(lambda: call(index), needle)


def test_traceback_why_of_refuses_wrong_arguments_naming_them(compared):
    refused(lambda: why_of("result", "q1", ("a", "b")), "result must be a SystemsComparison")
    refused(lambda: why_of(compared, 5, ("a", "b")), "query_id must be")
    refused(lambda: why_of(compared, "q1", "ab"), "pair must be two systems' names")
    refused(lambda: why_of(compared, "q1", ("x", "ix query gate k=1")), "system 'x' is not")
    refused(
        lambda: why_of(compared, "nope", ("ix query gate k=768", "ix query gate k=1")),
        "query 'nope'",
    )
    refused(
        lambda: why_of(compared, "q1", ("ix query gate k=768", "ix query gate k=1"), device=3),
        "device",
    )
    assert why_of(compared, "q1", ("ix query gate k=768", "ix query gate k=1")).query_id == "q1"
