"""Semantic deviation page: Exact@k, Semantic@k, FLOPs and the dataset view of the vocabulary.

The numbers come from ``lexlens.analysis.deviation.deviation`` (the same use cases as
``lexlens deviation``); this page parses inputs, caches encodings and results, and renders.
"""

from __future__ import annotations

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
import streamlit as st

from lexlens.analysis.deviation.deviation import (
    DEFAULT_GATE_K,
    DEFAULT_K,
    DEVIATION_NEEDS,
    DeviationResult,
    EncodedCaptions,
    SetDeviation,
    check_options,
    deviation_needs_for,
    deviation_of_encoded,
    deviation_of_index,
    encode_captions,
    input_name,
    read_captions,
    result_files,
)
from lexlens.analysis.deviation.static_embeddings import (
    StaticEmbeddings,
    check_glove,
    static_embeddings_for,
)
from lexlens.analysis.render.plots import png_bytes, wordcloud_image
from lexlens.app.state import (
    ROOT,
    content_key,
    encoder_picker,
    kept,
    kept_result,
    remembered_uploads,
)
from lexlens.models import LexlensError

SAMPLE = ROOT / "data" / "captions.txt"
SOURCES = ["Sample captions (data/captions.txt)", "Upload a caption file", "Stored collection"]
RESULT = "dev_result"
NOUN = {"captions": "captions", "texts": "texts", "images": "images"}

st.header("Semantic deviation")
st.caption(
    "How far do an input's top terms stray from its own words (D2S)? **Exact@k**: share of "
    "the k top terms that are tokens of the caption. **Semantic@k**: their mean best cosine "
    "to a caption token in a static word-embedding space (the encoder's input embeddings, "
    "or a GloVe file). **FLOPs**: mean number of dimensions two different items both "
    "activate (long posting lists when high). Every metric reads the gated vector "
    "E = V ⊙ G (top gate-k dimensions plus the input's own tokens). An image is measured "
    "against the tokens of its paired captions."
)

# ----------------------------------------------------------------------------- inputs
source = st.radio("Input", SOURCES, horizontal=True, key=kept("dev_source", SOURCES[0]))
upload_data: tuple[str, bytes] | None = None
collection: dict | None = None
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
elif source == SOURCES[2]:
    from lexlens.analysis.collections.workspace import list_collections

    cards = [c for c in list_collections() if "error" not in c]
    if not cards:
        st.info(
            "No stored collection yet: build one on the Collections page or with "
            "`lexlens index --encoder NAME --source PATH --out DIR`."
        )
        st.stop()
    by_name = {c["name"]: c for c in cards}
    chosen = st.selectbox(
        "Stored collection",
        list(by_name),
        format_func=lambda n: (
            f"{n} — {by_name[n]['items']:,} {by_name[n]['modality']} items, "
            f"{by_name[n]['encoder']}, gate k {by_name[n]['gate_k']}"
        ),
        key=kept("dev_collection", next(iter(by_name))),
    )
    collection = by_name.get(chosen) or cards[0]
    if collection["modality"] == "image":
        st.caption(
            "Images are measured against their paired captions; the captions are encoded by "
            "the text encoder chosen in the sidebar (same vocabulary as the collection)."
        )

