"""Attribution page: Integrated Gradients per PQ sub-vector (RepMoT), topics, masking, reports.

Thin: the page parses its inputs, calls the use case
:func:`lexlens.analysis.render.attribution_report.attribution_report` (which validates
everything before any model runs) and draws the report it returns; a corpus run also shows
the topic of a chosen code (``code_topic``, from the same attributions). The downloads are
the report's ``files()``: report.json is the document ``lexlens report … --json`` prints.
Inputs (``kept``) and the last result (``st.session_state``) survive page switches.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from lexlens.analysis.attribution import display
from lexlens.analysis.attribution.topics import DEFAULT_PER_TEXT, code_topic, topic_sizes
from lexlens.analysis.attribution.validate import ATTRIBUTION_NEEDS, DEFAULT_TOLERANCE
from lexlens.analysis.core.inputs import read_texts
from lexlens.analysis.render.attribution_plots import attribution_heatmap, series_bars
from lexlens.analysis.render.attribution_report import AttributionReport, attribution_report
from lexlens.analysis.render.plots import cloud_caption, cloud_layout, render_cloud
from lexlens.app.state import content_key, encoder_picker, kept, remembered_uploads
from lexlens.models import LexlensError

RESULT = "attr_result"
M_CHOICES = [12, 24, 48]
STEP_CHOICES = ["auto", 8, 16, 32, 64, 128, 256, 512, 1000]
DEFAULT_TEXT = "a cat sleeping on a book"
MIME = {".html": "text/html", ".json": "application/json", ".csv": "text/csv"}

st.header("Attribution")
st.caption(
    "Which words decide each discrete code? The dense embedding is split into M sub-vectors, "
    "each quantised to one of K centroids; Integrated Gradients attributes every sub-vector's "
    "closeness to its own centroid, −‖d̂ᵢ − fᵢ(x)‖², to the input words (RepMoT). The baseline "
    "replaces every word except the stop words by [UNK], so stop words score exactly 0."
)

kept("attr_encoder")
encoder = encoder_picker(
    "Dense + PQ encoder", ATTRIBUTION_NEEDS, key="attr_encoder", default="minilm-pq"
)

with st.form("attr_form"):
    source = st.radio(
        "Input", ["Text", "Corpus file"], horizontal=True, key=kept("attr_source", "Text")
    )
    text = st.text_area("Text", height=80, key=kept("attr_text", DEFAULT_TEXT))
    upload = st.file_uploader(
        "Corpus: .txt (one text per line), .csv or .jsonl (a 'text' column)",
        type=["txt", "csv", "jsonl"],
        key="attr_upload",
    )
    c1, c2, c3, c4 = st.columns(4)
    m = c1.selectbox("Sub-vectors M", M_CHOICES, key=kept("attr_m", 24))
    steps = c2.selectbox(
        "IG steps",
        STEP_CHOICES,
        key=kept("attr_steps", "auto"),
        help="auto: add quadrature nodes until every sub-vector's completeness gap is within "
        f"{DEFAULT_TOLERANCE:.0%} of F(x) − F(x′); a number: that many Gauss–Legendre nodes",
    )
    max_texts = c3.number_input(
        "Texts from the corpus (first N)", 1, 2000, key=kept("attr_max", 20)
    )
    run_mot = c4.checkbox("MoT masking (≥ 2 texts)", key=kept("attr_mot", False))
    keep = c4.number_input(
        "MoT: fraction of words kept", 0.01, 1.0, step=0.01, key=kept("attr_keep", 0.05)
    )
    submitted = st.form_submit_button("Attribute", type="primary")

files_in = remembered_uploads("attr_upload", [upload] if upload is not None else None)


def _texts() -> tuple[list[str], str]:
    """The texts to attribute and the name of their source; LexlensError on bad input."""
    if source == "Text":
        return [text], "text"
    if not files_in:
        raise LexlensError("upload a corpus file (.txt, .csv or .jsonl) or choose Input → Text")
    name, data = files_in[0]
    return read_texts(data, name=name).texts[: int(max_texts)], name


def _run() -> dict:
    texts, label = _texts()
    bar = st.progress(0.0, text="checking the input…")

    def progress(fraction: float, message: str) -> None:
        bar.progress(min(max(float(fraction), 0.0), 1.0), text=message)

    try:
        report = attribution_report(
            encoder,
            texts,
            m=int(m),
            steps=None if steps == "auto" else int(steps),
            mot=bool(run_mot),
            keep=float(keep),
            source=label,
            progress=progress,
        )
    finally:
        bar.empty()
    return {
        "key": content_key(report.attribution.encoder, label, *texts, str(m), str(steps)),
        "report": report,
        "files": report.files(),
    }


if submitted and encoder is not None:
    try:
        st.session_state[RESULT] = _run()
    except LexlensError as exc:
        st.error(str(exc))  # the earlier result (below) stays

result = st.session_state.get(RESULT)
if result is None:
    st.info("Choose a text or upload a corpus, then press **Attribute**.")
    st.stop()

report: AttributionReport = result["report"]
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

# One selector per result (its key carries the result's hash): a new run never keeps the
# index of an earlier run's list, so the label and the heatmap always show the same text.
labels = [f"{i + 1}: {a.text[:80]}" for i, a in enumerate(attrs)]
pick = st.selectbox(
    "Text",
    range(len(attrs)),
    format_func=lambda i: labels[i],
    key=kept(f"attr_pick_{result['key']}", 0),
)
a = attrs[pick]
st.text(f"Text {pick + 1}: {a.text}")  # what the heatmap below shows (plain text, no markup)
if a.truncated:
    st.warning("This text is longer than the model's limit: only its first tokens were attributed.")


def show_text(a) -> None:
    """Heatmap, completeness table and one sub-vector against GlobalT / RandT."""
    st.subheader("Attribution per sub-vector")
    st.plotly_chart(attribution_heatmap(a), width="stretch", key="attr_heatmap")

    table = display.completeness_table(a)
    st.subheader("Completeness")
    st.caption(
        "Σ attributions should equal F(x) − F(x′); **delta** is the gap. "
        f"{a.steps} quadrature nodes ({a.method}); largest |delta| / tolerance scale here: "
        f"{float(table['delta / tolerance scale'].max()):.2%}. The tolerance scale is "
        "max(|F(x) − F(x′)|, its mean over sub-vectors): a sub-vector whose own gap is near 0 "
        "is judged against the mean, so its relative delta alone can look large."
    )
    percent = st.column_config.NumberColumn(format="percent")
    st.dataframe(
        table,
        hide_index=True,
        width="stretch",
        column_config={"relative delta": percent, "delta / tolerance scale": percent},
    )

    st.subheader("One sub-vector against GlobalT and RandT")
    sv = st.selectbox(
        "Sub-vector", a.subvectors, key=kept(f"attr_sv_{result['key']}", a.subvectors[0])
    )
    st.caption(
        "Each series is scaled to its own largest |value| (GlobalT attributes all M sub-vectors "
        "at once, so its raw values are about M times larger); hover for the raw value."
    )
    st.plotly_chart(
        series_bars(a.words, display.comparison_series(a, sv)), width="stretch", key="attr_bars"
    )


def show_topic() -> None:
    """RepMoT's topic view: the texts of the run that share a code, and the words deciding it."""
    st.subheader("Topic of a code")
    st.caption(
        "Texts whose sub-vector is quantised to the same code share a topic (RepMoT, Figure 1). "
        f"The cloud sums, over those texts, each one's top {DEFAULT_PER_TEXT} positively "
        "attributed words for that sub-vector (punctuation left out)."
    )
    c1, c2 = st.columns(2)
    sv = c1.selectbox("Topic sub-vector", range(res.m), key=kept(f"attr_tsv_{result['key']}", 0))
    sizes = dict(topic_sizes(res, sv))
    code = c2.selectbox(
        "Code",
        list(sizes),
        format_func=lambda c: f"{c} ({sizes[c]} texts)",
        key=kept(f"attr_code_{result['key']}_{sv}", next(iter(sizes))),
    )
    topic = code_topic(res, sv, code)
    layout = cloud_layout(topic.cloud_terms(), width=800, height=450)
    left, right = st.columns([3, 2])
    left.image(render_cloud(layout), caption=cloud_caption(layout, "Topic cloud"))
    words = [", ".join(w for w, _ in row) for row in topic.per_text]
    right.dataframe(
        pd.DataFrame({"text": topic.texts, "top words": words}), hide_index=True, key="attr_topic"
    )


