"""Semantic deviation page: Exact@k, Semantic@k, FLOPs and the dataset view of the vocabulary.

Thin: a caption file's numbers come from :func:`~lexlens.analysis.deviation.deviation.deviation`
(cached on its inputs), a stored collection's from
:func:`~lexlens.analysis.deviation.deviation.deviation_of_index`, run as a job — the same
functions ``lexlens deviation`` calls; :mod:`lexlens.app.views.deviation` draws the result.
"""

from __future__ import annotations

import streamlit as st

from lexlens.analysis.core.gating import DEFAULT_GATE_K
from lexlens.analysis.core.samples import sample_path
from lexlens.analysis.deviation.deviation import deviation, deviation_of_index
from lexlens.analysis.deviation.options import (
    DEVIATION_NEEDS,
    DeviationOptions,
    deviation_needs_for,
)
from lexlens.analysis.deviation.result import DeviationResult
from lexlens.app.runtime import state
from lexlens.app.runtime.access import server_path
from lexlens.app.views.deviation import show_result
from lexlens.app.views.widgets import option_widget
from lexlens.models import LexlensError

SAMPLE = sample_path("captions.txt")
SOURCES = ["Sample captions (data/captions.txt)", "Upload a caption file", "Stored collection"]
RESULT = "dev_result"
OPTION_KEYS = ("dev_k", "dev_gate_k", "dev_denominator", "dev_glove")

st.header("Semantic deviation")
st.caption(
    "How far do an input's top terms stray from its own words (D2S)? **Exact@k**: share of "
    "the k top terms that are tokens of the caption. **Semantic@k**: their mean best cosine "
    "to a caption token in a static word-embedding space (the encoder's input embeddings, "
    "or a GloVe file). **FLOPs** Σⱼ p̄ⱼ² (SPLADE's and D2S's, p̄ⱼ the share of items that "
    "activate dimension j; every pair, self-pairs included) and the mean number of dimensions "
    "two *different* items both activate (long posting lists when high). Every metric reads "
    "the gated vector "
    "E = V ⊙ G (top gate-k dimensions plus the input's own tokens). An image is measured "
    "against the tokens of its paired captions."
)
state.restore_inputs("deviation")

# ----------------------------------------------------------------------------- inputs
# The options come first and are drawn on every run, whatever the source: a widget that a
# run does not draw loses its value, and one drawn again starts from its minimum.
c1, c2, c3 = st.columns(3)
k = option_widget(DeviationOptions, "k", "dev_k", c1)
stored = st.session_state.get("dev_source") == SOURCES[2]
gate_k = option_widget(
    DeviationOptions,
    "gate_k",
    "dev_gate_k",
    c2,
    label="Gate k",
    default=DEFAULT_GATE_K,
    step=64,
    disabled=stored,
)
if stored:
    c2.caption("A stored collection keeps the gate it was built with.")
denominator = option_widget(
    DeviationOptions,
    "denominator",
    "dev_denominator",
    c3,
    format_func=lambda d: "k (the paper's)" if d == "k" else "min(k, positive terms)",
)
glove = option_widget(
    DeviationOptions,
    "glove",
    "dev_glove",
    default="",
    label="GloVe file on the server for Semantic@k (optional; default: the encoder's own "
    "embeddings)",
).strip()
source = st.radio("Input", SOURCES, horizontal=True, key=state.kept("dev_source", SOURCES[0]))
try:  # a stored collection keeps its own gate
    options = DeviationOptions.of(
        k=k,
        gate_k=None if source == SOURCES[2] else gate_k,
        denominator=denominator,
        glove=server_path(glove, "GloVe file") if glove else None,
    )
except LexlensError as exc:
    st.error(str(exc))
    st.stop()
inputs = {key: st.session_state.get(key) for key in (*OPTION_KEYS, "dev_source")}
device = st.session_state.get("device", "auto")


@st.cache_data(show_spinner=False, max_entries=8)
def measured(spec: str, device: str, data: bytes, name: str, options: DeviationOptions):
    """:func:`deviation` of a caption file, cached on its inputs (the encoder by name)."""
    bar = st.progress(0.0, "Encoding captions…")
    result = deviation(
        state.get_encoder(spec, device),
        data,
        name=name,
        options=options,
        progress=lambda f, msg: bar.progress(f, msg),
    )
    bar.empty()
    return result


if source != SOURCES[2]:
    uploads: dict[str, list[tuple[str, bytes]]] = {}
    if source == SOURCES[1]:
        upload = st.file_uploader(
            "Caption file: .txt (one per line), or .csv / .jsonl with a text column",
            type=["txt", "csv", "jsonl"],
            key="dev_upload",
        )
        uploads = {
            "dev_captions": state.remembered_uploads("dev_captions", [upload] if upload else None)
        }
        if not uploads["dev_captions"]:
            st.info("Upload a caption file, or pick the sample captions.")
            st.stop()
        name, data = uploads["dev_captions"][0]
    else:
        name, data = SAMPLE.name, SAMPLE.read_bytes()
    spec = state.encoder_choice("Text encoder", DEVIATION_NEEDS, key="dev_encoder")
    if spec is None:
        st.stop()
    result = state.kept_result(RESULT, lambda: measured(spec, device, data, name, options))
    if result is None:
        st.stop()
    # New captions or another encoder make a new run; k, gate and GloVe update this one.
    state.keep_for_reload(
        "deviation", "dev_", f"deviation of {name}", uploads, subject=("dev_source", "dev_encoder")
    )
    show_result(result)
    st.stop()

# ------------------------------------------------------------------- a stored collection
from lexlens.analysis.collections.workspace import list_collections  # noqa: E402

cards = [c for c in list_collections() if "error" not in c]
if not cards:
    st.info(
        "No stored collection yet: build one on the Collections page or with "
        "`lexlens index --encoder NAME --source PATH --out DIR`."
    )
    st.stop()
by_name = {c["name"]: c for c in cards}
if st.session_state.get("dev_collection") not in by_name:
    st.session_state["dev_collection"] = next(iter(by_name))
chosen = st.selectbox(
    "Stored collection",
    list(by_name),
    format_func=lambda n: (
        f"{n} — {by_name[n]['items']:,} {by_name[n]['modality']} items, "
        f"{by_name[n]['encoder']}, gate k {by_name[n]['gate_k']}"
    ),
    key=state.kept("dev_collection"),
)
collection = by_name[chosen]
if collection["modality"] == "image":
    st.caption(
        "Images are measured against their paired captions; the captions are encoded by the "
        "text encoder chosen in the sidebar (same vocabulary as the collection)."
    )
spec = state.encoder_choice(
    "Text encoder", deviation_needs_for(collection["modality"]), key="dev_encoder"
)
inputs.update(dev_collection=chosen, dev_encoder=spec, updated=str(collection.get("updated")))
if spec is not None and st.button("Measure the collection", type="primary"):
    path = collection["path"]
    state.start_job(
        "deviation",
        f"deviation of {chosen}",
        inputs,
        {},
        lambda progress: deviation_of_index(
            path,
            spec,
            device=None if device == "auto" else device,
            progress=progress,
            options=options,
        ),
    )
result, job, status = state.job_outcome("deviation", DeviationResult, inputs)
if state.show_job_state(job, status, "Measuring", "measurement"):
    st.stop()
if result is None:
    st.info("Press **Measure the collection**: it reads every stored vector, as a job.")
    st.stop()
show_result(result)
