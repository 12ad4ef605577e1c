"""The Evaluation page's several-systems mode (AppTest): a comparison of one collection at two
query gates and an uploaded run runs as a job; its JSON download is ``lexlens evaluate``'s
``--json`` for the same inputs, and the why of a chosen query is drawn side by side."""

from __future__ import annotations

import json

from tests.helpers import app_page, click_and_wait, page_result
from tests.systems.test_comparison import QRELS, QUERIES, RUN, TEXTS

PAGE = "app_pages/evaluation.py"


def without_wall_times(doc: dict) -> dict:
    """A comparison's document without its latencies: wall times, the one thing two runs of
    the same inputs measure differently (each checked to be a positive number first)."""
    for costs in doc["efficiency"].values():
        latency = costs.pop("latency_ms")
        assert latency is None or latency > 0
    for row in doc["table"]:
        row.pop("latency_ms_a"), row.pop("latency_ms_b")
    return doc


def bench_index(tmp_path, monkeypatch, cli):
    """The comparison's texts, queries and judgements as a BEIR folder, indexed with
    splade-tiny as a collection of LEXLENS_HOME (it keeps the benchmark)."""
    home = tmp_path / "home"
    monkeypatch.setenv("LEXLENS_HOME", str(home))
    folder = tmp_path / "bench"
    folder.mkdir()
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": i, "text": t}) + "\n" for i, t in TEXTS.items())
    )
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in QUERIES.items())
    )
    (folder / "qrels").mkdir()
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n"
        + "".join(f"{q}\t{d}\t{r}\n" for q, j in QRELS.items() for d, r in j.items())
    )
    ix = home / "collections" / "bench"
    assert cli("index", "--encoder", "splade-tiny", "--source", folder, "--out", ix).returncode == 0
    return ix


def test_silent_wrong_the_page_compares_systems_as_the_command_does(
    tmp_path, monkeypatch, cli, downloads
):
    ix = bench_index(tmp_path, monkeypatch, cli)
    run_text = "".join(
        f"{q} Q0 {d} {i + 1} {s} outside\n"
        for q, pairs in RUN.items()
        for i, (d, s) in enumerate(pairs)
    )
    (tmp_path / "outside.trec").write_text(run_text)

    at = app_page(PAGE)
    assert not at.exception and not at.error
    at.radio(key="eval_systems_mode").set_value("Several systems").run()
    at.text_input(key="sys_gates").set_value("768, 2").run()
    at.file_uploader(key="sys_runs").set_value(("outside.trec", run_text.encode(), "text/plain"))
    at.run()
    at.number_input(key="sys_resamples").set_value(500).run()
    click_and_wait(at, next(b for b in at.button if b.label == "Compare").click)
    assert not at.exception and not at.error
    result = page_result(at)
    assert [s.name for s in result.systems] == [
        "bench query gate k=768",
        "bench query gate k=2",
        "outside",
    ]
    run = cli(
        "evaluate",
        "--index",
        ix,
        "--gate-k",
        "768",
        "--gate-k",
        "2",
        "--run",
        tmp_path / "outside.trec",
        "--resamples",
        "500",
        "--json",
    )
    assert run.returncode == 0, run.stderr
    page = json.loads(downloads["comparison.json"])
    command = json.loads(run.stdout)
    # the systems' run paths differ (an upload is a temporary file): all else is the same
    for doc in (page, command):
        for s in doc["systems"]:
            s.pop("run")
    assert without_wall_times(page) == without_wall_times(command)
    assert any(c.value.startswith("†: differs from bench query gate k=768") for c in at.caption)
    assert any("**Relevant item**" in m.value for m in at.markdown)
    assert len(at.get("plotly_chart")) == 3  # the delta bars, the scatter, cost vs nDCG@10
    shown = result.fixes[0]  # the pair selected first: its fixed and broken queries, McNemar
    assert any(
        f"fixes **{shown['fixed']}** and breaks **{shown['broken']}**" in m.value
        and f"McNemar's exact p **{shown['p_mcnemar']:.3g}**" in m.value
        for m in at.markdown
    )


