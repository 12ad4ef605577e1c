"""The Images page's patch-group and heatmap tabs (drawing only: every number comes from
:mod:`lexlens.analysis.lexical`)."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from lexlens.analysis.core.words import entry_label
from lexlens.analysis.lexical.patches import compare_groups, term_heat, units_to_indices
from lexlens.analysis.lexical.terms import TermsResult, selection_text, terms_of_encoding
from lexlens.analysis.render.patch_render import colorbar, draw_grid, heatmap_overlay
from lexlens.app.runtime.state import kept
from lexlens.app.views.widgets import show_cloud, term_table
from lexlens.models import Encoder, LexicalEncoding, LexlensError

GROUP_NAMES = ("A", "B")
GROUP_DEFAULT_X = ((0.0, 0.5), (0.5, 1.0))
GROUP_COLORS = ("blue", "orange")
IMAGE_WIDTH = 720  # px: the group grid and heatmaps, shown whole without scrolling


@dataclass
class ImageView:
    """One image on the page: its encoding, the picture shown and the page's options."""

    encoder: Encoder
    encoding: LexicalEncoding
    shown: object  # the display copy of the picture
    crop: tuple[float, float, float, float]
    key: str  # widget-key prefix of this image
    name: str
    top: int
    merge: bool
    coverage_rule: str

    def rows(self, result: TermsResult) -> list[dict]:
        """The rows the page shows: merged words, or raw vocabulary tokens."""
        return result.merged_terms if self.merge else result.terms


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


def patch_groups(v: ImageView) -> list[TermsResult | None]:
    """The patch-groups tab: two groups (box or cells), their clouds and tables, and what one
    has that the other lacks; returns each group's result (None where it failed)."""
    st.caption(v.coverage_rule)
    controls = st.columns(2)
    groups: list[TermsResult | None] = []
    for g in range(2):
        selection = select_group(controls[g], v.encoding, v.key, g)
        try:
            groups.append(
                terms_of_encoding(
                    v.encoder, v.encoding, top=v.top, input_info={"image": v.name}, **selection
                )
            )
        except LexlensError as exc:
            controls[g].warning(f"Group {GROUP_NAMES[g]}: {exc}")
            groups.append(None)
    indices = [
        units_to_indices(v.encoding, group.input["cells"]) if group else [] for group in groups
    ]
    st.image(
        draw_grid(v.shown, v.encoding.grid, v.crop, indices),
        caption="Group A in blue, group B in orange (cells in both show both tints)",
        width=IMAGE_WIDTH,
    )
    outs = st.columns(2)
    for g, group in enumerate(groups):
        if group is None or not indices[g]:
            outs[g].info(f"Group {GROUP_NAMES[g]} selects no patch.")
            continue
        outs[g].markdown(
            f"**Group {GROUP_NAMES[g]}** ({GROUP_COLORS[g]}, {selection_text(group)}): "
            f"{' '.join(group.input['cells'])}"
        )
        show_cloud(outs[g], v.rows(group), f"Group {GROUP_NAMES[g]}: max over its patches")
        outs[g].dataframe(term_table(v.rows(group)), hide_index=True, width="stretch")
    if all(indices):
        import pandas as pd  # heavy: pandas loads on first use

        st.markdown("**What one group has and the other lacks** (pooled weight A − B)")
        comparison = compare_groups(
            v.encoding,
            indices[0],
            indices[1],
            v.encoder.vocab,
            k=10,
            words=v.encoder.known_words if v.merge else None,
        )
        cmp_cols = st.columns(2)
        for col, title, items in (
            (cmp_cols[0], "A, not B", comparison.a_not_b),
            (cmp_cols[1], "B, not A", comparison.b_not_a),
        ):
            col.caption(title)
            frame = pd.DataFrame(
                [t.to_dict() | {"token": entry_label(t.to_dict(), "token")} for t in items]
            )
            col.dataframe(
                frame.drop(columns=["index", "piece", "piece_of"], errors="ignore").rename(
                    columns={"token": "word (or piece)" if v.merge else "token"}
                ),
                hide_index=True,
                width="stretch",
            )
    return groups


def heatmap_tab(v: ImageView, rows: list[dict]) -> None:
    """The term-heatmap tab: a term of the image (or any typed word) over the patch grid."""
    options = [r["token"] for r in rows]
    columns_of = {r["token"]: r for r in rows}
    pick_key = f"{v.key}_term"
    if options and st.session_state.get(pick_key) not in options:
        st.session_state[pick_key] = options[0]
    h1, h2 = st.columns(2)
    picked = h1.selectbox("Term (from the image's top terms)", options, key=kept(pick_key))
    typed = h2.text_input(
        "…or type any word",
        key=kept(f"{v.key}_typed", ""),
        help="A word that is not one "
        "vocabulary token is spelled in pieces; its heatmap is the max over them.",
    ).strip()
    try:
        term = typed or (columns_of[picked] if picked else None)
        if term:
            heat = term_heat(v.encoding, v.encoder.vocab, term)
            how = " (max over its pieces)" if len(heat.columns) > 1 else ""
            st.image(
                heatmap_overlay(v.shown, heat.heat, v.crop),
                width=IMAGE_WIDTH,
                caption=f"'{heat.label}' per patch{how}: max {heat.peak:.3f} at "
                f"{heat.peak_cell}, min {heat.low:.3f}",
            )
            st.image(colorbar(), caption=f"0 → {heat.peak:.3f}")
    except LexlensError as exc:
        st.warning(str(exc))