if a.words:
    show_text(a)
else:
    st.info("This text has no word the tokenizer knows (only special tokens): nothing to show.")
if len(attrs) > 1:
    show_topic()

if report.mot is not None:
    mot = report.mot
    shown, tests = display.display_tables(mot)
    st.subheader("Masking evaluation (MoT)")
    st.caption(
        f"Mean ‖d̂ᵢ − fᵢ(mask(d))‖² after keeping the top {mot.settings['keep']:.0%} of each "
        "text's words (punctuation never kept) by each ranking and replacing the others with "
        "[UNK] (lower is better; rows in parentheses are references: nothing masked, "
        f"everything masked). {mot.settings['n_docs']} texts, M = {res.m}."
    )
    st.dataframe(shown, hide_index=True, width="stretch", key="attr_mot_table")
    st.caption(
        "MoT against each baseline: two-sided Wilcoxon p per text, q = Benjamini–Hochberg "
        "over the table, and the share of texts where MoT's error is lower."
    )
    st.dataframe(tests, hide_index=True, width="stretch", key="attr_mot_tests")
    for note in mot.notes:
        st.info(note)

st.subheader("Download the report")
files = result["files"]
main = [n for n in ("report.html", "report.json", "attributions.csv") if n in files]
extra = [n for n in files if n not in main]
for names, width in ((main, len(main)), (extra, min(4, len(extra)))):
    cols = st.columns(width) if names else []
    for i, name in enumerate(names):
        cols[i % width].download_button(
            name, files[name], file_name=name, mime=MIME[Path(name).suffix], key=f"attr_dl_{name}"
        )
