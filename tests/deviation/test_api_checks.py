"""``lexlens.deviation`` and ``lexlens.deviation_of_index`` refuse a wrong type or value of
every argument with one :class:`LexlensError` line naming it, before any model loads (the
encoder is given by name: a check after loading would load splade-tiny and still fail)."""

from __future__ import annotations

import numpy as np
import pytest

import lexlens
from lexlens.analysis.collections.memory import MemoryCollection
from lexlens.analysis.deviation.options import DeviationOptions
from tests.helpers import refused

CAPTIONS = ["a cat sleeping on a book", "two dogs on a beach"]

#: Wrong options: the same declaration refuses them through both use cases.
WRONG_OPTIONS = [
    ("options type", {"options": {"k": 5}}, "options must be DeviationOptions, not dict"),
    ("k type", {"k": "5"}, "k must be an integer from 1 to 1,000, not '5'"),
    ("k zero", {"k": 0}, "k must be an integer from 1 to 1,000, not 0"),
    ("k too large", {"k": 1001}, "k must be an integer from 1 to 1,000, not 1001"),
    ("k bool", {"k": True}, "k must be an integer"),
    ("gate_k value", {"gate_k": -2}, "gate_k must be -1 (every dimension)"),
    ("gate_k type", {"gate_k": 7.5}, "gate_k must be -1 (every dimension)"),
    ("denominator value", {"denominator": "n"}, "denominator must be one of k, active"),
    ("denominator type", {"denominator": 1}, "denominator must be one of k, active"),
    ("glove type", {"glove": 5}, "glove must be a GloVe-format text file's path, not int"),
    ("glove bytes", {"glove": b"cat 1 0"}, "glove must be a GloVe-format text file's path"),
    ("max_rows value", {"max_rows": -1}, "max_rows must be an integer ≥ 0, not -1"),
    ("max_rows type", {"max_rows": "all"}, "max_rows must be an integer"),
    ("batch_size value", {"batch_size": 0}, "batch_size must be an integer from 1 to 4,096"),
    ("batch_size large", {"batch_size": 10**6}, "batch_size must be an integer from 1 to 4,096"),
    ("old topk", {"topk": 5}, "'topk' is now 'gate_k'"),
    ("old glove_name", {"glove_name": "g.txt"}, "'glove_name' is not an option of deviation"),
    ("progress type", {"progress": 5}, "progress must be a function"),
    ("device type", {"device": 5}, "device must be"),
    ("device value", {"device": "tpu"}, "unknown device 'tpu'"),
]

WRONG_CAPTIONS = [
    ("encoder type", {"encoder": 5}, "encoder must be an encoder, a registry name"),
    ("encoder value", {"encoder": "no-such-encoder"}, "unknown encoder 'no-such-encoder'"),
    ("captions type", {"captions": 5}, "captions must be a file path"),
    ("captions item", {"captions": ["a dog", None]}, "captions: item 1 is NoneType"),
    ("captions empty", {"captions": ["", " "]}, "no captions given"),
    ("name type", {"name": 5}, "name must be text, not int"),
    ("suffix type", {"suffix": [".txt"]}, "suffix must be text, not list"),
    ("suffix value", {"suffix": ".exe"}, "suffix must be one of .txt, .csv, .jsonl"),
    ("missing file", {"captions": "no-such-dir/c.txt"}, "c.txt: file not found"),
]


@pytest.mark.parametrize(
    ("what", "wrong", "message"),
    WRONG_OPTIONS + WRONG_CAPTIONS,
    ids=[w[0] for w in WRONG_OPTIONS + WRONG_CAPTIONS],
)
def test_traceback_deviation_refuses_each_wrong_argument_naming_it(what, wrong, message):
    arguments = {"encoder": "splade-tiny", "captions": CAPTIONS, **wrong}
    refused(lambda: lexlens.deviation(**arguments), message)


def test_traceback_deviation_refuses_a_missing_glove_file_before_the_encoder(tmp_path):
    missing = tmp_path / "glove.txt"
    refused(lambda: lexlens.deviation("no-such-encoder", CAPTIONS, glove=missing), "glove.txt")
    refused(lambda: DeviationOptions.of(glove=str(tmp_path)), str(tmp_path))


@pytest.fixture(scope="module")
def in_memory() -> MemoryCollection:
    """A collection held in memory in a 4-term vocabulary (no model needed)."""
    vectors = np.array([[0, 1.0, 0.5, 0], [0, 0, 0.2, 2.0]], dtype=np.float32)
    return MemoryCollection(["a", "b"], CAPTIONS, vectors, ["[CLS]", "cat", "dog", "book"])


@pytest.mark.parametrize(
    ("what", "wrong", "message"), WRONG_OPTIONS, ids=[w[0] for w in WRONG_OPTIONS]
)
def test_traceback_deviation_of_index_refuses_each_wrong_option_naming_it(
    what, wrong, message, in_memory
):
    arguments = {"index": in_memory, "encoder": "splade-tiny", "gate_k": 768, **wrong}
    refused(lambda: lexlens.deviation_of_index(**arguments), message)


def test_traceback_deviation_of_index_refuses_each_wrong_input_naming_it(in_memory, tmp_path):
    index = lexlens.deviation_of_index
    held = "index must be a stored index, its folder or a collection held in memory"
    refused(lambda: index(5), f"{held}, not int")
    refused(lambda: index([1, 2]), "index must be a stored index, its folder or a collection")
    refused(lambda: index(tmp_path), "manifest")  # a folder that holds no index
    refused(lambda: index(tmp_path / "none"), "none")
    refused(lambda: index(in_memory), "does not record the gate k of its vectors: give the gate_k")
    refused(lambda: index(in_memory, 5, gate_k=768), "encoder must be an encoder, a registry name")
    refused(lambda: index(in_memory, "no-such-encoder", gate_k=768), "unknown encoder")
