"""Query ⊙ Document page: which terms make a score, summing exactly to it; a text or an
image on either side.

Thin: the numbers are a :class:`~lexlens.analysis.lexical.contrib.ContribResult` from
``lexlens.analysis.lexical.contrib.contrib`` — the JSON download is the document ``lexlens contrib
… --json`` prints for the same inputs.
"""

from __future__ import annotations

import streamlit as st

from lexlens.analysis.lexical.contrib import (
    IMAGE_SIDE,
    TEXT_SIDE,
    ContribOptions,
    ContribResult,
    contrib,
)
from lexlens.app.runtime import state
from lexlens.app.views.contrib import apply_prefill, show_pair, show_single
from lexlens.app.views.counterfactual import show_pair_counterfactual
from lexlens.app.views.faithfulness import show_deletion_curve
from lexlens.app.views.samples import DEFAULT_SAMPLE, sample_images
from lexlens.app.views.widgets import option_widget

st.header("Query ⊙ Document")
st.caption(
    "sim(q, d) = E_q · E_d with E(x) = V(x) ⊙ G(x) (top-k dimensions and, for texts, the "
    "input's own tokens). Each shared term contributes q_t · d_t; the contributions sum to "
    "the score. Either side may be an image: it goes through the image encoder, in the same "
    "vocabulary as the text encoder."
)


SAMPLES = sample_images()
KINDS = ["Text", "Image"]
state.restore_inputs("contrib")  # a reload, a bookmark or a link: the inputs in the URL's run
apply_prefill()  # the Evaluation page's "Open both": a failure's query and its two items
q_kind = st.session_state.get("contrib_q_kind", "Text")
d_kind = st.session_state.get("contrib_d_kind", "Text")
text_encoder = image_encoder = None
if "Text" in (q_kind, d_kind):
    text_encoder = state.encoder_picker("Text encoder", TEXT_SIDE, key="contrib_encoder")
if "Image" in (q_kind, d_kind):
    image_encoder = state.encoder_picker(
        "Image encoder",
        IMAGE_SIDE,
        key="contrib_image_encoder",
        default="efficientnet-lite0-lexical",
    )


def side(what: str, prefix: str, default_text: str, default_sample: str):
    """One side's inputs: (kind, text or None, (name, bytes) or None)."""
    kind = st.radio(what, KINDS, horizontal=True, key=state.kept(f"contrib_{prefix}_kind", "Text"))
    if kind == "Text":
        widget = st.text_input if prefix == "q" else st.text_area
        return (
            kind,
            widget(f"{what} text", key=state.kept(f"contrib_{prefix}_text", default_text)),
            None,
        )
    upload = st.file_uploader(
        f"{what} image", type=["png", "jpg", "jpeg", "webp", "gif"], key=f"contrib_{prefix}_upload"
    )
    files = state.remembered_uploads(f"contrib_{prefix}_upload", [upload] if upload else [])
    if files:
        image = files[0]
    else:
        options = list(SAMPLES)
        if not options:
            st.info("Upload an image (scikit-image's sample photos are not installed).")
            return kind, None, None
        if st.session_state.get(f"contrib_{prefix}_sample") not in options:
            st.session_state[f"contrib_{prefix}_sample"] = (
                default_sample if default_sample in options else options[0]
            )
        name = st.selectbox(
            "or a sample photo", options, key=state.kept(f"contrib_{prefix}_sample", default_sample)
        )
        image = (SAMPLES[name].name, SAMPLES[name].read_bytes())
    st.image(image[1], width=200)
    return kind, None, image


left, right = st.columns(2)
with left:
    q_kind, q_text, q_image = side("Query", "q", "cat on a book", DEFAULT_SAMPLE)
with right:
    d_kind, d_text, d_image = side(
        "Document", "d", "a kitten sleeping on an old novel", DEFAULT_SAMPLE
    )
    second = d_kind == "Text" and st.checkbox(
        "Compare with a second document", key=state.kept("contrib_second", False)
    )
    d2_text = ""
    if second:
        d2_text = st.text_area("Second document text", key=state.kept("contrib_d2_text", ""))
c1, c2 = st.columns(2)
mode = option_widget(
    ContribOptions, "query_mode", "contrib_mode", c1, disabled=q_kind == "Image"
)  # an image query is always parametric: an image has no words
if q_kind == "Image":
    c1.caption("An image query is always parametric (an image has no words).")
k = option_widget(ContribOptions, "gate_k", "contrib_k", c2)

q_encoder = text_encoder if q_kind == "Text" else image_encoder
d_encoder = text_encoder if d_kind == "Text" else image_encoder
if (
    q_encoder is None
    or d_encoder is None
    or (q_kind == "Image" and q_image is None)
    or (d_kind == "Image" and d_image is None)
):
    st.stop()

key = state.content_key(
    q_kind,
    d_kind,
    q_text or "",
    d_text or "",
    q_image[1] if q_image else b"",
    d_image[1] if d_image else b"",
    mode,
    str(k),
    q_encoder.name,
    d_encoder.name,
)
result: ContribResult | None = state.kept_result(
    "contrib_result",
    lambda: contrib(
        q_encoder,
        d_encoder,
        query=q_text,
        doc=d_text,
        query_image=q_image,
        doc_image=d_image,
        options=ContribOptions.of(query_mode="parametric" if q_kind == "Image" else mode, gate_k=k),
    ),
    key=key,
)
if result is None:
    st.stop()
# New texts, images or encoders make a new run; gate k, mode and labels update this one.
state.keep_for_reload(
    "contrib",
    "contrib_",
    "query ⊙ document",
    {f"contrib_{p}_upload": [image] for p, image in (("q", q_image), ("d", d_image)) if image},
    subject=(
        "contrib_q_kind",
        "contrib_d_kind",
        "contrib_q_text",
        "contrib_d_text",
        "contrib_second",
        "contrib_d2_text",
        "contrib_encoder",
        "contrib_image_encoder",
    ),
)

for note in result.notes:
    st.caption(f"Note: {note}")
vocab = getattr(d_encoder, "vocab", None)
if second and d2_text.strip():
    other: ContribResult | None = state.kept_result(
        "contrib_result2",
        lambda: contrib(
            q_encoder,
            d_encoder,
            query=q_text,
            doc=d2_text,
            query_image=q_image,
            options=ContribOptions.of(
                query_mode="parametric" if q_kind == "Image" else mode, gate_k=k
            ),
        ),
        key=state.content_key(key, d2_text),
    )
else:
    other = None
if other is not None:
    show_pair(result, other, (d_text, d2_text), q_text or "", vocab)
else:
    show_single(result, d_text, q_text or "", vocab)
show_deletion_curve(result, q_encoder, d_encoder, d_image)
show_pair_counterfactual(
    q_encoder,
    d_encoder,
    q_image[1] if q_image else q_text,
    (d_text or "", d2_text),
    "parametric" if q_kind == "Image" else mode,
    k,
)
