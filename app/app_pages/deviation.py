"""Semantic deviation page: Exact@k, Semantic@k, FLOPs and the dataset view of the vocabulary.

The numbers come from ``lexlens.analysis.deviation`` (the same use case as
``lexlens deviation``); this page parses inputs, caches the encoded captions and renders.
"""

from __future__ import annotations

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
import streamlit as st

from lexlens.analysis.deviation import (
    DEFAULT_GATE_K,
    DEFAULT_K,
    DEVIATION_NEEDS,
    DeviationResult,
    EncodedCaptions,
    StaticEmbeddings,
    check_glove,
    check_options,
    deviation_of_encoded,
    encode_captions,
    input_name,
    read_captions,
    result_files,
    static_embeddings_for,
)
from lexlens.analysis.plots import png_bytes, wordcloud_image
from lexlens.analysis.terms import Term
from lexlens.app.state import ROOT, content_key, encoder_picker, kept, remembered_uploads
from lexlens.models import LexlensError

SAMPLE = ROOT / "data" / "captions.txt"
SOURCES = ["Sample captions (data/captions.txt)", "Upload a caption file"]
RESULT = "dev_result"

st.header("Semantic deviation")
st.caption(
    "How far do a caption's top terms stray from its own words (D2S)? **Exact@k**: share of "
    "the k top terms that are tokens of the caption. **Semantic@k**: their mean best cosine "
    "to a caption token in a static word-embedding space (the encoder's input embeddings, "
    "or a GloVe file). **FLOPs**: mean number of dimensions two different captions both "
    "activate (long posting lists when high). Every metric reads the gated vector "
    "E = V ⊙ G (top gate-k dimensions plus the caption's own tokens)."
)

# ----------------------------------------------------------------------------- inputs
source = st.radio("Captions", SOURCES, horizontal=True, key=kept("dev_source", SOURCES[0]))
upload_data: tuple[str, bytes] | None = None
if source == SOURCES[1]:
    upload = st.file_uploader(
        "Caption file: .txt (one per line), or .csv / .jsonl with a text column",
        type=["txt", "csv", "jsonl"],
        key="dev_upload",
    )
    files = remembered_uploads("dev_captions", [upload] if upload else None)
    if not files:
        st.info("Upload a caption file, or pick the sample captions.")
        st.stop()
    upload_data = files[0]

c1, c2, c3 = st.columns(3)
k = c1.number_input(
    "k (top terms)", min_value=1, max_value=1000, step=1, key=kept("dev_k", DEFAULT_K)
)
gate_k = c2.number_input(
    "Gate k",
    min_value=-1,
    step=64,
    key=kept("dev_gate_k", DEFAULT_GATE_K),
    help=(
        "E = V ⊙ G keeps the top gate-k dimensions and the caption's own tokens before any "
        f"metric. {DEFAULT_GATE_K} (VDR's text default) is also the CLI's default; it changes "
        "nothing for an encoder with fewer positive terms (SPLADE). -1 = ungated."
    ),
)
denominator = c3.radio(
    "Denominator",
    ["k", "active"],
    format_func=lambda d: "k (the paper's)" if d == "k" else "min(k, positive terms)",
    horizontal=True,
    key=kept("dev_denominator", "k"),
    help=(
        "A caption with fewer than k positive terms cannot reach Exact@k = 1 with the "
        "paper's denominator k; min(k, positive terms) removes that cap."
    ),
)
glove_path = st.text_input(
    "GloVe file on the server for Semantic@k (optional; default: the encoder's own embeddings)",
    key=kept("dev_glove", ""),
).strip()

# Validate everything before the encoder loads.
try:
    check_options(k=int(k), gate_k=int(gate_k), denominator=denominator)
    if upload_data is None:
        data, name = SAMPLE.read_bytes(), SAMPLE.name
    else:
        name, data = upload_data
    table = read_captions(data, name)
    if glove_path:
        check_glove(glove_path)
except LexlensError as exc:
    st.error(str(exc))
    if RESULT in st.session_state:
        st.caption("Showing the previous result below.")
    ok = False
else:
    ok = True

encoder = encoder_picker("Text encoder", DEVIATION_NEEDS, key=kept("dev_encoder")) if ok else None


