"""Jobs of a page's section: long work on the result a page shows (every failure's
counterfactual, every failure's faithfulness on the Evaluation page) run as a job of its own,
with its progress, a Cancel button, and its result kept through a page switch, a reload or a
server restart.

The page's URL names the page's run (its inputs and result). A section's job is another run
of the same page (:mod:`lexlens.app.runtime.runs`) whose inputs name that run (``part_of``) and
the section (``part``), so the URL keeps naming the page's run: the section finds its job in
this session's memory after a page switch, and among the stored runs (by the page's run id)
after a reload. A link to the section's run (the sidebar's jobs, History) opens the page's run
(:func:`follow_section_run`), where the section shows it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st

from lexlens.analysis.core.results import Record
from lexlens.app.runtime import runs, state
from lexlens.app.runtime.jobs import Job, job_manager, run_outcome
from lexlens.models import LexlensError

PART_OF, PART = "part_of", "part"
_SECTION_RUNS = "_lexlens_section_runs"  # (page run id, part) → the section's run id ("": none)


def follow_section_run(page: str) -> None:
    """When the URL names a section's run of ``page`` (a link from the sidebar's jobs or from
    History), put the page's run it belongs to in the URL and remember the section's run
    (call before the page restores its inputs)."""
    run_id = state.url_run_id()
    if run_id is None:
        return
    try:
        run = runs.load(run_id)
    except LexlensError:  # the page's own reading of the URL says what is wrong
        return
    parent = run.inputs.get(PART_OF)
    if run.page != page or not isinstance(parent, str):
        return
    st.session_state.setdefault(_SECTION_RUNS, {})[(parent, run.inputs.get(PART))] = run.id
    st.query_params["run"] = parent


def start_section_job(
    page: str,
    part: str,
    summary: str,
    settings: dict[str, Any],
    work: Callable[[Any], Record],
) -> None:
    """Run ``work(progress)`` as the job of section ``part`` of the run the URL names
    (``settings``: what it was asked with, kept in its run), and run the page again."""
    parent = state.url_run_id()
    if parent is None:
        raise LexlensError("no result in this page's URL to work on: run the page first")
    manager = job_manager()  # made first: its start marks what a stopped server left running
    inputs = {PART_OF: parent, PART: part, **settings}
    run = runs.create(page, summary, inputs, [], state.inputs_key(page, inputs, {}))
    st.session_state.setdefault(_SECTION_RUNS, {})[(parent, part)] = run.id
    state.note_open(f"{page}#{part}", run.id)
    manager.submit(run, work)
    st.rerun()  # the page again: the sidebar's jobs list it, refreshing while it runs


def _section_run_id(page: str, parent: str, part: str) -> str:
    """The newest run of section ``part`` of the page's run ``parent`` ("" when none): from
    this session's memory, else looked up once among the stored runs (after a reload)."""
    known = st.session_state.setdefault(_SECTION_RUNS, {})
    if (parent, part) not in known:
        found = [
            r
            for r in runs.list_runs()
            if r.page == page and r.inputs.get(PART_OF) == parent and r.inputs.get(PART) == part
        ]
        known[(parent, part)] = found[0].id if found else ""  # newest first
    return known[(parent, part)]


def section_outcome(
    page: str, part: str, kind: type[Record]
) -> tuple[Record | None, Job | None, str, dict[str, Any]]:
    """What section ``part`` of the run the URL names holds: ``(result, job, state,
    settings)``, state ``none`` (never run), ``queued``, ``running``, ``done``, ``failed``,
    ``cancelled`` or ``lost`` (the server stopped while it ran)."""
    parent = state.url_run_id()
    run_id = _section_run_id(page, parent, part) if parent else ""
    if not run_id:
        return None, None, "none", {}
    try:
        run = runs.load(run_id)
    except LexlensError:  # deleted meanwhile (History)
        st.session_state[_SECTION_RUNS][(parent, part)] = ""
        return None, None, "none", {}
    settings = {k: v for k, v in run.inputs.items() if k not in (PART_OF, PART)}
    return *run_outcome(run, kind), settings


def show_section_job(part: str, job: Job | None, status: str, what: str) -> bool:
    """A section's job as :func:`section_outcome` reports it: its live progress with Cancel
    while queued or running (True: nothing else to show yet), else how it ended when it did
    not finish, with Dismiss (``what``: "measurement")."""
    if status in ("queued", "running") and job is not None:
        st.caption(
            "Running as a job: switch pages or reload freely, it goes on; the result shows here."
        )
        state.show_job(job)
        return True
    if status in ("failed", "cancelled", "lost"):
        parent = state.url_run_id()
        run_id = st.session_state.get(_SECTION_RUNS, {}).get((parent, part), "")
        message = job.message if job is not None else _stored_message(run_id)
        left, right = st.columns([6, 1])
        (left.error if status == "failed" else left.info)(f"The last {what} {status}: {message}")
        if run_id and right.button(
            "Dismiss", key=f"dismiss_{run_id}", help="forget this run of the section"
        ):
            state.dismiss_run(run_id)
            st.session_state[_SECTION_RUNS][(parent, part)] = ""
            st.rerun()
    return False


def _stored_message(run_id: str) -> str:
    """How a stored run that did not finish ended, in its own words."""
    try:
        return runs.load(run_id).message or "the server stopped while it ran"
    except LexlensError:
        return "the server stopped while it ran"
