"""The faithfulness use cases refuse a wrong type or value of any argument with one
LexlensError line that names the argument, never a TypeError or AttributeError."""

from __future__ import annotations

import pytest

import lexlens
from lexlens.analysis.evaluation.evaluate import evaluate
from tests.helpers import argument_cases, refused

QUERIES = {"q1": "a dog on the beach", "q2": "a cup of espresso"}
QRELS = {"q1": {"d1": 1}, "q2": {"d2": 1}}


@pytest.fixture(scope="module")
def index(three_texts_index):
    return three_texts_index


@pytest.fixture(scope="module")
def evaluation(index, splade):
    return evaluate(index, QUERIES, QRELS, query_encoder=splade)


FAILURES = [
    ("index", lambda ix, ev: lexlens.failures_faithfulness(5, ev), "index must be"),
    ("evaluation", lambda ix, ev: lexlens.failures_faithfulness(ix, "x"), "evaluation must be"),
    ("evaluation", lambda ix, ev: lexlens.with_faithfulness(3), "evaluation must be"),
    ("device", lambda ix, ev: lexlens.failures_faithfulness(ix, ev, device=5), "device"),
    ("progress", lambda ix, ev: lexlens.failures_faithfulness(ix, ev, progress=5), "progress"),
    ("draws", lambda ix, ev: lexlens.failures_faithfulness(ix, ev, draws=0), "draws must be"),
    ("curve_k", lambda ix, ev: lexlens.with_faithfulness(ev, index=ix, curve_k="x"), "curve_k"),
    ("options", lambda ix, ev: lexlens.failures_faithfulness(ix, ev, options=3), "options"),
    ("keyword", lambda ix, ev: lexlens.failures_faithfulness(ix, ev, nope=1), "nope"),
]


@argument_cases(FAILURES)
def test_traceback_failures_faithfulness_refuses_wrong_arguments(
    index, evaluation, argument, call, needle
):
    refused(lambda: call(index, evaluation), needle)


def _contrib(**given):
    given.setdefault("query", "a dog")
    given.setdefault("doc", "a dog on a beach")
    return lexlens.contrib_faithfulness(given.pop("encoder", "splade-tiny"), **given)


CONTRIB = [
    ("query_encoder", lambda: _contrib(encoder=5), "query_encoder"),
    ("query", lambda: _contrib(query=5), "query"),
    ("query", lambda: _contrib(query="  "), "the query is empty"),
    ("doc", lambda: _contrib(doc=None), "give the document"),
    ("doc", lambda: _contrib(doc=7), "doc"),
    ("gate_k", lambda: _contrib(gate_k=-5), "gate_k"),
    ("device", lambda: _contrib(device=5), "device"),
    ("draws", lambda: _contrib(draws=-1), "draws must be"),
]


@argument_cases(CONTRIB)
def test_traceback_contrib_faithfulness_refuses_wrong_arguments(argument, call, needle):
    refused(call, needle)


PROVENANCE = [
    ("encoder", lambda: lexlens.provenance_faithfulness(5, "a dog"), "encoder"),
    ("text", lambda: lexlens.provenance_faithfulness("splade-tiny", 5), "text"),
    ("text", lambda: lexlens.provenance_faithfulness("splade-tiny", ""), "the text is empty"),
    ("merged", lambda: lexlens.provenance_faithfulness("splade-tiny", "a", merged="y"), "merged"),
    ("top", lambda: lexlens.provenance_faithfulness("splade-tiny", "a", top=0), "top must be"),
    ("box", lambda: lexlens.provenance_faithfulness("splade-tiny", "a", box="0,0,1,1"), "box"),
]


@argument_cases(PROVENANCE)
def test_traceback_provenance_faithfulness_refuses_wrong_arguments(argument, call, needle):
    refused(call, needle)


IMAGE = "efficientnet-lite0-lexical"
OCCLUSION = [
    ("encoder", lambda: lexlens.occlusion_faithfulness(5, b"x", box="0,0,1,1"), "encoder"),
    ("image", lambda: lexlens.occlusion_faithfulness(IMAGE, 5, box="0,0,1,1"), "image"),
    ("box", lambda: lexlens.occlusion_faithfulness(IMAGE, b"x"), "give the patch group"),
    ("box", lambda: lexlens.occlusion_faithfulness(IMAGE, b"x", box="1,1"), "box"),
    ("top", lambda: lexlens.occlusion_faithfulness(IMAGE, b"x", box="0,0,1,1", top=0), "top"),
    ("seed", lambda: lexlens.occlusion_faithfulness(IMAGE, b"x", cells=[], seed=-1), "seed"),
]


@argument_cases(OCCLUSION)
def test_traceback_occlusion_faithfulness_refuses_wrong_arguments(argument, call, needle):
    refused(call, needle)


IG = [
    ("encoder", lambda: lexlens.ig_faithfulness(5, None), "encoder"),
    ("report_or_result", lambda: lexlens.ig_faithfulness("minilm-pq", 5), "attribution result"),
    ("seed", lambda: lexlens.ig_faithfulness("minilm-pq", None, seed="x"), "seed"),
]


@argument_cases(IG)
def test_traceback_ig_faithfulness_refuses_wrong_arguments(argument, call, needle):
    refused(call, needle)
