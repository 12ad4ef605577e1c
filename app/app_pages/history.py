"""History page: the runs kept in the workspace — reopen one (its page, with its inputs and
result) or delete it; what they hold and how much of the size budget they use."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import streamlit as st

from lexlens.app.runtime import runs
from lexlens.app.runtime.jobs import job_manager
from lexlens.models import LexlensError

st.header("History")
st.caption(
    "Every page keeps its inputs (and, for long work, its result) as a run in the workspace "
    f"({runs.runs_dir()}); a page's URL names its run, so a reload or a bookmark shows the "
    "same state. Reopen or delete runs here."
)

stored = runs.list_runs()
taken = runs.sizes()  # one walk of the store: each run's size and their sum
used = sum(taken.values())
try:
    budget = runs.budget_bytes()
    st.progress(
        min(1.0, used / budget),
        text=f"{used / runs.MB:.1f} MB of the "
        f"{budget / runs.MB:g} MB budget (LEXLENS_RUNS_BUDGET_MB): past it, the oldest "
        "finished runs are removed (never a running one, one a page has open, or a "
        "page's newest).",
    )
except LexlensError as exc:
    st.error(f"{exc}. Until it is fixed no run is removed ({used / runs.MB:.1f} MB stored).")
if not stored:
    st.info("No run kept yet: results of the other pages appear here.")
    st.stop()

manager = job_manager()
jobs = {r.id: manager.get(r.id) for r in stored}  # this server's job of each run, if any
table = pd.DataFrame(
    [
        {
            "run": r.id,
            "page": r.page,
            "what": r.summary,
            "when": dt.datetime.fromtimestamp(r.updated).strftime("%Y-%m-%d %H:%M"),
            "status": jobs[r.id].status if jobs[r.id] else r.status,
            "device": (jobs[r.id].device if jobs[r.id] else "") or r.device,
            "holds": r.holds(),
            "size (MB)": round(taken.get(r.id, 0) / runs.MB, 3),
        }
        for r in stored
    ]
)
st.dataframe(table, hide_index=True, width="stretch")

by_id = {r.id: r for r in stored}
choice = st.selectbox(
    "Run", list(by_id), format_func=lambda i: f"{by_id[i].page}: {by_id[i].summary[:70]} ({i})"
)
run = by_id[choice]
st.caption(f"Inputs: {runs.describe_inputs(run.inputs) or 'none'}")
if run.message and run.status != "done":
    st.caption(f"{run.status}: {run.message}")
c1, c2, c3 = st.columns(3)
c1.page_link(
    f"app_pages/{run.page}.py",
    label="Reopen",
    icon=":material/open_in_new:",
    query_params={"run": run.id},
)
if c2.button("Delete this run", disabled=run.status == "running" and jobs[run.id] is not None):
    runs.delete(run.id)
    st.rerun()
if c3.button("Delete every finished run"):
    for r in stored:
        if r.status in runs.FINISHED and not (jobs[r.id] and not jobs[r.id].finished):
            runs.delete(r.id)
    st.rerun()
