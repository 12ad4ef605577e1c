"""Attribution page: Integrated Gradients per PQ sub-vector (RepMoT), topics, masking, reports.

Thin: the page draws its option widgets from the declared
:class:`~lexlens.analysis.attribution.options.ReportOptions`, calls the use case
:func:`lexlens.analysis.attribution.report.attribution_report` (which validates everything
before any model runs) and draws the report it returns; a corpus run also shows the topic of
a chosen code (``code_topic``, from the same attributions). The downloads are
the report's ``files()``: report.json is the document ``lexlens report … --json`` prints.
Inputs (``kept``) and the last result (``st.session_state``) survive page switches.
"""

from __future__ import annotations

import streamlit as st

from lexlens.analysis.attribution.options import ATTRIBUTION_NEEDS, ReportOptions
from lexlens.analysis.attribution.report import (
    AttributionReport,
    attribution_report,
    report_inputs,
    with_ig_curves,
)
from lexlens.analysis.core.inputs import read_texts
from lexlens.app.runtime import state
from lexlens.app.views.attribution import (
    optional_choice,
    show_downloads,
    show_mot,
    show_text,
    show_topic,
)
from lexlens.app.views.faithfulness import show_ig_curves
from lexlens.app.views.widgets import option_widget
from lexlens.models import LexlensError

M_CHOICES = [12, 24, 48]
STEP_CHOICES = [8, 16, 32, 64, 128, 256, 512, 1000]
DEFAULT_TEXT = "a cat sleeping on a book"

st.header("Attribution")
st.caption(
    "Which words decide each discrete code? The dense embedding is split into M sub-vectors, "
    "each quantised to one of K centroids; Integrated Gradients attributes every sub-vector's "
    "closeness to its own centroid, −‖d̂ᵢ − fᵢ(x)‖², to the input words (RepMoT). The baseline "
    "replaces every word except the stop words by [UNK], so stop words score exactly 0."
)

state.restore_inputs("attribution")  # a reload or a link: the run's inputs back into the widgets
state.kept("attr_encoder")
encoder = state.encoder_picker(
    "Dense + PQ encoder", ATTRIBUTION_NEEDS, key="attr_encoder", default="minilm-pq"
)

with st.form("attr_form"):
    source = st.radio(
        "Input", ["Text", "Corpus file"], horizontal=True, key=state.kept("attr_source", "Text")
    )
    text = st.text_area("Text", height=80, key=state.kept("attr_text", DEFAULT_TEXT))
    upload = st.file_uploader(
        "Corpus: .txt (one text per line), .csv or .jsonl (a 'text' column)",
        type=["txt", "csv", "jsonl"],
        key="attr_upload",
    )
    c1, c2, c3, c4 = st.columns(4)
    m = optional_choice(ReportOptions, "m", "attr_m", c1, M_CHOICES, "the encoder's own")
    steps = optional_choice(ReportOptions, "steps", "attr_steps", c2, STEP_CHOICES, "auto")
    max_texts = c3.number_input(
        "Texts from the corpus (first N)", 1, 2000, key=state.kept("attr_max", 20)
    )
    run_mot = option_widget(ReportOptions, "mot", "attr_mot", c4)
    keep = option_widget(ReportOptions, "keep", "attr_keep", c4, low=0.01)
    with st.expander("More IG options"):
        e1, e2, e3, e4 = st.columns(4)
        baseline = option_widget(ReportOptions, "baseline", "attr_baseline", e1)
        method = option_widget(ReportOptions, "method", "attr_method", e2)
        tolerance = option_widget(ReportOptions, "tolerance", "attr_tolerance", e3)
        max_steps = option_widget(ReportOptions, "max_steps", "attr_max_steps", e4)
    submitted = st.form_submit_button("Attribute", type="primary")