@st.cache_data(show_spinner=False, max_entries=8)
def encoded_captions(
    _encoder, spec: str, device: str, key: str, data: bytes, name: str, gate_k: int
) -> EncodedCaptions:
    """Gated CSR rows of the captions, cached on (encoder, file content, gate k)."""
    bar = st.progress(0.0, "Encoding captions…")
    encoded = encode_captions(
        _encoder,
        read_captions(data, name),
        gate_k=gate_k,
        progress=lambda f, msg: bar.progress(f, msg),
    )
    bar.empty()
    return encoded


@st.cache_resource(show_spinner="Reading static embeddings…", max_entries=4)
def static_for(_encoder, spec: str, glove: str) -> StaticEmbeddings:
    return static_embeddings_for(_encoder, glove or None, glove_name=glove or None)


if encoder is not None:
    try:
        spec = encoder.source or encoder.name
        encoded = encoded_captions(
            encoder, spec, encoder.device, content_key(data), data, name, int(gate_k)
        )
        result = deviation_of_encoded(
            encoded,
            encoder_name=encoder.name,
            vocab=encoder.vocab,
            static=static_for(encoder, spec, glove_path),
            k=int(k),
            denominator=denominator,
            input_info={"captions": input_name(data, name), "rows": len(table)},
            notes=[f"{table.skipped} empty row(s) left out"] if table.skipped else [],
        )
        st.session_state[RESULT] = result
    except LexlensError as exc:
        st.error(str(exc))

result: DeviationResult | None = st.session_state.get(RESULT)
if result is None:
    st.stop()

# ----------------------------------------------------------------------------- results
caps = result.captions
kk = result.k
den_text = "k" if result.denominator == "k" else "min(k, positive terms)"
st.subheader(f"{caps.n} captions · {result.encoder} · k = {kk} · denominator {den_text}")
m1, m2, m3, m4 = st.columns(4)
m1.metric(f"Exact@{kk}", f"{caps.exact:.1%}")
m2.metric(f"Semantic@{kk}", f"{caps.semantic:.1%}")
m3.metric(
    "FLOPs",
    "n/a" if caps.flops is None else f"{caps.flops:.3f}",
    help=(
        "Mean number of dimensions two different captions both activate (self-pairs left "
        f"out; with them: {caps.flops_with_self_pairs:.3f})."
    ),
)
m4.metric("Mean active dims", f"{caps.mean_active_dims:.1f}")
other = "active" if result.denominator == "k" else "k"
st.caption(
    f"With the other denominator ({'min(k, positive terms)' if other == 'active' else 'k'}): "
    f"Exact@{kk} {caps.by_denominator[other]['exact_at_k']:.1%}, "
    f"Semantic@{kk} {caps.by_denominator[other]['semantic_at_k']:.1%}. "
    f"Static embeddings: {result.f_enc}. Gate k = {result.gate_k}."
)
pos = caps.positive_terms
if pos["below_k"]:
    st.info(
        f"**{pos['below_k']} of {caps.n} captions have fewer than {kk} positive terms** "
        f"(mean {pos['mean']:.1f}, min {pos['min']}, max {pos['max']}). With the paper's "
        f"denominator k, their Exact@{kk} is capped at positive/k: on this set Exact@{kk} "
        f"cannot exceed {pos['cap_exact_at_k']:.3f}. Choose 'min(k, positive terms)' to "
        "compare without the cap."
    )
else:
    st.caption(f"Every caption has at least {kk} positive terms (mean {pos['mean']:.1f}).")
if caps.n_skipped:
    st.warning(
        f"{caps.n_skipped} caption(s) skipped: no token of the vocabulary (emoji only, say); "
        "the others were measured. " + "; ".join(repr(s["text"][:40]) for s in caps.skipped[:5])
    )
for note in result.notes:
    if "positive terms" not in note and "skipped" not in note:
        st.caption(note)

