"""Query, judgement and run files read as the module promises: a query id a TREC file cannot
hold is named with its file and line in one pass over the file, however many there are; a
line nested too deeply or not readable (not UTF-8, too long) is one problem and the readable
lines around it are kept; the export reads its previous manifest without a traceback. Every
fixture is written here."""

from __future__ import annotations

import time

import pytest

from lexlens.analysis.core.inputs import MAX_LINE_BYTES
from lexlens.analysis.datasets.readers import open_benchmark
from lexlens.analysis.datasets.trec import Problems, read_qrels, read_queries, read_run
from lexlens.analysis.evaluation.evaluate import evaluate_benchmark
from lexlens.analysis.export.export import MANIFEST
from tests.datasets.files import beir_folder, jsonl, msmarco_files
from tests.helpers import one_line_error

DEEP = "[" * 100_000


def test_unbounded_query_ids_with_whitespace_are_located_in_one_pass(tmp_path):
    n = 3_000
    rows = [{"_id": f"q {i}", "text": f"query {i}"} for i in range(n)]
    queries = jsonl([{"_id": "q1", "text": "apple"}, *rows])
    beir = beir_folder(
        tmp_path / "beir", jsonl([{"_id": "d1", "text": "apple"}]), queries, "q1 0 d1 1\n"
    )
    tsv = "q1\tapple\n" + "".join(f"q {i}\tquery {i}\n" for i in range(n))
    (tmp_path / "msmarco").mkdir()
    msmarco = msmarco_files(tmp_path / "msmarco", "d1\tapple\n", tsv, "q1 0 d1 1\n")
    for source, queries_file in (
        (beir, beir / "queries.jsonl"),
        (msmarco, msmarco.parent / "queries.dev.tsv"),
    ):
        started = time.perf_counter()
        bench = open_benchmark(source)
        elapsed = time.perf_counter() - started
        assert bench.queries == {"q1": "apple"}
        assert bench.problems.count == n
        lines = bench.problem_lines()
        # Line 1 holds q1: query 'q {i}' is on line i + 2.
        assert lines[0] == (
            f"{queries_file}:2: query id 'q 0' holds whitespace (TREC qrels and run files "
            "split on it): dropped"
        )
        assert lines[99].startswith(f"{queries_file}:101: query id 'q 99' holds whitespace")
        # Rescanning the file for each id took 9 s for 3,000 ids; one pass takes ~0.1 s.
        assert elapsed < 2.0, elapsed


def test_traceback_a_queries_line_nested_too_deeply_is_one_problem(tmp_path):
    queries = tmp_path / "queries.jsonl"
    queries.write_text('{"_id": "q1", "text": "one"}\n' + DEEP + '\n{"_id": "q2", "text": "two"}\n')
    problems = Problems()
    assert read_queries(queries, problems) == {"q1": "one", "q2": "two"}
    assert problems.lines == [f"{queries}:2: JSON nested 100,000 levels deep (over 400): refused"]

    folder = beir_folder(
        tmp_path / "beir", jsonl([{"_id": "d1", "text": "one"}]), queries.read_text(), "q1 0 d1 1\n"
    )
    bench = open_benchmark(folder)
    assert bench.queries == {"q1": "one", "q2": "two"}
    assert f"{folder}/queries.jsonl:2: JSON nested 100,000 levels deep" in bench.problem_lines()[0]


def test_traceback_evaluate_with_a_deep_queries_file_keeps_the_readable_queries(
    tmp_path, cli, splade
):
    folder = beir_folder(
        tmp_path / "beir",
        jsonl([{"_id": "d1", "text": "a red apple"}, {"_id": "d2", "text": "a green pear"}]),
        jsonl([{"_id": "q1", "text": "apple"}]),
        "q1 0 d1 1\n",
    )
    run = cli("index", "--encoder", "splade-tiny", "--source", folder, "--out", tmp_path / "ix")
    assert run.returncode == 0, run.stderr
    deep = tmp_path / "queries.jsonl"
    deep.write_text('{"_id": "q1", "text": "apple"}\n' + DEEP + "\n")
    run = cli("evaluate", "--index", tmp_path / "ix", "--queries", deep, "--json")
    assert run.returncode == 0, run.stderr
    document = run.json()
    assert document["settings"]["queries"] == 1
    assert any(f"{deep}:2: JSON nested 100,000 levels deep" in n for n in document["notes"])
    result = evaluate_benchmark(tmp_path / "ix", queries=deep, query_encoder=splade)
    assert result.settings["queries"] == 1


@pytest.mark.parametrize("reader", [read_qrels, read_run, read_queries])
def test_data_lost_one_unreadable_line_is_a_problem_and_the_rest_kept(tmp_path, reader):
    good = {
        read_qrels: ("q1 0 d1 1", "q2 0 d2 1"),
        read_run: ("q1 Q0 d1 1 2.5 t", "q2 Q0 d2 1 1.5 t"),
        read_queries: ("q1\tapple", "q2\tpear"),
    }[reader]
    path = tmp_path / "file.tsv"
    long_line = b"x" * (MAX_LINE_BYTES + 10)
    path.write_bytes(
        good[0].encode() + b"\ncaf\xe9 latin-1\n" + long_line + b"\n" + good[1].encode() + b"\n"
    )
    problems = Problems()
    assert sorted(reader(path, problems)) == ["q1", "q2"]
    assert problems.count == 2
    assert problems.lines[0].startswith(f"{path}:2: not UTF-8 text")
    assert problems.lines[1].startswith(f"{path}:3: a line longer than")


def test_traceback_export_reads_a_deep_queries_file_and_a_deep_previous_list(tmp_path, cli):
    folder = beir_folder(
        tmp_path / "beir",
        jsonl([{"_id": "d1", "text": "a red apple"}, {"_id": "d2", "text": "a green pear"}]),
        jsonl([{"_id": "q1", "text": "apple"}]),
        "q1 0 d1 1\n",
    )
    run = cli("index", "--encoder", "splade-tiny", "--source", folder, "--out", tmp_path / "ix")
    assert run.returncode == 0, run.stderr
    deep = tmp_path / "queries.jsonl"
    deep.write_text('{"_id": "q1", "text": "apple"}\n' + DEEP + "\n")
    out = tmp_path / "run"
    run = cli(
        "export",
        "--index",
        tmp_path / "ix",
        "--format",
        "trec-run",
        "--queries",
        deep,
        "--out",
        out,
        "--json",
    )
    assert run.returncode == 0, run.stderr
    assert (out / "run.trec").read_text().startswith("q1 Q0 ")
    # A previous export's list nested too deeply is not the list of an export: one line.
    (out / MANIFEST).write_text('{"format": "trec-run", "written": ' + DEEP + "\n")
    run = cli("export", "--index", tmp_path / "ix", "--format", "trec-run", "--out", out)
    one_line_error(run, f"--out {out}: {MANIFEST} is not the list of a Lexlens export")
