"""``lexlens.contrib`` refuses a wrong type or value of every argument with one
:class:`LexlensError` line naming the argument, before any model loads (the encoders are
given by name: a check that came after loading would load splade-tiny and still fail)."""

from __future__ import annotations

import pytest

import lexlens
from lexlens.analysis.lexical.contrib import ContribOptions
from lexlens.models import LexlensError
from tests.helpers import refused

GOOD = {"query": "a cat on a book", "doc": "a kitten asleep on a novel"}

#: (what is wrong, the call's arguments, what the message must say)
WRONG = [
    ("query_encoder type", {"query_encoder": 5}, "query_encoder must be an encoder"),
    ("query_encoder None", {"query_encoder": None}, "query_encoder must be an encoder"),
    ("doc_encoder type", {"doc_encoder": 4.5}, "doc_encoder must be an encoder"),
    ("query type", {"query": 5}, "query must be text, not int"),
    ("query empty", {"query": "  "}, "the query is empty"),
    ("query and query_image", {"query_image": b"x"}, "give the query as a text or as an image"),
    ("neither query", {"query": None}, "give the query as a text or as an image"),
    ("query_image type", {"query": None, "query_image": 5}, "query_image must be"),
    ("query_image name", {"query": None, "query_image": (5, b"x")}, "query_image's name must"),
    ("query_image bytes", {"query": None, "query_image": ("q.png", b"x")}, "q.png"),
    ("doc type", {"doc": ["a"]}, "doc must be text, not list"),
    ("doc empty", {"doc": ""}, "the document is empty"),
    ("doc_image type", {"doc": None, "doc_image": 5}, "doc_image must be"),
    ("doc_image pair", {"doc": None, "doc_image": ("d.png", 5)}, "doc_image must be"),
    ("device type", {"device": 5}, "device must be"),
    ("device value", {"device": "tpu"}, "unknown device 'tpu'"),
    ("options type", {"options": {"gate_k": 5}}, "options must be ContribOptions, not dict"),
    ("query_mode value", {"query_mode": "dense"}, "query_mode must be one of parametric, bow"),
    ("query_mode type", {"query_mode": 1}, "query_mode must be one of parametric, bow"),
    ("gate_k type", {"gate_k": "5"}, "gate_k must be -1 (every dimension)"),
    ("gate_k value", {"gate_k": -2}, "gate_k must be -1 (every dimension)"),
    ("gate_k bool", {"gate_k": True}, "gate_k must be"),
    ("old topk", {"topk": 5}, "'topk' is now 'gate_k'"),
    ("old mode", {"mode": "bow"}, "'mode' is now 'query_mode'"),
    ("unknown keyword", {"doc_name": "d.png"}, "'doc_name' is not an option of contrib"),
]  # fmt: skip


@pytest.mark.parametrize(("what", "wrong", "message"), WRONG, ids=[w[0] for w in WRONG])
def test_traceback_contrib_refuses_each_wrong_argument_naming_it(what, wrong, message):
    arguments = {"query_encoder": "splade-tiny", **GOOD, **wrong}
    refused(lambda: lexlens.contrib(**arguments), message)


def test_traceback_contrib_options_given_twice_agree_with_the_declaration():
    # Keywords over an options object are checked by the same declaration.
    with pytest.raises(LexlensError, match="^gate_k must be"):
        lexlens.contrib("splade-tiny", **GOOD, options=ContribOptions(), gate_k=-5)
    assert ContribOptions.of(ContribOptions(), gate_k=0).gate_k == 0