c1, c2, c3 = st.columns(3)
k = c1.number_input(
    "k (top terms)", min_value=1, max_value=1000, step=1, key=kept("dev_k", DEFAULT_K)
)
gate_k = c2.number_input(
    "Gate k",
    min_value=-1,
    step=64,
    key=kept("dev_gate_k", DEFAULT_GATE_K),
    disabled=collection is not None,
    help=(
        "E = V ⊙ G keeps the top gate-k dimensions and the caption's own tokens before any "
        f"metric. {DEFAULT_GATE_K} (VDR's text default) is also the CLI's default; it changes "
        "nothing for an encoder with fewer positive terms (SPLADE). -1 = ungated. A stored "
        "collection keeps the gate it was built with."
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
data, name, table = b"", "", None
try:
    check_options(k=int(k), gate_k=int(gate_k), denominator=denominator)
    if collection is None:
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

# A stored collection of dense features needs its D2S head; captions and texts a text encoder.
needs = deviation_needs_for(collection["modality"]) if collection else DEVIATION_NEEDS
encoder = encoder_picker("Text encoder", needs, key="dev_encoder") if ok else None


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


@st.cache_data(show_spinner=False, max_entries=4)
def index_result(
    _encoder, spec: str, path: str, updated: str, k: int, denominator: str, glove: str
) -> DeviationResult:
    """A stored collection's result, cached on (encoder, collection version, options)."""
    bar = st.progress(0.0, "Reading the collection…")
    result = deviation_of_index(
        path,
        _encoder,
        k=k,
        denominator=denominator,
        glove=glove or None,
        glove_name=glove or None,
        progress=lambda f, msg: bar.progress(f, msg),
    )
    bar.empty()
    return result


def compute() -> DeviationResult:
    spec = encoder.source or encoder.name
    if collection is not None:
        return index_result(
            encoder, spec, collection["path"], str(collection.get("updated")), int(k),
            denominator, glove_path,
        )  # fmt: skip
    encoded = encoded_captions(
        encoder, spec, encoder.device, content_key(data), data, name, int(gate_k)
    )
    return deviation_of_encoded(
        encoded,
        encoder_name=encoder.name,
        vocab=encoder.vocab,
        static=static_for(encoder, spec, glove_path),
        k=int(k),
        denominator=denominator,
        input_info={"captions": input_name(data, name), "rows": len(table)},
        notes=[f"{table.skipped} empty row(s) left out"] if table.skipped else [],
    )


result = kept_result(RESULT, compute) if encoder is not None else st.session_state.get(RESULT)
if result is None:
    st.stop()


# ----------------------------------------------------------------------------- rendering
def render_metrics(part: SetDeviation, kk: int) -> None:
    noun = NOUN.get(part.kind, part.kind)
    m1, m2, m3, m4 = st.columns(4)
    m1.metric(f"Exact@{kk}", "n/a" if part.exact is None else f"{part.exact:.1%}")
    m2.metric(f"Semantic@{kk}", "n/a" if part.semantic is None else f"{part.semantic:.1%}")
    m3.metric(
        "FLOPs",
        "n/a" if part.flops is None else f"{part.flops:.3f}",
        help=(
            f"Mean number of dimensions two different {noun} both activate (self-pairs left "
            f"out; with them: {part.flops_with_self_pairs or 0:.3f})."
        ),
    )
    m4.metric("Mean active dims", f"{part.mean_active_dims:.1f}")
    if part.exact is None:
        st.caption(f"No {noun[:-1]} has caption tokens to compare with: Exact@k is not defined.")
        return
    other = "active" if result.denominator == "k" else "k"
    st.caption(
        f"With the other denominator ({'min(k, positive terms)' if other == 'active' else 'k'}):"
        f" Exact@{kk} {part.by_denominator[other]['exact_at_k']:.1%}, "
        f"Semantic@{kk} {part.by_denominator[other]['semantic_at_k']:.1%}. "
        f"Static embeddings: {result.f_enc}. Gate k = {result.gate_k}."
    )
    pos = part.positive_terms
    if pos["below_k"]:
        st.info(
            f"**{pos['below_k']} of {part.n_measured} {noun} have fewer than {kk} positive "
            f"terms** (mean {pos['mean']:.1f}, min {pos['min']}, max {pos['max']}). With the "
            f"paper's denominator k, their Exact@{kk} is capped at positive/k: on this set "
            f"Exact@{kk} cannot exceed {pos['cap_exact_at_k']:.3f}. Choose 'min(k, positive "
            "terms)' to compare without the cap."
        )
    else:
        st.caption(f"Every one of the {noun} has at least {kk} positive terms.")
    if part.n_skipped:
        st.warning(
            f"{part.n_skipped} of the {noun} not measured ({part.skipped[0]['reason']}); the "
            "others were. They still count in FLOPs and the vocabulary view: "
            + "; ".join(repr(s["text"][:40]) for s in part.skipped[:5])
        )


def render_items(part: SetDeviation, kk: int) -> None:
    noun = NOUN.get(part.kind, part.kind)
    one = noun[:-1]
    per = pd.DataFrame([r.to_dict() for r in part.rows])
    if per.empty:
        return
    exact_name, sem_name = f"Exact@{kk}", f"Semantic@{kk}"
    den_text = "k" if result.denominator == "k" else "min(k, positive terms)"
    per["top_terms"] = per["top_words"].map(" ".join)
    per["caption_tokens"] = per["caption_tokens"].map(" ".join)
    per["positive"] = per["positive_terms"].map(
        lambda p: f"fewer than {kk}" if p < kk else f"{kk} or more"
    )
    fig = px.scatter(
        per,
        x="exact_at_k",
        y="semantic_at_k",
        color="positive",
        hover_data={"text": True, "positive_terms": True, "cap": ":.2f", "positive": False},
        labels={
            "exact_at_k": f"{exact_name}: share of top-{kk} terms that are caption tokens",
            "semantic_at_k": f"{sem_name}: mean best cosine to a caption token",
            "positive": "positive terms",
            "text": one,
            "positive_terms": "positive terms",
        },
        title=f"Per {one}: {exact_name} against {sem_name} (denominator {den_text})",
    )
    fig.update_traces(marker={"size": 10, "opacity": 0.8})
    st.plotly_chart(fig, width="stretch", key=f"dev_scatter_{part.kind}")
    table = per.rename(
        columns={
            "text": one,
            "positive_terms": "positive terms",
            "cap": f"cap on {exact_name}",
            "exact_at_k": exact_name,
            "semantic_at_k": sem_name,
            "top_terms": f"top-{kk} terms",
            "caption_tokens": "caption tokens",
        }
    )
    columns = [
        one,
        "positive terms",
        f"cap on {exact_name}",
        exact_name,
        sem_name,
        f"top-{kk} terms",
        "caption tokens",
    ]
    st.dataframe(table[columns], hide_index=True, width="stretch")
    if len(part.rows) < part.n_measured:
        st.caption(f"Showing {len(part.rows)} of {part.n_measured} {noun}; the means cover all.")


def render_vocabulary(part: SetDeviation) -> bytes | None:
    """The dataset view; returns the cloud's PNG for the downloads."""
    vocab = part.vocabulary
    if vocab is None or not vocab.top_terms:
        return None
    noun = NOUN.get(part.kind, part.kind)
    st.markdown(f"**Dataset view: the vocabulary over all {vocab.n} {noun} (VDR App. D)**")
    st.caption(
        f"Mean weight of each term over the {vocab.n} {noun} (zeros included): the top "
        f"{len(vocab.top_terms)} as a cloud (word pieces joined into the words the {noun} "
        "spell), font size ∝ mean weight. Terms active for at "
        f"least {vocab.lazy_rate:.0%} of the {noun} are flagged *lazy*: always-on dimensions "
        "that signal disentanglement laziness."
    )
    cloud = wordcloud_image(part.cloud_terms)
    st.image(cloud, width="stretch")
    lazy = vocab.lazy_terms
    if lazy:
        st.warning(
            f"{len(lazy)} lazy term(s) (active for ≥ {vocab.lazy_rate:.0%} of {noun}): "
            + ", ".join(f"{t.token} ({t.activation_rate:.0%})" for t in lazy[:30])
            + (" …" if len(lazy) > 30 else "")
        )
    else:
        st.caption(f"No lazy term: none is active for ≥ {vocab.lazy_rate:.0%} of the {noun}.")
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
                pointpos=0,
                showlegend=False,
            )
        )
    fig.update_layout(
        title=(
            f"Weights of the top {len(shown)} terms where they are active "
            f"(in brackets: share of {noun} where active)"
        ),
        xaxis_title="term (activation rate)",
        yaxis_title="weight where active",
    )
    st.plotly_chart(fig, width="stretch", key=f"dev_box_{part.kind}")
    st.caption(
        f"Each box shows a term's weights over the {noun} where it is active: over all of "
        "them most terms are 0 for most items (a sparse encoder), which would collapse every "
        f"box onto 0. Distributions keep up to {vocab.reservoir} values per term (exact "
        "below that)."
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
    return png_bytes(cloud)


kk = result.k
den_text = "k" if result.denominator == "k" else "min(k, positive terms)"
where = result.input.get("captions") or result.input.get("index")
st.subheader(f"{where} · {result.encoder} · k = {kk} · denominator {den_text}")
for note in result.notes:
    if "positive terms" not in note and "skipped" not in note:
        st.caption(note)
if result.flops_captions_images is not None:
    st.metric(
        "FLOPs captions × images",
        f"{result.flops_captions_images:.3f}",
        help=(
            "D2S: (1/(|C||I|)) Σ_c Σ_i s_c⁰·s_i⁰ over every caption × image pair — the mean "
            "number of dimensions a caption query and an image both activate."
        ),
    )
parts = [result.images, result.captions] if result.images else [result.captions]
clouds: dict[str, bytes] = {}
for part in parts:
    if part is None:
        continue
    if len(parts) > 1:
        title = "Images against their paired captions" if part.kind == "images" else "Captions"
        st.subheader(f"{title} ({part.n})")
    render_metrics(part, kk)
    render_items(part, kk)
    png = render_vocabulary(part)
    if png:
        clouds[part.kind] = png

# ----------------------------------------------------------------------------- downloads
files = result_files(result)
st.markdown("**Downloads**")
columns = st.columns(len(files) + len(clouds))
for col, (fname, payload) in zip(columns, files.items(), strict=False):
    mime = "application/json" if fname.endswith(".json") else "text/csv"
    col.download_button(
        fname,
        payload,
        fname,
        mime,
        help="The same document as `lexlens deviation --json`" if fname.endswith(".json") else None,
    )
for col, (kind, png) in zip(columns[len(files) :], clouds.items(), strict=False):
    fname = f"dataset_cloud_{kind}.png"
    col.download_button(fname, png, fname, "image/png")
