"""The Evaluation page (AppTest): an evaluation runs as a job; its metrics, failures and
JSON download are those of ``lexlens evaluate --json`` for the same inputs."""

from __future__ import annotations

import json

from tests.benchmark.test_evaluate import QRELS, QUERIES, TEXTS
from tests.helpers import app_page, click_and_wait, page_result

PAGE = "app_pages/evaluation.py"


def test_an_uploaded_benchmark_is_evaluated_explained_and_kept(
    tmp_path, monkeypatch, cli, downloads
):
    home = tmp_path / "home"
    monkeypatch.setenv("LEXLENS_HOME", str(home))
    source = tmp_path / "items.csv"
    source.write_text("id,text\n" + "".join(f"{i},{t}\n" for i, t in TEXTS.items()))
    assert cli("index", "--encoder", "splade-tiny", "--source", source,
               "--out", home / "collections" / "bench").returncode == 0  # fmt: skip
    queries = "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in QUERIES.items())
    qrels = "".join(f"{q} 0 {d} {r}\n" for q, docs in QRELS.items() for d, r in docs.items())
    (tmp_path / "q.jsonl").write_text(queries)
    (tmp_path / "r.qrels").write_text(qrels)

    at = app_page(PAGE)
    assert not at.exception and not at.error
    at.radio(key="eval_source").set_value("Upload queries and judgements").run()
    at.file_uploader(key="eval_queries").set_value(("q.jsonl", queries.encode(), "text/plain"))
    at.file_uploader(key="eval_qrels").set_value(("r.qrels", qrels.encode(), "text/plain"))
    at.run()
    at.number_input(key="eval_top").set_value(5).run()
    click_and_wait(at, next(b for b in at.button if b.label == "Evaluate").click)
    assert not at.exception and not at.error
    result = page_result(at)
    run = cli("evaluate", "--index", home / "collections" / "bench", "--queries",
              tmp_path / "q.jsonl", "--qrels", tmp_path / "r.qrels", "--top", "5", "--json")  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert downloads["evaluation.json"].decode("utf-8") == run.stdout
    assert json.loads(run.stdout)["metrics"] == result.to_dict()["metrics"]
    shown = {m.label: m.value for m in at.metric}
    assert shown["nDCG@10"] == f"{result.metrics['aggregate']['nDCG@10']:.3f}"
    # A failing query is explained side by side, with the gap's words on both sides.
    assert result.failures and any("Score gap" in m.value for m in at.markdown)
    assert any(m.value.startswith("**Favour the relevant item**") for m in at.markdown)
    assert any("Decisive words" in c.value for c in at.caption)
    # Reload (a new session on the same URL): the inputs and the result come back.
    run_id = at.query_params["run"]
    again = app_page(PAGE)
    again.query_params["run"] = run_id[0] if isinstance(run_id, list) else run_id
    again.run()
    assert not again.exception and not again.error
    assert again.radio(key="eval_source").value == "Upload queries and judgements"
    assert again.number_input(key="eval_top").value == 5
    assert {m.label: m.value for m in again.metric} == shown
