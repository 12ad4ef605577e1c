"""Evaluation page: a stored collection on its queries and judgements — metrics, the queries
sorted worst first, why a chosen query fails (side by side), the words to blame.

Thin: the numbers are a
:class:`~lexlens.analysis.evaluation.result.Evaluation` from
:func:`~lexlens.analysis.evaluation.evaluate.evaluate_benchmark` (what ``lexlens evaluate
--json`` prints for the same inputs), computed as a job; the widgets are drawn from
:class:`~lexlens.analysis.evaluation.options.EvaluationOptions`; the downloads are its files.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import streamlit as st

from lexlens.analysis.collections.store import open_index
from lexlens.analysis.collections.workspace import list_collections
from lexlens.analysis.core.counts import counted
from lexlens.analysis.evaluation.evaluate import evaluate_benchmark
from lexlens.analysis.evaluation.options import EvaluationOptions
from lexlens.analysis.evaluation.result import (
    JUDGED,
    MEASURES,
    Evaluation,
)
from lexlens.app.runtime import state
from lexlens.app.views.counterfactual import show_counterfactuals
from lexlens.app.views.evaluation import show_blame, show_downloads, show_failures, show_worst
from lexlens.app.views.faithfulness import show_faithfulness
from lexlens.app.views.section_jobs import follow_section_run
from lexlens.app.views.systems import MODE_KEY, MODES, show_systems
from lexlens.app.views.widgets import option_widget
from lexlens.models import LexlensError

#: The options drawn here, and their widgets' keys.
OPTIONS = {
    "top": "eval_top",
    "query_mode": "eval_query_mode",
    "gate_k": "eval_gate_k",
    "judged_only": "eval_judged_only",
}
INPUT_KEYS = ("eval_collection", "eval_source", *OPTIONS.values())
SOURCES = ["The collection's own", "Upload queries and judgements"]

st.header("Evaluation")
st.caption(
    "Search a stored collection with every query of a benchmark (or read another system's "
    "run) and see nDCG@10, RR@10, R@1/5/10/100 and AP@100 (ir-measures), the queries worst "
    "first, and for a failing query the item ranked first and the best relevant one side by "
    "side: each term's q·d, summing to each score, and the words that decide between them."
)
follow_section_run("evaluation")  # a link to a section's job opens its evaluation
state.page_modes("evaluation", MODE_KEY, MODES[0])  # each mode keeps its inputs and result
state.restore_inputs("evaluation")
cards = [c for c in list_collections() if "error" not in c]
if not cards:
    st.info(
        "No stored collection yet: build one on the **Collections** page or with "
        "`lexlens index` (a BEIR folder or a Karpathy split keeps its queries)."
    )
    st.stop()
show_systems(cards)
names = [c["name"] for c in cards]
if st.session_state.get("eval_collection") not in names:
    st.session_state["eval_collection"] = names[0]
c1, c2, c3 = st.columns([2, 2, 1])
name = c1.selectbox("Collection", names, key=state.kept("eval_collection"))
card = next(c for c in cards if c["name"] == name)
source = c2.radio("Queries", SOURCES, key=state.kept("eval_source", SOURCES[0]), horizontal=True)
values = {
    name: option_widget(EvaluationOptions, name, OPTIONS[name], where=c3)
    for name in ("top", "judged_only")
}
try:
    kept = open_index(card["path"]).kept_benchmark()
except LexlensError as exc:
    st.error(str(exc))
    st.stop()
if kept is not None:
    split = f" ({kept['kind']} split {kept['split']!r})" if kept.get("split") else ""
    c1.caption(
        f"{name} keeps {counted(kept['queries'], 'query', grouped=True)} and "
        f"{counted(kept['judgements'], 'judgement', grouped=True)}{split} with its "
        f"{counted(card['items'], 'item', grouped=True)}."
    )
elif source == SOURCES[0]:
    c1.caption(f"{name} keeps no queries: upload queries and judgements.")
with st.expander("How the queries are encoded"):
    q1, q2 = st.columns(2)
    for col, option in ((q1, "query_mode"), (q2, "gate_k")):
        values[option] = option_widget(EvaluationOptions, option, OPTIONS[option], where=col)
files: dict[str, list[tuple[str, bytes]]] = {}
for key, label, types in (
    ("eval_queries", "Queries (BEIR queries.jsonl or qid<TAB>text)", ["jsonl", "tsv", "txt"]),
    ("eval_qrels", "Judgements (TREC or BEIR qrels)", ["tsv", "txt", "qrels"]),
    ("eval_run", "Another system's run (TREC, optional)", ["trec", "txt", "run"]),
):
    if source == SOURCES[1] or key == "eval_run":
        upload = st.file_uploader(label, type=types, key=key)
        files[key] = state.remembered_uploads(key, [upload] if upload else None)[:1]
inputs = {k: st.session_state.get(k) for k in INPUT_KEYS}
uploads = {k: v for k, v in files.items() if v}


def _work(
    path: str, saved: dict[str, list[tuple[str, bytes]]], options: EvaluationOptions, device: str
):
    """The evaluation itself, for the job: uploads go to a temporary folder first."""

    def work(progress):
        with tempfile.TemporaryDirectory(prefix="lexlens-eval-") as tmp:
            paths = {}
            for key, items in saved.items():
                for file_name, data in items:
                    paths[key] = Path(tmp) / f"{key}{Path(file_name).suffix or '.txt'}"
                    paths[key].write_bytes(data)
            return evaluate_benchmark(
                path,
                queries=paths.get("eval_queries"),
                qrels=paths.get("eval_qrels"),
                run=paths.get("eval_run"),
                options=options,
                progress=progress,
                device=None if device == "auto" else device,
            )

    return work


if st.button("Evaluate", type="primary"):
    try:
        options = EvaluationOptions.of(**values)
        if source == SOURCES[0] and open_index(card["path"]).benchmark_files is None:
            raise LexlensError(f"{name} keeps no queries: upload queries and judgements")
        if source == SOURCES[1] and not (uploads.get("eval_queries") and uploads.get("eval_qrels")):
            raise LexlensError("upload both the queries and the judgements")
        device = st.session_state.get("device", "auto")
        work = _work(card["path"], uploads, options, device)
        state.start_job("evaluation", f"evaluate {name}", inputs, uploads, work)
    except LexlensError as exc:
        st.error(str(exc))

result, job, status = state.job_outcome("evaluation", Evaluation, inputs, uploads)
if state.show_job_state(job, status, "Evaluating", "evaluation"):
    st.stop()
if result is None:
    if status == "other":
        st.info("The inputs changed since the result in this page's URL: press **Evaluate**.")
    st.stop()

st.caption(
    f"Evaluated {counted(result.settings['queries'], 'query', grouped=True)}"
    + (
        f" with {counted(result.settings['judgements'], 'judgement', grouped=True)}"
        if "judgements" in result.settings
        else ""
    )
    + f" on {counted(result.index.get('items', 0), 'item', grouped=True)}; "
    f"{len(result.failures):,} fail (a relevant item is not first)."
)
for note in result.notes:
    st.caption(f"Note: {note}")
aggregate = result.metrics["aggregate"]
cols = st.columns(len(MEASURES))
for col, measure in zip(cols, MEASURES, strict=True):
    col.metric(measure, f"{aggregate[measure]:.3f}")
if JUDGED in aggregate:
    st.caption(
        f"{JUDGED} {aggregate[JUDGED]:.3f}: the share of each query's top 10 that is judged "
        "at all (ir-measures); a failure whose first item is unjudged is counted apart as "
        "rival unjudged."
    )
st.subheader("Queries, worst first")
order = show_worst(result)
if result.failures:
    show_failures(result, order, open_index(card["path"]))
else:
    st.success("Every query has a relevant item first.")
show_blame(result)
show_faithfulness(result, card["path"])
show_counterfactuals(result, card["path"])
show_downloads(result)
