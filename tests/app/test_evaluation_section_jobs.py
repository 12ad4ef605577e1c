"""The Evaluation page's "every failure" counterfactuals and faithfulness run as jobs
(AppTest): queued behind other work with progress and Cancel, found again after a page
switch and a reload (a new session on the page's URL), their result the one the analysis
gives for the same evaluation, read back from the stored run once the server forgot the
job, and a link to the job's run opens its evaluation."""

from __future__ import annotations

import threading
import time

import pytest

from lexlens.analysis.counterfactual.evaluation import failures_counterfactuals
from lexlens.analysis.faithfulness.benchmark import failures_faithfulness
from lexlens.app.runtime import runs
from lexlens.app.runtime.jobs import job_manager
from tests.datasets.files import beir_of_tables
from tests.evaluation.test_evaluate import QRELS, QUERIES, TEXTS
from tests.helpers import app_page, click_and_wait, page_result

PAGE = "app_pages/evaluation.py"


def _param(at, name: str) -> str:
    value = at.query_params[name]
    return value[0] if isinstance(value, list) else value


def _reloaded(at, run_id: str | None = None):
    """A new session on the URL ``at`` shows (or on the same URL naming ``run_id``)."""
    again = app_page()
    again.query_params["session"] = _param(at, "session")
    again.query_params["run"] = run_id or _param(at, "run")
    again.switch_page(PAGE)
    again.run()
    assert not again.exception and not again.error
    return again


