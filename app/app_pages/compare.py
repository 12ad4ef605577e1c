"""Compare page: two encoders — or one encoder at two gate k — side by side on a text, an
image or a stored collection.

Thin: every number is a :class:`~lexlens.analysis.compare.result.CompareResult` from
``lexlens.analysis.compare`` (the document ``lexlens compare … --json`` prints for the same
inputs); the page draws the options' widgets from their declarations
(:mod:`lexlens.analysis.compare.options`), caches encodings and draws the result.
"""

from __future__ import annotations

import hashlib

import streamlit as st

from lexlens.analysis.compare.compare import compare_encodings
from lexlens.analysis.compare.options import CompareIndexOptions, CompareOptions, default_gates
from lexlens.analysis.compare.result import CompareResult
from lexlens.analysis.compare.sides import COMPARE_NEEDS, check_sides
from lexlens.analysis.lexical.terms import encode_image, encode_text
from lexlens.app.runtime import state
from lexlens.app.views.compare import (
    show_collection,
    show_downloads,
    show_header,
    show_image_views,
    show_input_terms,
)
from lexlens.app.views.compare_inputs import collection_result, encoder_key, gate_input
from lexlens.app.views.samples import sample_images
from lexlens.app.views.systems import systems_link
from lexlens.app.views.widgets import option_widget
from lexlens.models import LexicalEncoding, LexlensError

KINDS = ["Text", "Image", "Stored collection"]
SAME = "(the same collection as A)"
DEFAULT_TEXT = "a dog running on the beach at sunset"
#: The encoder both sides start on: one encoder at two gate k (the analysis's default
#: gates for one encoder) until another one is picked.
DEFAULT_ENCODER = {"Text": "splade-tiny", "Image": "efficientnet-lite0-lexical"}

st.header("Compare")
st.caption(
    "Two encoders, or one encoder at two gate k, side by side. On a text or an image: the "
    "terms both give it, the terms only one gives, with both weights, and Spearman's ρ of the "
    "shared terms' weights; on an image also a patch group and one term's heatmap on both "
    "grids. On stored collections (as a job): semantic deviation, FLOPs and vocabulary "
    "statistics side by side, and a query's hits — which moved, which terms moved them and, "
    "for a query the collection keeps, which are relevant. Every weight is "
    "the gated E = V ⊙ G at each side's gate k; encoders with different vocabularies are "
    "compared on the tokens they share."
)


@st.cache_data(show_spinner="Encoding…", max_entries=64)
def encode(_encoder, encoder_key: str, kind: str, digest: str, _value) -> LexicalEncoding:
    """One input through one encoder, cached on (encoder, content)."""
    if kind == "text":
        return encode_text(_encoder, _value)
    return encode_image(_encoder, _value)


state.restore_inputs("compare")  # a reload, a bookmark or a link: the inputs in the URL's run
uploads: list[tuple[str, bytes]] = []  # an uploaded image, kept with the inputs
kind = st.radio("Compare on", KINDS, horizontal=True, key=state.kept("compare_kind", KINDS[0]))
RESULT = f"compare_result_{kind.split()[0].lower()}"  # the last result of each kind is kept
SETTINGS = CompareIndexOptions if kind == KINDS[2] else CompareOptions
TOP_KEY = f"compare_top_{kind[:5]}"
top = option_widget(SETTINGS, "top", TOP_KEY, low=3, high=60)


def remember(new: CompareResult) -> None:
    st.session_state[RESULT] = new


def fail(exc: LexlensError) -> None:
    st.error(str(exc))
    if st.session_state.get(RESULT) is not None:
        st.caption("Showing the previous result below.")


