"""``counterfactual`` refuses a wrong type or value of any argument with one LexlensError
that names the argument, never a TypeError or AttributeError from deeper down; the command
says the same in one line with exit status 2."""

from __future__ import annotations

import pytest

import lexlens
from tests.helpers import argument_cases, refused


@pytest.fixture(scope="module")
def index(three_texts_index):
    return three_texts_index


def _call(ix, **given):
    query = given.pop("query", "a dog on the beach")
    target = given.pop("target", "d1")
    return lexlens.counterfactual(given.pop("index", ix), query, target, **given)


CASES = [
    ("index", lambda ix: _call(ix, index=3), "index_or_collection"),
    ("index", lambda ix: _call(ix, index=ix / "nothing"), "nothing"),
    ("query", lambda ix: _call(ix, query=3), "query"),
    ("query", lambda ix: _call(ix, query="  "), "query is empty"),
    ("query", lambda ix: _call(ix, query=None), "query"),
    ("target", lambda ix: _call(ix, target=7), "target"),
    ("target", lambda ix: _call(ix, target="d9"), "target 'd9'"),
    ("query_id", lambda ix: _call(ix, query=None, query_id=4), "query_id"),
    ("query_id", lambda ix: _call(ix, query=None, query_id="q1"), "query_id"),
    ("query_id", lambda ix: _call(ix, query_id="q1"), "not both"),
    ("query_encoder", lambda ix: _call(ix, query_encoder=5), "query_encoder"),
    ("device", lambda ix: _call(ix, device=5), "device"),
    ("options", lambda ix: _call(ix, options="fast"), "options must be CounterfactualOptions"),
    ("side", lambda ix: _call(ix, side="left"), "side must be one of query, document, both"),
    ("max_edits", lambda ix: _call(ix, max_edits=0), "max_edits must be an integer from 1"),
    ("max_calls", lambda ix: _call(ix, max_calls=True), "max_calls"),
    ("level", lambda ix: _call(ix, level="words"), "level must be one of text, terms"),
    ("unknown", lambda ix: _call(ix, budget=3), "'budget' is not an option of counterfactual"),
]


@argument_cases(CASES)
def test_traceback_counterfactual_refuses_each_wrong_argument(index, argument, call, needle):
    refused(lambda: call(index), needle)


def test_traceback_command_refuses_an_unknown_target_in_one_line(index, cli):
    run = cli("counterfactual", "--index", index, "--query", "a dog", "--target", "zz")
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "target 'zz'" in lines[0], run.stderr


def test_silent_wrong_command_json_is_the_api_document(index, cli, splade):
    run = cli(
        "counterfactual",
        "--index",
        index,
        "--query",
        "espresso cup",
        "--target",
        "d1",
        "--json",
        "--max-calls",
        "20",
    )
    assert run.returncode == 0, run.stderr
    document = run.json()
    api = lexlens.counterfactual(index, "espresso cup", "d1", max_calls=20).to_dict()
    for key in ("target", "query", "settings"):
        assert document[key] == api[key]
    for level in ("counterfactual", "terms"):
        mine, theirs = document[level], api[level]
        assert {k: v for k, v in mine.items() if k != "seconds"} == {
            k: v for k, v in theirs.items() if k != "seconds"
        }
    assert document["counterfactual"]["verified"] is True
