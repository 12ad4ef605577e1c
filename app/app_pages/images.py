"""Images page: word cloud per image, patch grid, patch groups, term heatmaps, downloads.

Thin: every number is a :class:`~lexlens.analysis.lexical.terms.TermsResult` from the use-case
layer (the whole image, or the patch group a box or cells select: the same document
``lexlens terms --image P [--box …] --json`` prints); pictures come from
``analysis.patch_render`` and ``analysis.plots``. Encodings are cached on the file's
content hash, so choosing another patch group or term re-encodes nothing.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import streamlit as st

from lexlens.analysis.core.outputs import json_text, records_csv_bytes
from lexlens.analysis.core.words import Term
from lexlens.analysis.lexical.patches import (
    FULL_BOX,
    IMAGE_NEEDS,
    MIN_CELL_COVERAGE,
    compare_groups,
    term_columns,
    term_heatmap,
    units_to_indices,
)
from lexlens.analysis.lexical.terms import TermsResult, encode_image, terms_of_encoding
from lexlens.app.samples import DEFAULT_SAMPLE, sample_images
from lexlens.app.state import encoder_picker, kept, remembered_uploads
from lexlens.models import LexicalEncoding, LexlensError, encoder_card
from lexlens.models.images import load_image

GROUP_NAMES = ("A", "B")
GROUP_DEFAULT_X = ((0.0, 0.5), (0.5, 1.0))
GROUP_COLORS = ("blue", "orange")
IMAGE_WIDTH = 720  # px: the group grid and heatmaps, shown whole without scrolling
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

kept("image_encoder")  # the sidebar choice survives a run that stops before the picker
with st.container(border=True):
    uploads = st.file_uploader(
        "Images (png, jpg, webp, gif; several at once)",
        type=["png", "jpg", "jpeg", "webp", "gif"],
        accept_multiple_files=True,
        key="image_uploads",
    )
    uploaded = remembered_uploads("image_uploads", uploads)
    left, right = st.columns([3, 1])
    if any(s not in SAMPLES for s in st.session_state.get("image_samples", [])):
        st.session_state["image_samples"] = [
            s for s in st.session_state["image_samples"] if s in SAMPLES
        ]
    chosen = left.multiselect(
        "Sample images",
        list(SAMPLES),
        key=kept("image_samples", [DEFAULT] if DEFAULT else []),
    )
    k = right.slider("Top terms", 5, 60, key=kept("image_k", 20))
    merge = right.toggle(
        "Merge word pieces",
        key=kept("image_merge", True),
        help="es ##press ##o → espresso, for words the encoder is known to spell. Off: the "
        "raw vocabulary tokens. The JSON downloads always hold both views.",
    )


@st.cache_data(show_spinner="Encoding image…", max_entries=48)
def encode(_encoder, encoder_key: str, digest: str, _image) -> LexicalEncoding:
    """Encode one image; cached on (encoder, content hash)."""
    return encode_image(_encoder, _image)


@st.cache_data(show_spinner=False, max_entries=256)
def cloud(terms: tuple[tuple[str, float], ...]):
    """The cloud picture (1600×900) and its caption, cached on the terms shown."""
    from lexlens.analysis.render.plots import cloud_caption, cloud_layout, render_cloud

    layout = cloud_layout([Term(t, w, i) for i, (t, w) in enumerate(terms)])
    return render_cloud(layout), cloud_caption(layout, "Word cloud")


def rows_of(result: TermsResult) -> list[dict]:
    return result.merged_terms if merge else result.terms


def term_table(rows: list[dict]):
    import pandas as pd

    table = pd.DataFrame(
        {"term": [r["token"] for r in rows], "weight": [r["weight"] for r in rows]}
    )
    if any("pieces" in r for r in rows):
        table["pieces"] = [" ".join(r.get("pieces", [])) for r in rows]
    return table


def show_cloud(where, rows: list[dict], caption: str):
    picture, how = cloud(tuple((r["token"], r["weight"]) for r in rows))
    where.image(picture, caption=f"{caption} — {how[len('Word cloud: ') :]}", width="stretch")
    return picture


def select_group(where, encoding: LexicalEncoding, key: str, g: int) -> dict:
    """Widgets for one patch group → ``{"box": …}`` or ``{"cells": …}`` for terms_of_encoding."""
    name = GROUP_NAMES[g]
    mode = where.radio(
        f"Group {name} by", ["box", "cells"], horizontal=True, key=kept(f"{key}_mode{name}", "box")
    )
    if mode == "cells":
        cells_key = kept(f"{key}_cells{name}", encoding.units[:1])
        labels = where.multiselect(
            f"Cells of group {name} (r = row, c = column)", encoding.units, key=cells_key
        )
        return {"cells": list(labels)}
    x0, x1 = where.slider(
        f"Group {name}: X range (fraction of width)",
        0.0,
        1.0,
        step=0.01,
        key=kept(f"{key}_x{name}", GROUP_DEFAULT_X[g]),
    )
    y0, y1 = where.slider(
        f"Group {name}: Y range (fraction of height)",
        0.0,
        1.0,
        step=0.01,
        key=kept(f"{key}_y{name}", (0.0, 1.0)),
    )
    return {"box": (x0, y0, x1, y1)}


def describe(result: TermsResult) -> str:
    if "box" in result.input:
        box = ",".join(f"{v:g}" for v in result.input["box"])
        return f"box {box} → {len(result.input['cells'])} cells"
    return f"cells {', '.join(result.input['cells'])}"


def show_image(label: str, name: str, data: bytes, picture) -> None:
    from lexlens.analysis.render.patch_render import (
        colorbar,
        display_copy,
        draw_grid,
        heatmap_overlay,
    )
    from lexlens.analysis.render.plots import png_bytes

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
        st.caption(COVERAGE_RULE)
        controls = st.columns(2)
        groups: list[TermsResult | None] = []
        for g in range(2):
            selection = select_group(controls[g], encoding, key, g)
            try:
                groups.append(
                    terms_of_encoding(
                        encoder, encoding, top=k, input_info={"image": name}, **selection
                    )
                )
            except LexlensError as exc:
                controls[g].warning(f"Group {GROUP_NAMES[g]}: {exc}")
                groups.append(None)
        indices = [
            units_to_indices(encoding, group.input["cells"]) if group else [] for group in groups
        ]
        st.image(
            draw_grid(shown, encoding.grid, crop, indices),
            caption="Group A in blue, group B in orange (cells in both show both tints)",
            width=IMAGE_WIDTH,
        )
        outs = st.columns(2)
        for g, group in enumerate(groups):
            if group is None or not indices[g]:
                outs[g].info(f"Group {GROUP_NAMES[g]} selects no patch.")
                continue
            outs[g].markdown(
                f"**Group {GROUP_NAMES[g]}** ({GROUP_COLORS[g]}, {describe(group)}): "
                f"{' '.join(group.input['cells'])}"
            )
            show_cloud(outs[g], rows_of(group), f"Group {GROUP_NAMES[g]}: max over its patches")
            outs[g].dataframe(term_table(rows_of(group)), hide_index=True, width="stretch")
        if all(indices):
            import pandas as pd

            st.markdown("**What one group has and the other lacks** (pooled weight A − B)")
            comparison = compare_groups(
                encoding,
                indices[0],
                indices[1],
                encoder.vocab,
                k=10,
                words=encoder.known_words if merge else None,
            )
            cmp_cols = st.columns(2)
            for col, title, items in (
                (cmp_cols[0], "A, not B", comparison.a_not_b),
                (cmp_cols[1], "B, not A", comparison.b_not_a),
            ):
                col.caption(title)
                col.dataframe(
                    pd.DataFrame([t.to_dict() for t in items]).drop(
                        columns="index", errors="ignore"
                    ),
                    hide_index=True,
                    width="stretch",
                )

    with tab_heat:
        options = [r["token"] for r in rows_of(whole)]
        columns_of = {r["token"]: r for r in rows_of(whole)}
        pick_key = f"{key}_term"
        if options and st.session_state.get(pick_key) not in options:
            st.session_state[pick_key] = options[0]
        h1, h2 = st.columns(2)
        picked = h1.selectbox("Term (from the image's top terms)", options, key=kept(pick_key))
        typed = h2.text_input(
            "…or type any word",
            key=kept(f"{key}_typed", ""),
            help="A word that is not one "
            "vocabulary token is spelled in pieces; its heatmap is the max over them.",
        ).strip()
        try:
            if typed:
                what, columns = term_columns(encoder.vocab, typed)
            elif picked:
                row = columns_of[picked]
                pieces = row.get("pieces")
                what = f"{picked} ({' '.join(pieces)})" if pieces else picked
                index = {t: i for i, t in enumerate(encoder.vocab)}
                columns = [index[p] for p in pieces] if pieces else [row["index"]]
            else:
                what, columns = "", []
            if columns:
                heat = term_heatmap(encoding, columns)
                best = divmod(int(heat.argmax()), cols)
                how = " (max over its pieces)" if len(columns) > 1 else ""
                st.image(
                    heatmap_overlay(shown, heat, crop),
                    width=IMAGE_WIDTH,
                    caption=(
                        f"'{what}' per patch{how}: max {heat.max():.3f} at "
                        f"r{best[0]}c{best[1]}, min {heat.min():.3f}"
                    ),
                )
                st.image(colorbar(), caption=f"0 → {heat.max():.3f}")
        except LexlensError as exc:
            st.warning(str(exc))

    view = "merged" if merge else "raw"
    records = [
        {"scope": "image", "view": view, "token": r["token"], "weight": r["weight"]}
        for r in rows_of(whole)
    ]
    for g, group in enumerate(groups):
        if group is not None:
            scope = f"group {GROUP_NAMES[g]} ({describe(group)})"
            records += [
                {"scope": scope, "view": view, "token": r["token"], "weight": r["weight"]}
                for r in rows_of(group)
            ]
    stem = Path(name).stem or "image"
    d = st.columns(5)
    d[0].download_button(
        "Word cloud (PNG)", png_bytes(whole_cloud), f"{stem}_wordcloud.png", "image/png",
        key=f"{key}_dl_png",
    )  # fmt: skip
    d[1].download_button(
        "Terms (CSV)", records_csv_bytes(records), f"{stem}_terms.csv", "text/csv",
        key=f"{key}_dl_csv",
    )  # fmt: skip
    d[2].download_button(
        "Terms (JSON)", json_text(whole), f"{stem}_terms.json", "application/json",
        key=f"{key}_dl_json",
    )  # fmt: skip
    for g, group in enumerate(groups):
        if group is not None:
            d[3 + g].download_button(
                f"Group {GROUP_NAMES[g]} (JSON)", json_text(group),
                f"{stem}_group{GROUP_NAMES[g]}.json", "application/json",
                key=f"{key}_dl_json{GROUP_NAMES[g]}",
            )  # fmt: skip


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

encoder = encoder_picker("Image encoder", IMAGE_NEEDS, key="image_encoder")
if encoder is None:
    st.stop()
card = encoder_card(encoder.name)
if card is not None:
    st.caption(f"**{card.name}**: {card.summary}.")

for label, name, data, picture in images:
    with st.container(border=True):
        show_image(label, name, data, picture)
