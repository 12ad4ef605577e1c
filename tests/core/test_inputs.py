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


def test_traceback_a_home_folder_that_is_not_found_is_one_line(tmp_path, cli):
    """``~nosuchuser/x`` (a user with no home folder here) is refused in one line naming
    the input, wherever a user's path is read, written or held to the data roots."""
    from lexlens.analysis.core.inputs import read_texts, text_lines, user_path
    from lexlens.analysis.core.outputs import check_out_dir, write_files
    from lexlens.analysis.core.roots import inside_roots
    from tests.helpers import one_line_error

    missing = "~nosuchuser-lexlens/x"
    assert user_path("~/x", "p") == user_path("~", "p") / "x"
    for call, needle in (
        (lambda: user_path(missing, "--corpus"), "--corpus: no home folder found for ~nosuchuser"),
        (lambda: read_texts(missing + ".txt"), f"{missing}.txt: no home folder found"),
        (lambda: list(text_lines(missing, "queries.tsv")), "queries.tsv: no home folder"),
        (lambda: check_out_dir(missing), f"--out {missing}: no home folder found"),
        (lambda: write_files(missing, {"a.txt": b"a"}), f"--out {missing}: no home folder"),
        (lambda: inside_roots(missing, [tmp_path], "Path"), f"Path '{missing}': no home"),
        (lambda: inside_roots(tmp_path, [missing]), f"data root {missing}: no home folder"),
    ):
        with pytest.raises(InputError) as info:
            call()
        assert str(info.value).startswith(needle) and "\n" not in str(info.value)
    one_line_error(cli("app", "--data-root", missing), f"--data-root {missing}: no home folder")


def test_traceback_process_alive_answers_for_any_value():
    """Whether a process runs, for any value a file may hold as its id: never an error
    (``kill`` raised OverflowError for an id beyond the system's range), never a question
    about a process group (0, negative ids)."""
    import os

    from lexlens.analysis.core.outputs import process_alive

    assert process_alive(os.getpid()) and process_alive(os.getppid())
    for value in (0, -1, -os.getpid(), 10**30, 2**63, True, "1", 1.0, None, [1]):
        assert process_alive(value) is False, value