per = pd.DataFrame([r.to_dict() for r in caps.rows])
exact_name = f"Exact@{kk}"
sem_name = f"Semantic@{kk}"
if not per.empty:
    per["top_terms"] = per["top_terms"].map(" ".join)
    per["caption_tokens"] = per["caption_tokens"].map(" ".join)
    per["below k"] = per["positive_terms"] < kk
    fig = px.scatter(
        per,
        x="exact_at_k",
        y="semantic_at_k",
        color=per["below k"].map({True: f"fewer than {kk}", False: f"{kk} or more"}),
        hover_data={"text": True, "positive_terms": True, "cap": ":.2f"},
        labels={
            "exact_at_k": f"{exact_name}: share of top-{kk} terms that are caption tokens",
            "semantic_at_k": f"{sem_name}: mean best cosine to a caption token",
            "color": "positive terms",
            "text": "caption",
            "positive_terms": "positive terms",
        },
        title=f"Per caption: {exact_name} against {sem_name} (denominator {den_text})",
    )
    fig.update_traces(marker={"size": 10, "opacity": 0.8})
    st.plotly_chart(fig, width="stretch")
    table = per.rename(
        columns={
            "text": "caption",
            "positive_terms": "positive terms",
            "cap": f"cap on {exact_name}",
            "exact_at_k": exact_name,
            "semantic_at_k": sem_name,
            "top_terms": f"top-{kk} terms",
            "caption_tokens": "caption tokens",
        }
    )
    st.dataframe(
        table[
            [
                "caption",
                "positive terms",
                f"cap on {exact_name}",
                exact_name,
                sem_name,
                f"top-{kk} terms",
                "caption tokens",
            ]
        ],
        hide_index=True,
        width="stretch",
    )
    if len(caps.rows) < caps.n:
        st.caption(f"Showing {len(caps.rows)} of {caps.n} captions; the means cover all.")

# ----------------------------------------------------------------------------- dataset view
vocab = caps.vocabulary
if vocab is not None and vocab.top_terms:
    st.subheader("Dataset view: the vocabulary over all captions (VDR App. D)")
    st.caption(
        f"Mean weight of each term over the {vocab.n} captions (zeros included): the top "
        f"{len(vocab.top_terms)} as a cloud, font size ∝ mean weight. Terms active for at "
        f"least {vocab.lazy_rate:.0%} of the captions are flagged *lazy*: always-on "
        "dimensions that signal disentanglement laziness."
    )
    cloud = wordcloud_image([Term(t.token, t.mean_weight, t.index) for t in vocab.top_terms])
    st.image(cloud, width="stretch")
    lazy = vocab.lazy_terms
    if lazy:
        st.warning(
            f"{len(lazy)} lazy term(s) (active for ≥ {vocab.lazy_rate:.0%} of captions): "
            + ", ".join(f"{t.token} ({t.activation_rate:.0%})" for t in lazy[:30])
        )
    else:
        st.caption(f"No lazy term: none is active for ≥ {vocab.lazy_rate:.0%} of the captions.")
    shown = vocab.top_terms[:15]
    fig = go.Figure()
    for t in shown:
        values = vocab.distributions.get(t.token)
        if values is None or values.size == 0:
            continue
        fig.add_trace(
            go.Box(
                y=values,
                name=f"{t.token} ({t.activation_rate:.0%})",
                boxpoints="all" if values.size <= 30 else "outliers",
                jitter=0.3,
                showlegend=False,
            )
        )
    fig.update_layout(
        title=(
            f"Weights of the top {len(shown)} terms where they are active "
            "(in brackets: share of captions where active)"
        ),
        xaxis_title="term (activation rate)",
        yaxis_title="weight where active",
    )
    st.plotly_chart(fig, width="stretch")
    st.caption(
        "Each box shows a term's weights over the captions where it is active: over all "
        "captions most terms are 0 for most of them (a sparse encoder), which would collapse "
        f"every box onto 0. Distributions keep up to {vocab.reservoir} values per term "
        "(exact below that)."
    )
    stats = pd.DataFrame([t.to_dict() for t in vocab.top_terms])[
        ["token", "mean_weight", "activation_rate", "mean_when_active", "max_weight", "lazy"]
    ].rename(
        columns={
            "token": "term",
            "mean_weight": "mean weight",
            "activation_rate": "activation rate",
            "mean_when_active": "mean where active",
            "max_weight": "max weight",
        }
    )
    with st.expander(f"Top {len(stats)} terms by mean weight"):
        st.dataframe(stats, hide_index=True, width="stretch")

# ----------------------------------------------------------------------------- downloads
files = result_files(result)
d1, d2, d3, d4 = st.columns(4)
d1.download_button(
    "deviation.json",
    files["deviation.json"],
    "deviation.json",
    "application/json",
    help="The same document as `lexlens deviation --json`",
)
d2.download_button("captions.csv", files["captions.csv"], "captions.csv", "text/csv")
if "vocabulary.csv" in files:
    d3.download_button("vocabulary.csv", files["vocabulary.csv"], "vocabulary.csv", "text/csv")
if vocab is not None and vocab.top_terms:
    d4.download_button("dataset_cloud.png", png_bytes(cloud), "dataset_cloud.png", "image/png")
