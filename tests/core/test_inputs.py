"""Reading user files: JSON texts nested too deeply, or not JSON at all."""

from __future__ import annotations

import time

import pytest

from lexlens.analysis.core.inputs import MAX_JSON_DEPTH, json_depth, json_line, json_objects
from lexlens.models.base import InputError

#: 401 opening brackets, then a string never closed: ``\"`` escapes to the end of the line.
UNCLOSED = "[" * (MAX_JSON_DEPTH + 1) + '"' + '\\"' * 20_000


@pytest.mark.parametrize("tail", ["", "\\"], ids=["escapes", "lone-backslash-last"])
def test_unbounded_json_depth_scans_an_unclosed_string_once(tail):
    """The bracket scan of a line whose string never closes is linear: 20,000 escapes took
    seconds when every escaped quote restarted a string (quadratic); a 16 MiB line never
    ended."""
    start = time.perf_counter()
    deepest, where = json_depth(UNCLOSED + tail)
    assert time.perf_counter() - start < 0.5
    assert (deepest, where) == (MAX_JSON_DEPTH + 1, MAX_JSON_DEPTH)  # the string's [ ] ignored


def test_silent_wrong_a_deep_line_that_is_not_json_is_said_not_json_not_nested():
    """Brackets deeper than the limit before a fault do not make a line JSON: it is
    skipped as "not JSON", with json's own reason, never as "nested 401 levels deep"."""
    value, why = json_line(UNCLOSED, "corpus.jsonl", 7)
    assert value is None
    assert why == "not JSON (Unterminated string starting at)"
    with pytest.raises(InputError, match=r"^items.jsonl: line 2 is not JSON \(Unterminated"):
        list(json_objects(['{"text": "kept"}', UNCLOSED], "items.jsonl"))
    # JSON that is only too deep keeps its own reason, with the depth it reaches.
    deep = "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1)
    assert json_line(deep, "corpus.jsonl", 7) == (
        None,
        f"JSON nested {MAX_JSON_DEPTH + 1} levels deep (over {MAX_JSON_DEPTH}): refused",
    )
