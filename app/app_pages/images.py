"""Images page: word cloud per image, patch grid, patch groups, term heatmaps, downloads.

Thin: every number comes from ``analysis.patches`` / ``analysis.terms``; pictures from
``analysis.patch_render``. Encodings are cached on the file's content hash, so choosing
another patch group or term re-encodes nothing.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import streamlit as st

from lexlens.analysis.patch_render import colorbar, display_copy, draw_grid, heatmap_overlay
from lexlens.analysis.patches import (
    FULL_BOX,
    IMAGE_NEEDS,
    box_to_patches,
    compare_groups,
    pool_patches,
    term_heatmap,
    token_index,
    units_to_indices,
)
from lexlens.analysis.plots import png_bytes, wordcloud_image
from lexlens.analysis.terms import Term, top_terms
from lexlens.app.state import encoder_picker
from lexlens.models import LexicalEncoding, LexlensError
from lexlens.models.images import load_image

ROOT = Path(__file__).resolve().parent.parent.parent
SAMPLE_DIR = ROOT / "data" / "images"
GROUP_NAMES = ("A", "B")
GROUP_DEFAULT_X = ((0.0, 0.5), (0.5, 1.0))

st.header("Images")
st.caption(
    "Upload images to see the vocabulary terms the encoder gives them, then select patch "
    "groups (a box or cells) to see what each region contributes: the max pooling is "
    "re-applied over the selected patches only (VDR's patch-group pooling)."
)

encoder = encoder_picker("Image encoder", IMAGE_NEEDS, key="image_encoder")
if encoder is None:
    st.stop()
if "image" not in encoder.modalities:
    st.error(f"{encoder.name} does not encode images: pick an image encoder in the sidebar.")
    st.stop()
if encoder.name == "efficientnet-lite0-lexical":
    st.info(
        "Default image encoder: an ImageNet classifier (EfficientNet-Lite0) applied to every "
        "patch, its 1,000 class names projected onto the text encoder's vocabulary. It is a "
        "label-space projection, not a VDR-trained model: it only knows words near ImageNet "
        "class names."
    )


def sample_images() -> dict[str, Path]:
    """Samples: images drawn for Lexlens in data/images, and scikit-image photos if installed."""
    found = {f"{p.stem} (drawn sample)": p for p in sorted(SAMPLE_DIR.glob("*.png"))}
    try:
        import skimage

        photos = Path(skimage.__file__).parent / "data"
        for name in ("chelsea.png", "coffee.png", "astronaut.png"):
            if (photos / name).exists():
                found[f"{Path(name).stem} (scikit-image)"] = photos / name
    except ImportError:
        pass
    return found


SAMPLES = sample_images()
DEFAULT_SAMPLE = next((s for s in SAMPLES if "scikit-image" in s), next(iter(SAMPLES), None))

with st.container(border=True):
    uploads = st.file_uploader(
        "Images (png, jpg, webp, gif; several at once)",
        type=["png", "jpg", "jpeg", "webp", "gif"],
        accept_multiple_files=True,
        key="image_uploads",
    )
    left, right = st.columns([3, 1])
    chosen = left.multiselect(
        "Sample images",
        list(SAMPLES),
        default=[DEFAULT_SAMPLE] if DEFAULT_SAMPLE else [],
        key="image_samples",
    )
    k = right.slider("Top terms", 5, 60, 20, key="image_k")
    merge = right.checkbox(
        "Merge word pieces",
        value=False,
        key="image_merge",
        help="Join pieces (es ##press ##o → espresso) into words the encoder is known to spell.",
        disabled=not encoder.known_words,
    )


@st.cache_data(show_spinner="Encoding image…", max_entries=48)
def encode(_encoder, encoder_key: str, digest: str, _data: bytes, name: str):
    """Load and encode one image; cached on (encoder, content hash)."""
    image = load_image(_data, name=name)
    encoding = _encoder.encode_images([image])[0]
    return encoding, display_copy(image)


@st.cache_data(show_spinner=False, max_entries=256)
def cloud(terms: tuple[tuple[str, float], ...]):
    return wordcloud_image([Term(t, w, i) for i, (t, w) in enumerate(terms)], width=560, height=300)


def terms_of(weights, n: int) -> list[Term]:
    return top_terms(weights, encoder.vocab, k=n, merge_pieces=merge, words=encoder.known_words)


def term_table(terms: list[Term]) -> pd.DataFrame:
    return pd.DataFrame({"term": [t.token for t in terms], "weight": [t.weight for t in terms]})


def show_cloud(where, terms: list[Term], caption: str):
    image = cloud(tuple((t.token, t.weight) for t in terms))
    where.image(image, caption=caption, width="stretch")
    return image


def select_group(where, encoding: LexicalEncoding, key: str, g: int) -> tuple[list[int], str]:
    """Widgets for one patch group → (patch indices, description)."""
    name = GROUP_NAMES[g]
    mode = where.radio(
        f"Group {name} by", ["box", "cells"], horizontal=True, key=f"{key}_mode{name}"
    )
    if mode == "cells":
        labels = where.multiselect(
            f"Cells of group {name} (r = row, c = column)",
            encoding.units,
            default=encoding.units[:1],
            key=f"{key}_cells{name}",
        )
        return units_to_indices(encoding, labels), "cells " + ", ".join(labels)
    x0, x1 = where.slider(
        f"Group {name}: X range (fraction of width)",
        0.0,
        1.0,
        GROUP_DEFAULT_X[g],
        step=0.01,
        key=f"{key}_x{name}",
    )
    y0, y1 = where.slider(
        f"Group {name}: Y range (fraction of height)",
        0.0,
        1.0,
        (0.0, 1.0),
        step=0.01,
        key=f"{key}_y{name}",
    )
    box = (x0, y0, x1, y1)
    return (
        box_to_patches(encoding.grid, box, crop_box=encoding.crop_box),
        "box " + ",".join(f"{v:g}" for v in box),
    )


def show_image(name: str, data: bytes) -> None:
    digest = hashlib.sha1(data).hexdigest()[:16]
    key = f"img_{digest}"
    encoder_key = f"{encoder.name}|{encoder.source}|{encoder.device}"
    st.subheader(name)
    try:
        encoding, picture = encode(encoder, encoder_key, digest, data, name)
    except LexlensError as exc:
        st.error(str(exc))
        return
    for note in encoding.notes:
        st.caption(f"Note: {note}")
    crop = tuple(encoding.crop_box or FULL_BOX)
    if crop != FULL_BOX:
        st.warning(
            "This encoder saw only the outlined square (its published centre crop); the "
            "dimmed margins did not contribute."
        )
    rows, cols = encoding.grid
    whole = terms_of(encoding.weights, k)
    tab_whole, tab_groups, tab_heat = st.tabs(["Whole image", "Patch groups", "Term heatmap"])

    with tab_whole:
        c1, c2 = st.columns(2)
        c1.image(
            draw_grid(picture, encoding.grid, crop),
            caption=f"{rows}×{cols} patch grid",
            width="stretch",
        )
        whole_cloud = show_cloud(c2, whole, "Word cloud of the image: font size ∝ weight")
        st.dataframe(term_table(whole), hide_index=True, width="stretch")

    with tab_groups:
        controls = st.columns(2)
        groups: list[list[int]] = []
        descriptions: list[str] = []
        for g in range(2):
            try:
                indices, text = select_group(controls[g], encoding, key, g)
            except LexlensError as exc:
                controls[g].warning(str(exc))
                indices, text = [], ""
            groups.append(indices)
            descriptions.append(text)
        colors = ["blue", "orange"]
        st.image(
            draw_grid(picture, encoding.grid, crop, groups),
            caption="Group A in blue, group B in orange (cells in both show both tints)",
            width="stretch",
        )
        group_terms: list[list[Term]] = []
        outs = st.columns(2)
        for g, indices in enumerate(groups):
            if not indices:
                outs[g].info(f"Group {GROUP_NAMES[g]} selects no patch.")
                group_terms.append([])
                continue
            terms = terms_of(pool_patches(encoding, indices), k)
            group_terms.append(terms)
            outs[g].markdown(
                f"**Group {GROUP_NAMES[g]}** ({colors[g]}, {len(indices)} patches, "
                f"{descriptions[g]})"
            )
            show_cloud(outs[g], terms, f"Group {GROUP_NAMES[g]}: max over its patches")
            outs[g].dataframe(term_table(terms), hide_index=True, width="stretch")
        if all(groups):
            st.markdown("**What one group has and the other lacks** (pooled weight A − B)")
            comparison = compare_groups(encoding, groups[0], groups[1], encoder.vocab, k=10)
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
        options = [t.token for t in whole]
        h1, h2 = st.columns(2)
        picked = h1.selectbox("Term (from the image's top terms)", options, key=f"{key}_term")
        typed = h2.text_input("…or type any vocabulary token", key=f"{key}_typed").strip()
        token = typed or picked
        if token:
            try:
                index = token_index(encoder.vocab, token)
            except LexlensError as exc:
                st.warning(str(exc))
            else:
                heat = term_heatmap(encoding, index)
                best = divmod(int(heat.argmax()), cols)
                st.image(
                    heatmap_overlay(picture, heat, crop),
                    caption=(
                        f"'{encoder.vocab[index]}' per patch: max {heat.max():.3f} at "
                        f"r{best[0]}c{best[1]}, min {heat.min():.3f}"
                    ),
                    width="stretch",
                )
                st.image(colorbar(), caption=f"0 → {heat.max():.3f}")

    records = [{"scope": "image", "token": t.token, "weight": t.weight} for t in whole]
    for g, terms in enumerate(group_terms):
        records += [
            {
                "scope": f"group {GROUP_NAMES[g]} ({descriptions[g]})",
                "token": t.token,
                "weight": t.weight,
            }
            for t in terms
        ]
    d1, d2, d3 = st.columns(3)
    stem = Path(name).stem or "image"
    d1.download_button(
        "Word cloud (PNG)", png_bytes(whole_cloud), f"{stem}_wordcloud.png", "image/png",
        key=f"{key}_dl_png",
    )  # fmt: skip
    d2.download_button(
        "Terms (CSV)", pd.DataFrame(records).to_csv(index=False), f"{stem}_terms.csv",
        "text/csv", key=f"{key}_dl_csv",
    )  # fmt: skip
    payload = {
        "encoder": encoder.name,
        "image": name,
        "grid": list(encoding.grid),
        "crop_box": list(crop),
        "terms": [{"token": t.token, "weight": t.weight} for t in whole],
        "groups": [
            {
                "group": GROUP_NAMES[g],
                "selection": descriptions[g],
                "patches": [encoding.units[i] for i in groups[g]],
                "terms": [{"token": t.token, "weight": t.weight} for t in group_terms[g]],
            }
            for g in range(2)
        ],
    }
    d3.download_button(
        "Terms (JSON)", json.dumps(payload, indent=2), f"{stem}_terms.json",
        "application/json", key=f"{key}_dl_json",
    )  # fmt: skip


inputs: list[tuple[str, bytes]] = [(f.name, f.getvalue()) for f in uploads or []]
for label in chosen:
    try:
        inputs.append((label, SAMPLES[label].read_bytes()))
    except OSError as exc:
        st.error(f"{label}: cannot read the sample ({exc.strerror or exc})")

if not inputs:
    st.info("Upload an image or pick a sample above.")
    st.stop()

seen: set[str] = set()
for name, data in inputs:
    digest = hashlib.sha1(data).hexdigest()
    if digest in seen:
        st.caption(f"{name}: same content as an image above, skipped.")
        continue
    seen.add(digest)
    with st.container(border=True):
        show_image(name, data)
