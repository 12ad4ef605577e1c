"""The Compare page's drawing of a :class:`~lexlens.analysis.compare.result.CompareResult`
(every number is the result's; nothing is computed here)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from lexlens.analysis.compare.result import CompareResult, TermComparison
from lexlens.analysis.compare.vocabularies import vocabulary_note
from lexlens.analysis.deviation.flops import FLOPS_LABEL, PAIRS_LABEL
from lexlens.analysis.lexical.patches import cell_indices
from lexlens.analysis.render.patch_render import display_copy, draw_grid, heatmap_overlay
from lexlens.app.runtime.state import kept
from lexlens.models import LexlensError
from lexlens.models.images import load_image


def side_title(result: CompareResult, s: str) -> str:
    d = result.a if s == "a" else result.b
    where = f" on {d['index']}" if "index" in d else ""
    origin = f" (from {d['source']})" if "source" in d else ""
    return f"{s.upper()}: {d['encoder']}{origin}{where}, gate k {d['gate_k']}"


def show_terms(c: TermComparison, key: str) -> None:
    """Counts, ρ and the three tables of one term comparison, on the view the toggle picks
    (words or raw tokens): every count shown is the count of the rows shown."""
    n = c.counts
    rc = c.rank_correlation
    raw = st.toggle(
        "Raw vocabulary tokens (with ranks)",
        key=kept(f"compare_raw_{key}", False),
        help="Off: word pieces joined into words (gi ##raf ##fe → giraffe), as the Terms views "
        "show them. ρ is computed on the raw tokens.",
    )
    view = {"shared": c.shared, "only_a": c.only_a, "only_b": c.only_b} if raw else c.merged
    counts = n if raw else c.merged["counts"]
    unit = "tokens" if raw else "words"
    m = st.columns(5)
    m[0].metric(f"Active in A ({unit})", counts["active_a"])
    m[1].metric(f"Active in B ({unit})", counts["active_b"])
    m[2].metric(f"Shared ({unit})", counts["shared"])
    m[3].metric(
        f"Only in A / only in B ({unit})",
        f"{counts['only_a']} / {counts['only_b']}",
        help=f"{n['only_a_no_counterpart']} of A's and {n['only_b_no_counterpart']} of B's raw "
        "tokens have no counterpart in the other's vocabulary",
    )
    m[4].metric(
        "Spearman's ρ (shared tokens)",
        "n/a" if rc["rho"] is None else f"{rc['rho']:.3f}",
        help=f"Computed over {rc['over']}.",
    )
    if n["only_a_no_counterpart"] or n["only_b_no_counterpart"]:
        st.caption(
            f"{n['only_a_no_counterpart']} of the tokens only in A and "
            f"{n['only_b_no_counterpart']} of those only in B cannot exist on the other side "
            "(their token is not in its vocabulary)."
        )
    if rc.get("note"):
        st.caption(f"ρ: {rc['note']}")
    cols = st.columns(3)
    for col, status, title, fields in (
        (
            cols[0],
            "shared",
            "Shared",
            ["token", "weight_a", "weight_b", "difference", "rank_a", "rank_b"],
        ),
        (cols[1], "only_a", "Only in A", ["token", "weight_a", "rank_a", "ungated_weight_b"]),
        (cols[2], "only_b", "Only in B", ["token", "weight_b", "rank_b", "ungated_weight_a"]),
    ):
        col.markdown(f"**{title}** ({counts[status]})")
        rows = view[status]
        if rows:
            frame = pd.DataFrame(rows)
            col.dataframe(
                frame[[f for f in fields if f in frame.columns]], hide_index=True, width="stretch"
            )
        else:
            col.caption("none")


def show_header(result: CompareResult) -> None:
    """The two sides, the vocabulary note and the notes."""
    st.divider()
    st.markdown(f"**{side_title(result, 'a')}**  \n**{side_title(result, 'b')}**")
    if note := vocabulary_note(result.vocabulary):
        st.info(note)
    for n in result.notes:
        if n != vocabulary_note(result.vocabulary):
            st.caption(f"Note: {n}")


def show_input_terms(result: CompareResult) -> None:
    """The terms of the whole text or image."""
    if result.terms is not None:
        st.subheader(f"Terms of the {result.kind}")
        show_terms(result.terms, "input")


def show_image_views(result: CompareResult) -> None:
    """The patch group pooled on each side's grid and one term's heatmap on both."""

    picture = None
    stored = st.session_state.get("compare_picture")
    if stored is not None and stored[0] == result.input.get("image"):
        try:
            picture = display_copy(load_image(stored[1], name=result.input.get("image", "")))
        except LexlensError:
            picture = None
    if result.group is not None:
        st.subheader("Patch group")
        g = result.group
        if picture is not None:
            cols = st.columns(2)
            for col, s in zip(cols, ("a", "b"), strict=True):
                d = result.a if s == "a" else result.b
                units = g[f"cells_{s}"]
                grid = tuple(d["grid"])
                index = cell_indices(grid, units)
                col.image(
                    draw_grid(picture, grid, tuple(d["crop_box"]), [index]),
                    caption=f"{s.upper()}: {len(units)} of {grid[0]}×{grid[1]} cells under the box",
                    width="stretch",
                )
        show_terms(g["terms"], "group")
    if result.heatmap is not None:
        h = result.heatmap
        st.subheader(f"Heatmap of '{h['word']}' in both")
        cols = st.columns(2)
        for col, s in zip(cols, ("a", "b"), strict=True):
            side = h[s]
            if side is None:
                col.caption(f"{s.upper()}: the term cannot be spelled in this vocabulary.")
                continue
            caption = (
                f"{s.upper()}: '{side['term']}' per patch ({side['grid'][0]}×{side['grid'][1]}): "
                f"max {side['max']:.3f} at {side['argmax']}, min {side['min']:.3f}"
            )
            if picture is not None:
                heat = np.asarray(side["values"], dtype=np.float32)
                col.image(
                    heatmap_overlay(picture, heat, tuple(side["crop_box"])),
                    caption=caption,
                    width="stretch",
                )
            else:
                col.caption(caption)


def show_collection(result: CompareResult) -> None:
    """Deviation, FLOPs, vocabulary statistics and a query's hits, side by side."""
    col = result.collection
    st.subheader(f"Semantic deviation and FLOPs (k = {col['k']})")
    rows = []
    dev = col["deviation"]
    for kind_name, pa in dev["a"]["sets"].items():
        pb = dev["b"]["sets"].get(kind_name) or {}
        for key, label in (
            ("exact_at_k", f"Exact@{col['k']}"),
            ("semantic_at_k", f"Semantic@{col['k']}"),
            ("flops_with_self_pairs", FLOPS_LABEL),
            ("flops", PAIRS_LABEL),
            ("mean_active_dims", "mean active dims"),
        ):
            rows.append({"set": kind_name, "measure": label, "A": pa.get(key), "B": pb.get(key)})
    if dev["a"]["flops_captions_images"] is not None:
        rows.append(
            {
                "set": "captions × images",
                "measure": "FLOPs (D2S)",
                "A": dev["a"]["flops_captions_images"],
                "B": dev["b"]["flops_captions_images"],
            }
        )
    st.dataframe(pd.DataFrame(rows), hide_index=True)
    st.subheader("Vocabulary statistics")
    st.dataframe(pd.DataFrame(col["vocabulary"]["top_terms"]), hide_index=True, width="stretch")
    for s in ("a", "b"):
        v = col["vocabulary"][s]
        if v is not None:
            lazy = ", ".join(v["lazy_terms"][:30]) or "none"
            st.caption(
                f"{s.upper()}: {v['active_terms']:,} terms active at least once, "
                f"{v['mean_active_per_item']:.1f} per item; lazy terms (active in ≥ "
                f"{v['lazy_rate']:.0%} of items): {lazy}"
            )
    search = col["search"]
    if search is not None:
        st.subheader(f"Search: '{search['query']}'")
        judged = bool(search["metrics"]) and search["metrics"].get("judged") == "kept"
        if search["metrics"]:
            mt = search["metrics"]
            st.caption(
                f"{mt['relevant']} item{'' if mt['relevant'] == 1 else 's'} judged relevant to "
                "this kept query (the collection's judgements): ✓ marks them, with their grade."
                if judged
                else f"{mt['relevant']} items carry the label '{search['query']}'."
            )
            st.dataframe(
                pd.DataFrame([{"side": s.upper(), **mt[s]} for s in ("a", "b")]),
                hide_index=True,
            )
        cols = st.columns(2)
        for c, s in zip(cols, ("a", "b"), strict=True):
            c.markdown(f"**Top {search['top']} in {s.upper()}**")
            frame = _marked(pd.DataFrame(search[f"hits_{s}"]))
            empty = [n for n in ("text", "image") if n in frame and not frame[n].astype(bool).any()]
            c.dataframe(frame.drop(columns=empty), hide_index=True, width="stretch")
        st.markdown("**Which hits moved, and the terms that moved them** (contribution B − A)")
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        **({"relevant": _mark(h["relevance"])} if "relevance" in h else {}),
                        "id": h["id"],
                        "status": h["status"],
                        "rank A": h["rank_a"],
                        "rank B": h["rank_b"],
                        "score A": h["score_a"],
                        "score B": h["score_b"],
                        "changed words": ", ".join(
                            f"{t['word']} {t['change']:+.3f}" for t in h["changed_words"]
                        ),
                    }
                    for h in search["hits"]
                ]
            ),
            hide_index=True,
            width="stretch",
        )
        st.caption(
            f"Ranks beyond {search['rank_depth']} are empty. Each side's contributions "
            "q_t · d_t sum to its score; the JSON holds all of them."
        )


def _mark(relevance: int) -> str:
    """A judged-relevant hit's mark: ✓ and its grade; blank otherwise."""
    return f"✓ {relevance}" if relevance > 0 else ""


def _marked(frame: pd.DataFrame) -> pd.DataFrame:
    """Hits with a kept query's judgements: a first column marking the relevant ones."""
    if "relevance" not in frame:
        return frame
    marks = frame.pop("relevance").map(_mark)
    frame.insert(0, "relevant", marks)
    return frame


def show_downloads(result: CompareResult) -> None:
    """The report's files as downloads (the same files `lexlens compare --out` writes)."""
    files = result.files()
    st.divider()
    st.caption(
        "Download the comparison: a self-contained HTML report, the JSON document "
        "(`lexlens compare … --json` prints the same) and its tables as CSV."
    )
    d = st.columns(len(files))
    KINDS_OF_FILE = {
        "html": ("Report", "text/html"),
        "json": ("JSON", "application/json"),
        "csv": ("CSV", "text/csv"),
    }
    for col_, (name, data) in zip(d, files.items(), strict=True):
        what, mime = KINDS_OF_FILE[name.rsplit(".", 1)[-1]]
        col_.download_button(f"{what}: {name}", data, name, mime, key=f"compare_dl_{name}")
