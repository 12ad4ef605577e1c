"""``lexlens.contrib`` refuses a wrong type or value of every argument with one
:class:`LexlensError` line naming the argument, before any model loads (the encoders are
given by name: a check that came after loading would load splade-tiny and still fail)."""

from __future__ import annotations

import numpy as np
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
]


@pytest.mark.parametrize(("what", "wrong", "message"), WRONG, ids=[w[0] for w in WRONG])
def test_traceback_contrib_refuses_each_wrong_argument_naming_it(what, wrong, message):
    arguments = {"query_encoder": "splade-tiny", **GOOD, **wrong}
    refused(lambda: lexlens.contrib(**arguments), message)


def test_traceback_contrib_options_given_twice_agree_with_the_declaration():
    # Keywords over an options object are checked by the same declaration.
    with pytest.raises(LexlensError, match="^gate_k must be"):
        lexlens.contrib("splade-tiny", **GOOD, options=ContribOptions(), gate_k=-5)
    assert ContribOptions.of(ContribOptions(), gate_k=0).gate_k == 0


def test_traceback_terms_takes_a_spec_and_checks_every_input_before_it_loads(tmp_path, splade):
    """``lexlens terms`` hands its flags to ``terms`` as they are (the encoder's name, the
    device): every check lives in the analysis and runs before any model loads. An encoder
    folder that does not exist stands in for a model: the inputs are refused first."""
    unloaded = str(tmp_path / "no-model-here")
    np.save(tmp_path / "feats.npy", np.ones((2, 4), dtype=np.float32))
    for wrong, message in [
        ({"text": "  "}, "the text is empty: type some words to encode"),
        ({"text": "a", "image": "x.png"}, "give one of a text, an image or dense features"),
        ({"text": "a", "box": (0, 0, 1, 1)}, "a box or cells apply to images only"),
        ({"text": "a", "item": "3"}, "an item id applies to dense features only"),
        ({"text": "a", "ids": "ids.txt"}, "ids apply to dense features only"),
        ({"image": str(tmp_path / "none.png")}, "none.png: file not found"),
        ({"features": str(tmp_path / "feats.npy")}, "holds 2 vectors: pick one by its id"),
        ({"features": str(tmp_path / "feats.npy"), "item": "7"}, "7"),
        ({"text": "a", "device": "tpu"}, "unknown device 'tpu'"),
    ]:
        refused(lambda w=wrong: lexlens.terms(unloaded, **w), message)
    # A registry name is checked from its card before it loads.
    refused(lambda: lexlens.terms("efficientnet-lite0-lexical", text="a cat"), "terms of a text")
    by_name = lexlens.terms("splade-tiny", text="a cat on a book", device="cpu", top=5)
    assert by_name.to_dict() == lexlens.terms(splade, text="a cat on a book", top=5).to_dict()
