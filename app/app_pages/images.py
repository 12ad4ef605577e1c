"""Images page: word cloud per image, patch grid, patch groups, term heatmaps, downloads.

Thin: every number is a :class:`~lexlens.analysis.lexical.terms.TermsResult` from the use-case
layer (the whole image, or the patch group a box or cells select: the same document
``lexlens terms --image P [--box …] --json`` prints); pictures come from
``analysis.render.patch_render`` and ``analysis.render.plots``. Encodings are cached on the file's
content hash, so choosing another patch group or term re-encodes nothing.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import streamlit as st

from lexlens.analysis.core.outputs import json_text, records_csv_bytes
from lexlens.analysis.lexical.patches import (
    FULL_BOX,
    IMAGE_NEEDS,
    MIN_CELL_COVERAGE,
)
from lexlens.analysis.lexical.terms import (
    TermsResult,
    encode_image,
    selection_text,
    term_records,
    terms_of_encoding,
)
from lexlens.analysis.render.patch_render import (
    display_copy,
    draw_grid,
)
from lexlens.analysis.render.plots import png_bytes
from lexlens.app.runtime import state
from lexlens.app.views.faithfulness import show_occlusion_check
from lexlens.app.views.image import GROUP_NAMES, ImageView, heatmap_tab, patch_groups
from lexlens.app.views.samples import DEFAULT_SAMPLE, sample_images
from lexlens.app.views.widgets import show_cloud, term_table, terms_display
from lexlens.models import LexicalEncoding, LexlensError, encoder_card
from lexlens.models.images import load_image

COVERAGE_RULE = (
    f"A cell belongs to a box when at least {MIN_CELL_COVERAGE:.0%} of the cell's area lies "
    "inside the box (a box too small for that selects the cell it overlaps most)."
)

st.header("Images")
st.caption(
    "Upload images to see the vocabulary terms the encoder gives them, then select patch "
    "groups (a box or cells) to see what each region contributes: the max pooling is "
    "re-applied over the selected patches only (VDR's patch-group pooling)."
)


SAMPLES = sample_images()
DEFAULT = DEFAULT_SAMPLE if DEFAULT_SAMPLE in SAMPLES else next(iter(SAMPLES), None)

state.restore_inputs("images")  # a reload, a bookmark or a link: the inputs in the URL's run
state.kept("image_encoder")  # the sidebar choice survives a run that stops before the picker
with st.container(border=True):
    uploads = st.file_uploader(
        "Images (png, jpg, webp, gif; several at once)",
        type=["png", "jpg", "jpeg", "webp", "gif"],
        accept_multiple_files=True,
        key="image_uploads",
    )
    uploaded = state.remembered_uploads("image_uploads", uploads)
    left, right = st.columns([3, 1])
    if any(s not in SAMPLES for s in st.session_state.get("image_samples", [])):
        st.session_state["image_samples"] = [
            s for s in st.session_state["image_samples"] if s in SAMPLES
        ]
    chosen = left.multiselect(
        "Sample images",
        list(SAMPLES),
        key=state.kept("image_samples", [DEFAULT] if DEFAULT else []),
    )
    k, merge = terms_display("image", right, right, high=60)


@st.cache_data(show_spinner="Encoding image…", max_entries=48)
def encode(_encoder, encoder_key: str, digest: str, _image) -> LexicalEncoding:
    """Encode one image; cached on (encoder, content hash)."""
    return encode_image(_encoder, _image)


def rows_of(result: TermsResult) -> list[dict]:
    return result.merged_terms if merge else result.terms


def show_image(label: str, name: str, data: bytes, picture) -> None:

    digest = hashlib.sha1(data).hexdigest()[:16]
    key = f"img_{digest}"
    st.subheader(label)
    try:
        encoding = encode(
            encoder, f"{encoder.name}|{encoder.source}|{encoder.device}", digest, picture
        )
        whole = terms_of_encoding(encoder, encoding, top=k, input_info={"image": name})
    except LexlensError as exc:
        st.error(f"{name}: {exc}")
        return
    for note in encoding.notes:
        st.caption(f"Note: {note}")
    crop = tuple(encoding.crop_box or FULL_BOX)
    if crop != FULL_BOX:
        st.warning(
            "This encoder saw only the outlined square (its published centre crop); the "
            "dimmed margins did not contribute."
        )
    shown = display_copy(picture)
    rows, cols = encoding.grid
    view = ImageView(encoder, encoding, shown, crop, key, name, k, merge, COVERAGE_RULE)
    tab_whole, tab_groups, tab_heat = st.tabs(["Whole image", "Patch groups", "Term heatmap"])

    with tab_whole:
        c1, c2 = st.columns(2)
        c1.image(
            draw_grid(shown, encoding.grid, crop),
            caption=f"{rows}×{cols} patch grid",
            width="stretch",
        )
        whole_cloud = show_cloud(c2, rows_of(whole), "Word cloud of the image")
        st.dataframe(term_table(rows_of(whole)), hide_index=True, width="stretch")

    with tab_groups:
        groups = patch_groups(view)
        show_occlusion_check(view, picture, groups)
    with tab_heat:
        heatmap_tab(view, rows_of(whole))

    records = term_records(
        [("image", whole)]
        + [(f"group {GROUP_NAMES[g]} ({selection_text(r)})", r) for g, r in enumerate(groups) if r],
        merged=merge,
    )
    stem = Path(name).stem or "image"
    d = st.columns(5)
    d[0].download_button(
        "Word cloud (PNG)",
        png_bytes(whole_cloud),
        f"{stem}_wordcloud.png",
        "image/png",
        key=f"{key}_dl_png",
    )
    d[1].download_button(
        "Terms (CSV)",
        records_csv_bytes(records),
        f"{stem}_terms.csv",
        "text/csv",
        key=f"{key}_dl_csv",
    )
    d[2].download_button(
        "Terms (JSON)",
        json_text(whole),
        f"{stem}_terms.json",
        "application/json",
        key=f"{key}_dl_json",
    )
    for g, group in enumerate(groups):
        if group is not None:
            d[3 + g].download_button(
                f"Group {GROUP_NAMES[g]} (JSON)",
                json_text(group),
                f"{stem}_group{GROUP_NAMES[g]}.json",
                "application/json",
                key=f"{key}_dl_json{GROUP_NAMES[g]}",
            )


# Read and check every input before any model is loaded; errors name the user's file.
inputs: list[tuple[str, str, bytes]] = [(name, name, data) for name, data in uploaded]
for label in chosen:
    try:
        inputs.append((label, SAMPLES[label].name, SAMPLES[label].read_bytes()))
    except OSError as exc:
        st.error(f"{label}: cannot read the sample ({exc.strerror or exc})")

# An image given twice is shown once: a sample equal to an upload (the upload is the one
# shown) goes silently; two identical uploads say so.
images = []
shown: dict[str, str] = {}  # content hash -> the name it is shown under
for n, (label, name, data) in enumerate(inputs):
    digest = hashlib.sha1(data).hexdigest()
    if digest in shown:
        if n < len(uploaded):
            st.caption(f"{name}: the same image as {shown[digest]}, shown once.")
        continue
    shown[digest] = name
    try:
        images.append((label, name, data, load_image(data, name=name)))
    except LexlensError as exc:
        st.error(str(exc))

if not images:
    if not inputs:
        st.info("Upload an image or pick a sample above.")
    st.stop()

encoder = state.encoder_picker("Image encoder", IMAGE_NEEDS, key="image_encoder")
if encoder is None:
    st.stop()
card = encoder_card(encoder.name)
if card is not None:
    st.caption(f"**{card.name}**: {card.summary}.")

# New images or another encoder make a new run; the display settings update this one.
state.keep_for_reload(
    "images",
    "image_",
    "terms of " + ", ".join(n for _, n, _, _ in images),
    {"image_uploads": uploaded},
    subject=("image_encoder", "image_samples"),
)
for label, name, data, picture in images:
    with st.container(border=True):
        show_image(label, name, data, picture)
