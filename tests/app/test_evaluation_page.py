"""The Evaluation page (AppTest): an evaluation runs as a job; its metrics, failures and
JSON download are those of ``lexlens evaluate --json`` for the same inputs."""

from __future__ import annotations

import html
import json
import re

from lexlens.analysis.evaluation.result import BLAME_COLUMNS, MEASURES, PER_QUERY_COLUMNS
from tests.datasets.files import beir_of_tables
from tests.evaluation.test_evaluate import QRELS, QUERIES, TEXTS
from tests.helpers import app_page, click_and_wait, page_result

PAGE = "app_pages/evaluation.py"


def test_an_uploaded_benchmark_is_evaluated_explained_and_kept(
    tmp_path, monkeypatch, cli, downloads
):
    home = tmp_path / "home"
    monkeypatch.setenv("LEXLENS_HOME", str(home))
    source = tmp_path / "items.csv"
    source.write_text("id,text\n" + "".join(f"{i},{t}\n" for i, t in TEXTS.items()))
    assert (
        cli(
            "index",
            "--encoder",
            "splade-tiny",
            "--source",
            source,
            "--out",
            home / "collections" / "bench",
        ).returncode
        == 0
    )
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
    run = cli(
        "evaluate",
        "--index",
        home / "collections" / "bench",
        "--queries",
        tmp_path / "q.jsonl",
        "--qrels",
        tmp_path / "r.qrels",
        "--top",
        "5",
        "--json",
    )
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


def _worst_table(at) -> tuple[list[str], list[list[str]]]:
    """The worst-queries table as the page draws it: header and rows of cell texts."""
    drawn = next(h.proto.body for h in at.get("html") if "first_relevant_rank</th>" in h.proto.body)
    header = [html.unescape(c) for c in re.findall(r"<th\b[^>]*>(.*?)</th>", drawn)]
    body = drawn[drawn.index("<tbody>") :]
    rows = [
        [html.unescape(c) for c in re.findall(r"<td\b[^>]*>(.*?)</td>", tr)]
        for tr in re.findall(r"<tr>(.*?)</tr>", body)
    ]
    return header, rows


def test_silent_wrong_the_worst_queries_table_is_typed_natural_and_named_as_the_csv(
    tmp_path, monkeypatch, cli
):
    """The page's tables: ranks as nullable integers (no "None" among numbers), measures as
    floats, tied queries in natural id order (q7 < q10, q2 < q102, as numbers), columns named
    as per_query.csv and blame.csv; the relevant item scoring 0 reads "not retrieved" and
    the failure is filed under that cause."""
    from tests.evaluation.test_trust_evaluation import CORPUS
    from tests.evaluation.test_trust_evaluation import QRELS as T_QRELS
    from tests.evaluation.test_trust_evaluation import QUERIES as T_Q

    home = tmp_path / "home"
    monkeypatch.setenv("LEXLENS_HOME", str(home))
    beir = tmp_path / "beir"
    beir_of_tables(beir, CORPUS, T_Q, T_QRELS)
    assert (
        cli(
            "index",
            "--encoder",
            "splade-tiny",
            "--source",
            beir,
            "--out",
            home / "collections" / "trust",
        ).returncode
        == 0
    )
    at = app_page(PAGE)
    kept = " ".join(c.value for c in at.caption)
    stored = home / "collections" / "trust"  # what the build kept, counted by its lines
    queries = len((stored / "queries.jsonl").read_text().splitlines())
    judgements = len((stored / "qrels.tsv").read_text().splitlines()) - 1  # a header line
    assert (queries, judgements) == (5, 5)  # every query; q50 (not among them) is dropped
    assert f"trust keeps {queries} queries and {judgements} judgements" in kept
    click_and_wait(at, next(b for b in at.button if b.label == "Evaluate").click)
    assert not at.exception and not at.error
    header, rows = _worst_table(at)
    assert header == [*PER_QUERY_COLUMNS, "top_terms"]
    ids = [r[0] for r in rows]
    assert ids == ["q7", "q10", "q2", "q102"]  # nDCG 0, 0, 1, 1: q7 < q10, q2 < q102
    q10 = dict(zip(header, rows[ids.index("q10")], strict=True))
    assert q10["first_relevant_rank"] == q10["relevant_rank"] == ""  # empty, not "None"
    assert q10["relevant_status"] == "not retrieved"
    assert not any(cell in ("None", "nan", "<NA>") for row in rows for cell in row)
    result = page_result(at)
    by_id = {q["id"]: q for q in result.metrics["per_query"]}
    for row in rows:
        for name, cell in zip(header, row, strict=True):
            if name in MEASURES:
                assert cell == f"{by_id[row[0]][name]:.4f}"
    # Sorted by a rank: by value (not as text), the queries without one last.
    at.selectbox(key="eval_sort").select("relevant_rank").run()
    header, rows = _worst_table(at)
    ranks = [r[header.index("relevant_rank")] for r in rows]
    numbers = [int(x) for x in ranks if x]
    assert numbers == sorted(numbers) and ranks[len(numbers) :] == [""] * (
        len(ranks) - len(numbers)
    )
    at.selectbox(key="eval_sort").select("worst first").run()
    blame = next(d.value for d in at.dataframe if "pushed" in d.value.columns)
    assert list(blame.columns) == [c for c in BLAME_COLUMNS if not c.endswith("_queries")]
    # each word's failure rate beside its success rate, lift as the command prints it
    assert list(blame["failure_rate"].isna()) == [not b["pushed"] for b in result.blame]
    assert list(blame["lift"]) == [
        "—" if b["p"] is None else ("∞" if b["lift"] is None else f"{b['lift']:.2f}")
        for b in result.blame
    ]
    slices = next(d.value for d in at.dataframe if "rest_failure_rate" in d.value.columns)
    assert len(slices) == len(result.slices["slices"]) > 0
    assert list(slices["failure_rate"]) == [r["failure_rate"] for r in result.slices["slices"]]
    assert list(slices["base_failure_rate"]) == [
        r["base_failure_rate"] for r in result.slices["slices"]
    ]
    causes = next(d.value for d in at.dataframe if "cause" in d.value.columns)
    assert dict(zip(causes["cause"], causes["failures"], strict=True))["not retrieved"] == 1
    captions = [c.value for c in at.caption]
    assert "d-bread — not retrieved, score 0.0000" in captions
    assert not any("rank" in c and "d-bread" in c for c in captions)
    # The failure opens in Query ⊙ Document with the query and both whole texts.
    button = next(b for b in at.button if b.label == "Open both in Query ⊙ Document")
    button.click().run()
    assert not at.exception and not at.error
    assert at.text_input(key="contrib_q_text").value == T_Q["q10"]
    assert at.text_area(key="contrib_d2_text").value == CORPUS["d-bread"]
    first = at.text_area(key="contrib_d_text").value
    assert first in CORPUS.values() and first != CORPUS["d-bread"]
    scores = [m.value for m in at.metric if m.label == "Score"]
    assert scores[1] == "0.0000" and float(scores[0]) > 0  # d-bread shares no term