files_in = state.remembered_uploads("attr_upload", [upload] if upload is not None else None)
INPUT_KEYS = (
    "attr_encoder",
    "attr_encoder_dir",
    "attr_source",
    "attr_text",
    "attr_m",
    "attr_steps",
    "attr_max",
    "attr_mot",
    "attr_keep",
    "attr_baseline",
    "attr_method",
    "attr_tolerance",
    "attr_max_steps",
)
inputs = {k: st.session_state.get(k) for k in INPUT_KEYS}
uploads = {"attr_upload": files_in[:1]} if source == "Corpus file" else {}


def _texts() -> tuple[list[str], str]:
    """The texts to attribute and the name of their source; LexlensError on bad input."""
    if source == "Text":
        return [text], "text"
    if not files_in:
        raise LexlensError("upload a corpus file (.txt, .csv or .jsonl) or choose Input → Text")
    name, data = files_in[0]
    return read_texts(data, name=name).texts[: int(max_texts)], name


if submitted and encoder is not None:
    try:
        texts, label = _texts()
        options = ReportOptions.of(
            m=m,
            steps=steps,
            mot=run_mot,
            keep=keep,
            baseline=baseline,
            method=method,
            tolerance=tolerance,
            max_steps=max_steps,
        )
        report_inputs(encoder, texts, options)  # before the job: errors at once
        what = texts[0][:50] if len(texts) == 1 else f"{len(texts)} texts of {label}"
        state.start_job(
            "attribution",
            f"IG of {what}",
            inputs,
            uploads,
            lambda progress: attribution_report(
                encoder, texts, options=options, source=label, progress=progress
            ),
        )
    except LexlensError as exc:
        st.error(str(exc))

report, job, status = state.job_outcome("attribution", AttributionReport, inputs, uploads)
if state.show_job_state(job, status, "Attributing", "run"):
    st.stop()
if status == "other":
    st.info("The inputs changed since the result in this page's URL: press **Attribute**.")
if report is None:
    if status in ("none", "other"):
        st.info("Choose a text or upload a corpus, then press **Attribute**.")
    st.stop()

key = state.url_run_id() or "result"
res = report.attribution
attrs = res.texts
st.caption(
    f"{res.encoder}: M = {res.m} sub-vectors, K = {res.k} codes each, IG steps "
    f"{res.settings['steps']} ({', '.join(sorted({str(a.steps) for a in attrs}))} nodes used), "
    f"{len(attrs)} text(s) from {report.meta.get('source', '')} — "
    f"{res.seconds:.1f} s."
)
for note in res.notes:
    st.info(note)

# One selector per result (its key carries the run's id): a new run never keeps the index of
# an earlier run's list, so the label and the heatmap always show the same text.
labels = [f"{i + 1}: {a.text[:80]}" for i, a in enumerate(attrs)]
pick = st.selectbox(
    "Text",
    range(len(attrs)),
    format_func=lambda i: labels[i],
    key=state.kept(f"attr_pick_{key}", 0),
)
a = attrs[pick]
st.text(f"Text {pick + 1}: {a.text}")  # what the heatmap below shows (plain text, no markup)
if a.truncated:
    st.warning("This text is longer than the model's limit: only its first tokens were attributed.")


curves = None
if a.words:
    show_text(a, key)
    curves = show_ig_curves(encoder, res, pick, key)
else:
    st.info("This text has no word the tokenizer knows (only special tokens): nothing to show.")
if len(attrs) > 1:
    show_topic(res, key)
if report.mot is not None:
    show_mot(report)
measured = st.session_state.setdefault("_attr_curves", {})  # the curves shown, by text
if key not in measured:
    measured.clear()
    measured[key] = {}
if curves is not None:
    measured[key][pick] = curves
files = st.session_state.setdefault("_attr_files", {})  # a report's files, made once
made = (key, tuple(sorted(measured[key])))
if made not in files:
    files.clear()
    files[made] = with_ig_curves(report, measured[key]).files()
show_downloads(files[made])
if measured[key]:
    st.caption(
        "report.html carries the IG curves shown above of text(s) "
        + ", ".join(str(i + 1) for i in sorted(measured[key]))
        + "."
    )