def test_silent_wrong_document_gates_on_the_page_are_the_commands(
    tmp_path, monkeypatch, cli, downloads
):
    """Document gates typed on the page re-gate the stored vectors as ``--doc-gate-k`` does:
    the same systems and the same document, wall times aside."""
    ix = bench_index(tmp_path, monkeypatch, cli)
    at = app_page(PAGE)
    at.radio(key="eval_systems_mode").set_value("Several systems").run()
    at.text_input(key="sys_doc_gates").set_value("768, 8").run()
    at.number_input(key="sys_resamples").set_value(500).run()
    click_and_wait(at, next(b for b in at.button if b.label == "Compare").click)
    assert not at.exception and not at.error
    names = [s.name for s in page_result(at).systems]
    assert names == ["bench doc gate k=768", "bench doc gate k=8"]
    run = cli(
        "evaluate",
        "--index",
        ix,
        "--doc-gate-k",
        "768",
        "--doc-gate-k",
        "8",
        "--resamples",
        "500",
        "--json",
    )
    assert run.returncode == 0, run.stderr
    page = json.loads(downloads["comparison.json"])
    assert without_wall_times(page) == without_wall_times(json.loads(run.stdout))


def test_silent_wrong_uploaded_queries_and_judgements_replace_the_collections(
    tmp_path, monkeypatch, cli, downloads
):
    """Queries and judgements uploaded in several-systems mode (a collection that keeps
    none): the comparison is the command's with ``--queries`` and ``--qrels``; one without
    the other is refused before any work."""
    home = tmp_path / "home"
    monkeypatch.setenv("LEXLENS_HOME", str(home))
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": i, "text": t}) + "\n" for i, t in TEXTS.items()))
    ix = home / "collections" / "plain"
    assert cli("index", "--encoder", "splade-tiny", "--source", corpus, "--out", ix).returncode == 0
    chosen = ["q-dog", "q-coffee", "q-cat", "q-mug"]
    queries = "".join(f"{q}\t{QUERIES[q]}\n" for q in chosen)
    qrels = "".join(f"{q} 0 {d} {r}\n" for q in chosen for d, r in QRELS[q].items())
    (tmp_path / "queries.tsv").write_text(queries)
    (tmp_path / "qrels.txt").write_text(qrels)

    at = app_page(PAGE)
    at.radio(key="eval_systems_mode").set_value("Several systems").run()
    at.text_input(key="sys_gates").set_value("768, 4").run()
    at.file_uploader(key="sys_queries").set_value(("queries.tsv", queries.encode(), "text/plain"))
    at.run()
    click_and_wait(at, next(b for b in at.button if b.label == "Compare").click)
    assert [e.value for e in at.error] == ["upload both the queries and the judgements, or neither"]
    at.file_uploader(key="sys_qrels").set_value(("qrels.txt", qrels.encode(), "text/plain"))
    at.run()
    at.number_input(key="sys_resamples").set_value(500).run()
    click_and_wait(at, next(b for b in at.button if b.label == "Compare").click)
    assert not at.exception and not at.error
    result = page_result(at)
    assert [s.name for s in result.systems] == ["plain query gate k=768", "plain query gate k=4"]
    run = cli(
        "evaluate",
        "--index",
        ix,
        "--gate-k",
        "768",
        "--gate-k",
        "4",
        "--queries",
        tmp_path / "queries.tsv",
        "--qrels",
        tmp_path / "qrels.txt",
        "--resamples",
        "500",
        "--json",
    )
    assert run.returncode == 0, run.stderr
    page, command = json.loads(downloads["comparison.json"]), json.loads(run.stdout)
    assert page["settings"]["queries"] == command["settings"]["queries"] == len(chosen)
    assert without_wall_times(page) == without_wall_times(command)
