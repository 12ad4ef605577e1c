"""Attribution page: Integrated Gradients per PQ sub-vector (RepMoT), masking evaluation, reports.

Thin: every number comes from ``analysis.attribution`` / ``analysis.mot``; the downloads are
the bytes ``analysis.report`` renders. Results live in ``st.session_state`` so a rerun (or a
failed new run) keeps what was computed.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
import streamlit as st

from lexlens.analysis.attribution import ATTRIBUTION_NEEDS, attribute_corpus, randt_attributions
from lexlens.analysis.cli.common import read_corpus
from lexlens.analysis.report import attribution_report_files, dense_with_m, is_dense_pq
from lexlens.app.state import content_key, encoder_picker
from lexlens.models import LexlensError

RESULT = "attr_result"
M_CHOICES = [12, 24, 48]

st.header("Attribution")
st.caption(
    "Which words decide each discrete code? The dense embedding is split into M sub-vectors, "
    "each quantised to one of K centroids; Integrated Gradients attributes every sub-vector's "
    "closeness to its own centroid, −‖d̂ᵢ − fᵢ(x)‖², to the input words (RepMoT)."
)

encoder = encoder_picker(
    "Dense + PQ encoder", ATTRIBUTION_NEEDS, key="attr_encoder", default="minilm-pq"
)
if encoder is None:
    st.stop()
if not is_dense_pq(encoder):
    st.error(
        f"{encoder.name} is not a dense+PQ encoder: choose minilm-pq or a saved dense+PQ model."
    )
    st.stop()

with st.form("attr_form"):
    source = st.radio("Input", ["Text", "Corpus file"], horizontal=True, key="attr_source")
    text = st.text_area("Text", value="a cat sleeping on a book", height=80, key="attr_text")
    upload = st.file_uploader(
        "Corpus: .txt (one text per line) or .csv (a 'text' column)",
        type=["txt", "csv"],
        key="attr_upload",
    )
    c1, c2, c3, c4 = st.columns(4)
    m_choices = sorted({*M_CHOICES, encoder.m})
    m = c1.selectbox("Sub-vectors M", m_choices, index=m_choices.index(encoder.m), key="attr_m")
    steps = c2.number_input("IG steps", 2, 500, 50, key="attr_steps")
    max_texts = c3.number_input("Texts from the corpus (first N)", 1, 2000, 20, key="attr_max")
    run_mot = c4.checkbox("MoT masking evaluation", key="attr_mot")
    keep = c4.number_input(
        "MoT: fraction of words kept", 0.01, 1.0, 0.05, step=0.01, key="attr_keep"
    )
    submitted = st.form_submit_button("Attribute", type="primary")


def _texts() -> tuple[list[str], str]:
    """The texts to attribute and a label of their source; LexlensError on bad input."""
    if source == "Text":
        if not text.strip():
            raise LexlensError("the text is empty: type something to attribute")
        return [text], "text"
    if upload is None:
        raise LexlensError("upload a corpus file (.txt or .csv) or choose Input → Text")
    suffix = Path(upload.name).suffix.lower()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"corpus{suffix}"
        path.write_bytes(upload.getvalue())
        texts = read_corpus(path)
    return texts[: int(max_texts)], upload.name


def _run() -> dict:
    texts, label = _texts()
    bar = st.progress(0.0, text="preparing…")

    def progress(fraction: float, message: str) -> None:
        bar.progress(min(max(float(fraction), 0.0), 1.0), text=message)

    enc = dense_with_m(encoder, int(m), progress)
    attrs = attribute_corpus(enc, texts, steps=int(steps), progress=progress)
    mot_table = mot_tests = None
    if run_mot:
        from lexlens.analysis.mot import mot_evaluate

        progress(0.0, "masking evaluation…")
        mot = mot_evaluate(enc, texts, keep=float(keep), attributions=attrs, progress=progress)
        mot_table, mot_tests = mot.table, mot.significance
    bar.empty()
    meta = {
        "source": label,
        "M": enc.m,
        "K": enc.k,
        "IG steps": int(steps),
        "notes": list(enc.notes),
    }
    if run_mot:
        meta["MoT"] = {k: mot.settings[k] for k in ("keep", "mask", "n_docs", "codebook")}
        meta["notes"] += [n for n in mot.settings.get("notes", []) if n not in meta["notes"]]
    files = attribution_report_files(
        attrs, encoder_name=enc.name, mot_table=mot_table, mot_tests=mot_tests, meta=meta
    )
    return {
        "key": content_key(enc.name, label, *texts, str(m), str(steps)),
        "encoder": enc.name,
        "attrs": attrs,
        "mot_table": mot_table,
        "mot_tests": mot_tests,
        "meta": meta,
        "files": files,
    }


if submitted:
    try:
        st.session_state[RESULT] = _run()
    except LexlensError as exc:
        st.error(str(exc))  # earlier results (below) stay

result = st.session_state.get(RESULT)
if result is None:
    st.info("Choose a text or upload a corpus, then press **Attribute**.")
    st.stop()

attrs = result["attrs"]
meta = result["meta"]
st.caption(
    f"{result['encoder']}: M = {meta['M']} sub-vectors, K = {meta['K']} codes each, "
    f"{meta['IG steps']} IG steps, {len(attrs)} text(s) from {meta['source']}."
)
for note in meta.get("notes", []):
    st.info(note)

labels = [f"{i + 1}: {a.text[:80]}" for i, a in enumerate(attrs)]
pick = st.selectbox("Text", range(len(attrs)), format_func=lambda i: labels[i], key="attr_pick")
a = attrs[pick]
if a.truncated:
    st.warning("This text is longer than the model's limit: only its first tokens were attributed.")

# --- per-sub-vector heatmap (words on x, sub-vectors on y)
rows = [f"{sv} · code {int(a.codes[sv])}" for sv in a.subvectors]
scale = float(np.abs(a.attributions).max()) or 1.0
fig = px.imshow(
    a.attributions,
    x=list(range(len(a.words))),
    y=rows,
    color_continuous_scale="RdBu_r",
    zmin=-scale,
    zmax=scale,
    aspect="auto",
    labels={"x": "word", "y": "sub-vector", "color": "attribution"},
)
fig.update_xaxes(tickmode="array", tickvals=list(range(len(a.words))), ticktext=a.words, side="top")
fig.update_traces(
    customdata=np.broadcast_to(np.array(a.words, dtype=object), a.attributions.shape),
    hovertemplate="sub-vector %{y}<br>%{customdata}: %{z:.4g}<extra></extra>",
)
fig.update_layout(height=max(300, 18 * len(rows) + 120), margin=dict(l=10, r=10, t=60, b=10))
st.subheader("Attribution per sub-vector")
st.plotly_chart(fig, width="stretch", key="attr_heatmap")

# --- completeness
gap = a.target_gap if a.target_gap is not None else a.attributions.sum(1) - a.delta
table = pd.DataFrame(
    {
        "sub-vector": a.subvectors,
        "code": [int(a.codes[sv]) for sv in a.subvectors],
        "F(x) − F(x′)": gap,
        "Σ attributions": a.attributions.sum(1),
        "delta": a.delta,
    }
)
st.subheader("Completeness")
st.caption(
    "Σ attributions should equal F(x) − F(x′); **delta** is the gap (Captum's convergence "
    f"delta). Largest |delta| here: {np.abs(a.delta).max():.3g}; raise the steps if it is large."
)
st.dataframe(table, hide_index=True, width="stretch")

# --- one sub-vector against GlobalT and RandT
st.subheader("One sub-vector against GlobalT and RandT")
sv = st.selectbox("Sub-vector", a.subvectors, key="attr_sv")
r = a.subvectors.index(sv)
series = {
    "MoT (this sub-vector)": a.attributions[r],
    "GlobalT (whole vector)": a.global_attributions,
}
if a.subvectors == list(range(a.m)) and a.m > 1:
    series["RandT (another sub-vector)"] = randt_attributions(a)[r]
st.caption(
    "Each series is scaled to its own largest |value| (GlobalT attributes all M sub-vectors "
    "at once, so its raw values are about M times larger); hover for the raw value."
)


def _scaled(vals: np.ndarray) -> np.ndarray:
    peak = float(np.abs(vals).max())
    return vals / peak if peak > 0 else vals


bars = go.Figure(
    [
        go.Bar(
            name=name,
            x=list(range(len(a.words))),
            y=_scaled(np.asarray(vals, dtype=float)),
            customdata=np.stack([np.array(a.words, dtype=object), np.asarray(vals)], axis=1),
            hovertemplate="%{customdata[0]}: %{customdata[1]:.4g}<extra>" + name + "</extra>",
        )
        for name, vals in series.items()
    ]
)
bars.update_xaxes(tickmode="array", tickvals=list(range(len(a.words))), ticktext=a.words)
bars.update_layout(
    barmode="group", height=320, margin=dict(l=10, r=10, t=10, b=10), yaxis_title="scaled"
)
st.plotly_chart(bars, width="stretch", key="attr_bars")

if result["mot_table"] is not None:
    st.subheader("Masking evaluation (MoT)")
    st.caption(
        f"Mean ‖d̂ᵢ − fᵢ(mask(d))‖² after keeping the top {meta['MoT']['keep']:.0%} of the words "
        "by each ranking and replacing the others with [UNK] (lower is better; rows in "
        "parentheses are references: nothing masked, everything masked)."
    )
    st.dataframe(result["mot_table"], width="stretch")
    if result["mot_tests"] is not None:
        st.caption("Paired significance tests of MoT against each baseline")
        st.dataframe(result["mot_tests"], width="stretch")

st.subheader("Download the report")
files = result["files"]
cols = st.columns(len(files))
mime = {".html": "text/html", ".json": "application/json", ".csv": "text/csv"}
for col, (name, data) in zip(cols, files.items(), strict=True):
    col.download_button(
        name, data, file_name=name, mime=mime[Path(name).suffix], key=f"attr_dl_{name}"
    )