def _wait(job, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while not job.finished:
        assert time.monotonic() < deadline, "the job did not finish in time"
        time.sleep(0.1)


def _new_jobs(before: set[str]):
    return [j for i, j in job_manager().jobs.items() if i not in before]


@pytest.fixture
def evaluated(tmp_path, monkeypatch, cli):
    """The Evaluation page after an evaluation of a small BEIR collection (splade-tiny)."""
    home = tmp_path / "home"
    monkeypatch.setenv("LEXLENS_HOME", str(home))
    beir = beir_of_tables(tmp_path / "beir", TEXTS, QUERIES, QRELS)
    assert (
        cli(
            "index",
            "--encoder",
            "splade-tiny",
            "--source",
            beir,
            "--out",
            home / "collections" / "small",
        ).returncode
        == 0
    )
    at = app_page(PAGE)
    click_and_wait(at, next(b for b in at.button if b.label == "Evaluate").click)
    assert not at.exception and not at.error
    result = page_result(at)
    assert [f for f in result.failures if f.relevant is not None]
    return at, result, home / "collections" / "small"


def test_data_lost_every_failure_counterfactual_is_a_job_that_survives_switch_and_reload(
    evaluated,
):
    at, result, index = evaluated
    evaluation_run = _param(at, "run")
    # Hold the worker with a job before it, so the counterfactuals wait in the queue.
    hold = threading.Event()
    blocker = runs.create("history", "hold the worker", {}, [], "hold")
    job_manager().submit(blocker, lambda progress: hold.wait(60) and None)
    before = set(job_manager().jobs)
    try:
        next(b for b in at.button if b.label == "Counterfactuals of every failure").click()
        at.run()
        (job,) = _new_jobs(before)
        assert job.status == "queued" and job.run.page == "evaluation"
        assert job.run.inputs["part_of"] == evaluation_run
        assert _param(at, "run") == evaluation_run  # the URL keeps naming the evaluation
        assert any("Running as a job" in c.value for c in at.caption)
        assert any(b.label == "Cancel" for b in at.button)
        assert at.metric  # the evaluation's metrics stay on the page
        # Another page and back, then a reload: the job is still shown, queued.
        at.switch_page("app_pages/text.py").run()
        at.switch_page(PAGE).run()
        assert any("Running as a job" in c.value for c in at.caption)
        again = _reloaded(at)
        assert any("Running as a job" in c.value for c in again.caption)
        # Cancel from the reloaded page: the queued job never starts.
        next(b for b in again.button if b.label == "Cancel").click()
        again.run()
    finally:
        hold.set()
    _wait(job)
    again.run()
    assert job.status == "cancelled"
    assert any("counterfactuals cancelled" in i.value for i in again.info)
    # Asked again, it runs to its end; the numbers are the analysis's own for this evaluation.
    click_and_wait(
        again, next(b for b in again.button if b.label == "Counterfactuals of every failure").click
    )
    assert not again.exception and not again.error
    direct = failures_counterfactuals(index, result)
    shown = {m.label: m.value for m in again.metric}
    s = direct.summary
    assert shown["FlipRate"] == f"{s.flip_rate or 0:.0%}"
    assert shown["Mean model calls"] == f"{s.mean_model_calls or 0:.1f}"
    table = next(d.value for d in again.dataframe if "rank_after" in d.value.columns)
    assert list(table["query_id"]) == [r.query_id for r in direct.failures]
    # The server forgets the job (as after a restart): the result comes from its stored run.
    (done,) = [
        j
        for j in job_manager().jobs.values()
        if j.run.inputs.get("part") == "counterfactuals" and j.status == "done"
    ]
    job_manager().dismiss(done.id)
    stored = _reloaded(again)
    assert {m.label: m.value for m in stored.metric}["FlipRate"] == shown["FlipRate"]
    # The job's own link (sidebar, History) opens the evaluation with the section's result.
    linked = _reloaded(again, done.id)
    assert _param(linked, "run") == evaluation_run
    assert {m.label: m.value for m in linked.metric}["FlipRate"] == shown["FlipRate"]


def test_data_lost_every_failure_faithfulness_is_a_job_whose_result_is_the_analysis(evaluated):
    at, result, index = evaluated
    click_and_wait(at, next(b for b in at.button if b.label == "Measure faithfulness").click)
    assert not at.exception and not at.error
    direct = failures_faithfulness(index, result)
    shown = {m.label: m.value for m in at.metric}
    s = direct.summary
    assert shown["Comprehensiveness (median)"] == f"{s.comprehensiveness or 0:.3f}"
    assert shown["AOPC (median)"] == f"{s.aopc or 0:.3f}"
    again = _reloaded(at)
    assert {m.label: m.value for m in again.metric}["AOPC (median)"] == shown["AOPC (median)"]


def _browser_reload(at):
    """A new session on the very URL ``at`` shows, its browser session id and all (a reload
    of the browser's tab)."""
    from streamlit.testing.v1 import AppTest

    from tests.helpers import MAIN

    again = AppTest.from_file(MAIN, default_timeout=240)
    for name in ("session", "run"):
        again.query_params[name] = _param(at, name)
    again.switch_page(PAGE)
    again.run()
    assert not again.exception and not again.error
    return again


def _mode(at, mode: str) -> None:
    at.radio(key="eval_systems_mode").set_value(mode).run()
    assert not at.exception and not at.error


def test_data_lost_a_mode_switch_keeps_each_modes_inputs_and_result(evaluated):
    """One system (with its counterfactuals and faithfulness) → Several systems (compared) →
    One system: the evaluation and its sections are shown again, and back in Several systems
    the comparison; nothing asks to press Evaluate or Compare. After a reload on either
    mode's URL, the other mode finds its run among the stored ones."""
    at, _, _ = evaluated
    evaluation_run = _param(at, "run")
    for label in ("Counterfactuals of every failure", "Measure faithfulness"):
        click_and_wait(at, next(b for b in at.button if b.label == label).click)
    one = {m.label: m.value for m in at.metric}
    assert {"nDCG@10", "FlipRate", "AOPC (median)"} <= set(one)
    top = at.number_input(key="eval_top").value
    _mode(at, "Several systems")
    at.text_input(key="sys_gates").set_value("768, 16").run()
    click_and_wait(at, next(b for b in at.button if b.label == "Compare").click)
    comparison_run = _param(at, "run")
    assert comparison_run != evaluation_run
    marks = [c.value for c in at.caption if c.value.startswith("†: differs from")]
    assert marks
    _mode(at, "One system")
    assert _param(at, "run") == evaluation_run
    assert not [i.value for i in at.info if "inputs changed" in i.value]
    assert {m.label: m.value for m in at.metric} == one
    assert at.number_input(key="eval_top").value == top
    _mode(at, "Several systems")
    assert _param(at, "run") == comparison_run
    assert [c.value for c in at.caption if c.value.startswith("†: differs from")] == marks
    assert at.text_input(key="sys_gates").value == "768, 16"
    # A reload on the comparison's URL opens Several systems; One system finds its run.
    again = _browser_reload(at)
    assert again.radio(key="eval_systems_mode").value == "Several systems"
    _mode(again, "One system")
    assert _param(again, "run") == evaluation_run
    assert {m.label: m.value for m in again.metric} == one
    # A link to the comparison, opened while One system shows, shows the comparison.
    again.query_params["run"] = comparison_run
    again.run()
    assert again.radio(key="eval_systems_mode").value == "Several systems"
    assert [c.value for c in again.caption if c.value.startswith("†: differs from")] == marks