# ----------------------------------------------------------------------------- text, image
if kind in ("Text", "Image"):
    prefix = f"compare_{kind.lower()}"
    default_a = default_b = DEFAULT_ENCODER[kind]
    gate_a, gate_b = default_gates(kind.lower(), same=True)
    value, label, digest, problem = None, "", "", None
    box, term = None, None
    if kind == "Text":
        text = st.text_area("Text", height=90, key=state.kept("compare_text", DEFAULT_TEXT))
        if text.strip():
            value, digest = text, hashlib.sha1(text.encode("utf-8")).hexdigest()
        else:
            problem = "the text is empty: type some words to compare on"
    else:
        samples = sample_images()
        with st.container(border=True):
            upload = st.file_uploader(
                "Image (png, jpg, webp, gif)",
                type=["png", "jpg", "jpeg", "webp", "gif"],
                key="compare_upload",
            )
            uploads = state.remembered_uploads("compare_upload", [upload] if upload else None)
            names = list(samples)
            sample = st.selectbox(
                "…or a sample image",
                names,
                key=state.kept("compare_sample", names[0] if names else None),
                disabled=bool(uploads),
            )
            c1, c2, c3 = st.columns([1, 2, 2])
            grouped = c1.toggle("Patch group", key=state.kept("compare_grouped", True))
            x0, x1 = c2.slider(
                "Box X range",
                0.0,
                1.0,
                step=0.01,
                key=state.kept("compare_x", (0.5, 1.0)),
                disabled=not grouped,
            )
            y0, y1 = c3.slider(
                "Box Y range",
                0.0,
                1.0,
                step=0.01,
                key=state.kept("compare_y", (0.0, 1.0)),
                disabled=not grouped,
            )
            term = option_widget(CompareOptions, "term", "compare_term", default="")
        box = (x0, y0, x1, y1) if grouped else None
        if uploads:
            label, data = uploads[0]
        elif sample:
            label, data = samples[sample].name, samples[sample].read_bytes()
        else:
            label, data = "", b""
        if data:
            from lexlens.models.images import load_image

            try:
                value = load_image(data, name=label)
                digest = hashlib.sha1(data).hexdigest()
            except LexlensError as exc:
                problem = str(exc)
        else:
            problem = "upload an image or pick a sample"
    g1, g2 = st.columns(2)
    ka = gate_input(g1, "A", f"{prefix}_gate_a", gate_a)
    kb = gate_input(g2, "B", f"{prefix}_gate_b", gate_b)
    needs = COMPARE_NEEDS[kind.lower()]
    if problem:  # checked before any encoder loads
        fail(LexlensError(problem))
        encoder_a = encoder_b = None
    else:
        encoder_a = state.encoder_picker(
            "Encoder A", needs, key=f"{prefix}_encoder_a", default=default_a
        )
        encoder_b = state.encoder_picker(
            "Encoder B", needs, key=f"{prefix}_encoder_b", default=default_b
        )
    if encoder_a is not None and encoder_b is not None and value is not None:
        try:
            options = CompareOptions.of(gate_k=(int(ka), int(kb)), top=int(top), box=box, term=term)
            check_sides(encoder_a, encoder_b, kind.lower(), options.gate_k)
            what = kind.lower()
            enc_a = encode(encoder_a, encoder_key(encoder_a), what, digest, value)
            enc_b = (
                enc_a
                if encoder_b is encoder_a
                else encode(encoder_b, encoder_key(encoder_b), what, digest, value)
            )
            info = {"text": value} if what == "text" else {"image": label}
            remember(
                compare_encodings(
                    encoder_a, enc_a, encoder_b, enc_b, input_info=info, options=options
                )
            )
            if kind == "Image":
                st.session_state["compare_picture"] = (label, data)
        except LexlensError as exc:
            fail(exc)

else:  # stored collections: a job, started by the Compare button (its run is the URL's)
    systems_link()
    result = collection_result(TOP_KEY)
    if result is None:
        st.stop()
    show_header(result)
    show_collection(result)
    show_downloads(result)
    st.stop()

result = st.session_state.get(RESULT)
if result is None:
    st.stop()
# A new input or other encoders make a new run; gates, box and term update this one.
state.keep_for_reload(
    "compare",
    "compare_",
    f"compare A and B on {kind.lower()}",
    {"compare_upload": uploads} if uploads else {},
    subject=(
        "compare_kind",
        "compare_text",
        "compare_sample",
        f"{prefix}_encoder_a",
        f"{prefix}_encoder_b",
    ),
)


show_header(result)
if result.terms is not None:
    show_input_terms(result)
if result.kind == "image" and (result.group is not None or result.heatmap is not None):
    show_image_views(result)
if result.collection is not None:
    show_collection(result)
show_downloads(result)
