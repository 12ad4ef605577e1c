"""Compare page: two encoders — or one encoder at two gate k — side by side on a text, an
image or a stored collection.

Thin: every number is a :class:`~lexlens.analysis.compare.compare.CompareResult` from
``lexlens.analysis.compare.compare`` (the document ``lexlens compare … --json`` prints for the same
inputs); the page parses inputs, caches encodings and draws.
"""

from __future__ import annotations

import hashlib

import pandas as pd
import streamlit as st

from lexlens.analysis.compare.compare import (
    COMPARE_NEEDS,
    DEFAULT_HITS,
    CompareResult,
    TermComparison,
    check_sides,
    compare_encodings,
    gate_pair,
    vocabulary_note,
)
from lexlens.analysis.compare.compare_collections import compare_indexes
from lexlens.analysis.deviation.deviation import DEFAULT_K
from lexlens.analysis.lexical.terms import encode_image, encode_text
from lexlens.app.samples import sample_images
from lexlens.app.state import encoder_picker, kept, remembered_uploads
from lexlens.models import LexicalEncoding, LexlensError

KINDS = ["Text", "Image", "Stored collection"]
SAME = "(the same collection as A)"
DEFAULT_TEXT = "a dog running on the beach at sunset"
#: Page defaults per kind: (encoder A, encoder B, gate k A, gate k B) — the same encoder at
#: two gate k unless another one is picked.
DEFAULTS = {
    "Text": ("splade-tiny", "splade-tiny", 768, 8),
    "Image": ("efficientnet-lite0-lexical", "efficientnet-lite0-lexical", 768, 64),
}

st.header("Compare")
st.caption(
    "Two encoders, or one encoder at two gate k, side by side. On a text or an image: the "
    "terms both give it, the terms only one gives, with both weights, and Spearman's ρ of the "
    "shared terms' weights; on an image also a patch group and one term's heatmap on both "
    "grids. On stored collections: semantic deviation, FLOPs and vocabulary statistics side "
    "by side, and a query's hits — which moved and which terms moved them. Every weight is "
    "the gated E = V ⊙ G at each side's gate k; encoders with different vocabularies are "
    "compared on the tokens they share."
)


@st.cache_data(show_spinner="Encoding…", max_entries=64)
def encode(_encoder, encoder_key: str, kind: str, digest: str, _value) -> LexicalEncoding:
    """One input through one encoder, cached on (encoder, content)."""
    if kind == "text":
        return encode_text(_encoder, _value)
    return encode_image(_encoder, _value)


def encoder_key(encoder) -> str:
    return f"{encoder.name}|{encoder.source}|{encoder.device}"


def seed_picker(key: str, spec: str) -> None:
    """Start a picker on a collection's own encoder, also when it is a local directory (the
    picker's "local checkpoint directory" entry with the path typed in)."""
    from lexlens.app.state import CUSTOM
    from lexlens.models import available_encoders

    if key in st.session_state or spec in {c.name for c in available_encoders()}:
        return
    st.session_state[key] = CUSTOM
    st.session_state[f"{key}_dir"] = spec


kind = st.radio("Compare on", KINDS, horizontal=True, key=kept("compare_kind", KINDS[0]))
RESULT = f"compare_result_{kind.split()[0].lower()}"  # the last result of each kind is kept
top_default = 20 if kind != KINDS[2] else DEFAULT_HITS
top = st.slider("Rows per table", 3, 60, key=kept(f"compare_top_{kind[:5]}", top_default))


def remember(new: CompareResult) -> None:
    st.session_state[RESULT] = new


def fail(exc: LexlensError) -> None:
    st.error(str(exc))
    if st.session_state.get(RESULT) is not None:
        st.caption("Showing the previous result below.")


# ----------------------------------------------------------------------------- text, image
if kind in ("Text", "Image"):
    prefix = f"compare_{kind.lower()}"
    default_a, default_b, gate_a, gate_b = DEFAULTS[kind]
    value, label, digest, problem = None, "", "", None
    box, term = None, None
    if kind == "Text":
        text = st.text_area("Text", height=90, key=kept("compare_text", DEFAULT_TEXT))
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
            uploads = remembered_uploads("compare_upload", [upload] if upload else None)
            names = list(samples)
            sample = st.selectbox(
                "…or a sample image",
                names,
                key=kept("compare_sample", names[0] if names else None),
                disabled=bool(uploads),
            )
            c1, c2, c3 = st.columns([1, 2, 2])
            grouped = c1.toggle("Patch group", key=kept("compare_grouped", True))
            x0, x1 = c2.slider(
                "Box X range", 0.0, 1.0, step=0.01, key=kept("compare_x", (0.5, 1.0)),
                disabled=not grouped,
            )  # fmt: skip
            y0, y1 = c3.slider(
                "Box Y range", 0.0, 1.0, step=0.01, key=kept("compare_y", (0.0, 1.0)),
                disabled=not grouped,
            )  # fmt: skip
            term = (
                st.text_input(
                    "Heatmap term (empty: the heaviest term both share)",
                    key=kept("compare_term", ""),
                ).strip()
                or None
            )
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
    ka = g1.number_input("Gate k of A", min_value=-1, step=8, key=kept(f"{prefix}_gate_a", gate_a))
    kb = g2.number_input("Gate k of B", min_value=-1, step=8, key=kept(f"{prefix}_gate_b", gate_b))
    needs = COMPARE_NEEDS[kind.lower()]
    if problem:  # checked before any encoder loads
        fail(LexlensError(problem))
        encoder_a = encoder_b = None
    else:
        encoder_a = encoder_picker("Encoder A", needs, key=f"{prefix}_encoder_a", default=default_a)
        encoder_b = encoder_picker("Encoder B", needs, key=f"{prefix}_encoder_b", default=default_b)
    if encoder_a is not None and encoder_b is not None and value is not None:
        try:
            gates = gate_pair([int(ka), int(kb)], (768, 768))
            check_sides(encoder_a, encoder_b, kind.lower(), gates)
            what = kind.lower()
            enc_a = encode(encoder_a, encoder_key(encoder_a), what, digest, value)
            enc_b = (
                enc_a
                if encoder_b is encoder_a
                else encode(encoder_b, encoder_key(encoder_b), what, digest, value)
            )
            remember(
                compare_encodings(
                    encoder_a,
                    enc_a,
                    encoder_b,
                    enc_b,
                    gate_k=gates,
                    top=int(top),
                    box=box,
                    term=term,
                    input_info={"text": value} if what == "text" else {"image": label},
                )  # fmt: skip
            )
            if kind == "Image":
                st.session_state["compare_picture"] = (label, data)
        except LexlensError as exc:
            fail(exc)

# ----------------------------------------------------------------------------- collections
else:
    from lexlens.analysis.collections.store import open_index
    from lexlens.analysis.collections.workspace import list_collections
    from lexlens.analysis.search.queries import default_query_encoder

    cards = [c for c in list_collections() if "error" not in c]
    if not cards:
        st.info(
            "No stored collection yet: build them on the **Collections** page or with "
            "`lexlens index --encoder NAME --source PATH --out DIR` (the same source with two "
            "encoders, or one index compared at two gate k)."
        )
        st.stop()
    by_name = {c["name"]: c for c in cards}

    def describe(n: str) -> str:
        c = by_name[n]
        return f"{n} — {c['items']:,} {c['modality']} items, {c['encoder']}, gate k {c['gate_k']}"

    names = list(by_name)
    if st.session_state.get("compare_index_a") not in names:
        st.session_state["compare_index_a"] = names[0]
    if st.session_state.get("compare_index_b") not in [SAME, *names]:
        st.session_state["compare_index_b"] = SAME
    c1, c2 = st.columns(2)
    name_a = c1.selectbox("Collection A", names, key=kept("compare_index_a"), format_func=describe)
    name_b = c2.selectbox(
        "Collection B", [SAME, *names], key=kept("compare_index_b"),
        format_func=lambda n: n if n == SAME else describe(n),
    )  # fmt: skip
    card_a = by_name[name_a]
    card_b = card_a if name_b in (SAME, name_a) else by_name[name_b]
    ka = c1.number_input(
        "Gate k of A (≤ the stored k)", min_value=-1, step=8,
        key=kept(f"compare_index_gate_a_{name_a}", int(card_a["gate_k"])),
    )  # fmt: skip
    stored_b = int(card_b["gate_k"])
    same = card_b is card_a
    # One collection: by default B sees it re-gated at half its mean number of stored terms.
    default_b = max(1, int(card_b["mean_nnz"] // 2)) if same else stored_b
    if same and stored_b != -1:
        default_b = min(default_b, stored_b)
    kb = c2.number_input(
        "Gate k of B (≤ the stored k)", min_value=-1, step=8,
        key=kept(f"compare_index_gate_b_{card_b['name']}_{'same' if same else 'other'}", default_b),
        help="A stored collection re-gates exactly at any k up to the one it was built with.",
    )  # fmt: skip
    q1, q2 = st.columns([3, 1])
    query = q1.text_input("Query searched on both (optional)", key=kept("compare_query", "dog"))
    k = q2.number_input(
        "k of Exact@k", min_value=1, max_value=1000, key=kept("compare_k", DEFAULT_K)
    )
    try:
        ix_a = open_index(card_a["path"])
        ix_b = open_index(card_b["path"])
        defaults = [default_query_encoder(ix, "text") for ix in (ix_a, ix_b)]
    except LexlensError as exc:
        fail(exc)
        ix_a = ix_b = None
    if ix_a is not None:
        needs = COMPARE_NEEDS["index"]
        keys = [f"compare_index_encoder_{s}_{c['name']}" for s, c in (("a", card_a), ("b", card_b))]
        for key, spec in zip(keys, defaults, strict=True):
            seed_picker(key, spec)
        encoder_a = encoder_picker(
            "Text encoder A (queries, caption tokens)", needs, key=keys[0], default=defaults[0]
        )
        encoder_b = encoder_picker(
            "Text encoder B (queries, caption tokens)", needs, key=keys[1], default=defaults[1]
        )
        if encoder_a is not None and encoder_b is not None:

            @st.cache_data(show_spinner=False, max_entries=8)
            def collection_result(
                _a, _b, key_a: str, key_b: str, path_a: str, path_b: str, updated: str,
                gates: tuple[int, int], query: str | None, top: int, k: int,
            ) -> CompareResult:  # fmt: skip
                bar = st.progress(0.0, "Comparing…")
                try:
                    return compare_indexes(
                        path_a, None if path_b == path_a else path_b, encoder_a=_a,
                        encoder_b=_b, gate_k=gates, query=query, top=top, k=k,
                        progress=lambda f, msg: bar.progress(min(max(f, 0.0), 1.0), msg),
                    )  # fmt: skip
                finally:
                    bar.empty()

            try:
                remember(
                    collection_result(
                        encoder_a,
                        encoder_b,
                        encoder_key(encoder_a),
                        encoder_key(encoder_b),
                        card_a["path"],
                        card_b["path"],
                        f"{card_a.get('updated')}|{card_b.get('updated')}",
                        (int(ka), int(kb)),
                        query.strip() or None,
                        int(top),
                        int(k),
                    )  # fmt: skip
                )
            except LexlensError as exc:
                fail(exc)

result = st.session_state.get(RESULT)
if result is None:
    st.stop()


# ----------------------------------------------------------------------------- rendering
def side_title(s: str) -> str:
    d = result.a if s == "a" else result.b
    where = f" on {d['index']}" if "index" in d else ""
    return f"{s.upper()}: {d['encoder']}{where}, gate k {d['gate_k']}"


def show_terms(c: TermComparison, key: str) -> None:
    n = c.counts
    rc = c.rank_correlation
    m = st.columns(5)
    m[0].metric("Active in A", n["active_a"])
    m[1].metric("Active in B", n["active_b"])
    m[2].metric("Shared", n["shared"])
    m[3].metric(
        "Only in A / only in B", f"{n['only_a']} / {n['only_b']}",
        help=f"{n['only_a_no_counterpart']} of A's and {n['only_b_no_counterpart']} of B's "
        "have no counterpart in the other's vocabulary",
    )  # fmt: skip
    m[4].metric(
        "Spearman's ρ (shared)", "n/a" if rc["rho"] is None else f"{rc['rho']:.3f}",
        help=f"Computed over {rc['over']}.",
    )  # fmt: skip
    if n["only_a_no_counterpart"] or n["only_b_no_counterpart"]:
        st.caption(
            f"{n['only_a_no_counterpart']} of the terms only in A and "
            f"{n['only_b_no_counterpart']} of those only in B cannot exist on the other side "
            "(their token is not in its vocabulary)."
        )
    if rc.get("note"):
        st.caption(f"ρ: {rc['note']}")
    raw = st.toggle(
        "Raw vocabulary tokens (with ranks)", key=kept(f"compare_raw_{key}", False),
        help="Off: word pieces joined into words (gi ##raf ##fe → giraffe), as the Terms views "
        "show them. ρ and the counts above are on the raw tokens.",
    )  # fmt: skip
    view = {"shared": c.shared, "only_a": c.only_a, "only_b": c.only_b} if raw else c.merged
    counts = n if raw else c.merged["counts"]
    cols = st.columns(3)
    for col, status, title, fields in (
        (cols[0], "shared", "Shared", ["token", "weight_a", "weight_b", "difference", "rank_a",
                                       "rank_b"]),
        (cols[1], "only_a", "Only in A", ["token", "weight_a", "rank_a", "ungated_weight_b"]),
        (cols[2], "only_b", "Only in B", ["token", "weight_b", "rank_b", "ungated_weight_a"]),
    ):  # fmt: skip
        col.markdown(f"**{title}** ({counts[status]})")
        rows = view[status]
        if rows:
            frame = pd.DataFrame(rows)
            col.dataframe(
                frame[[f for f in fields if f in frame.columns]], hide_index=True, width="stretch"
            )
        else:
            col.caption("none")


st.divider()
st.markdown(f"**{side_title('a')}**  \n**{side_title('b')}**")
if note := vocabulary_note(result.vocabulary):
    st.info(note)
for n in result.notes:
    if n != vocabulary_note(result.vocabulary):
        st.caption(f"Note: {n}")

if result.terms is not None:
    st.subheader(f"Terms of the {result.kind}")
    show_terms(result.terms, "input")

if result.kind == "image" and (result.group is not None or result.heatmap is not None):
    from lexlens.analysis.render.patch_render import display_copy, draw_grid, heatmap_overlay
    from lexlens.models.images import load_image

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
                index = [int(u[1:].split("c")[0]) * grid[1] + int(u.split("c")[1]) for u in units]
                col.image(
                    draw_grid(picture, grid, tuple(d["crop_box"]), [index]),
                    caption=f"{s.upper()}: {len(units)} of {grid[0]}×{grid[1]} cells under the box",
                    width="stretch",
                )
        show_terms(g["terms"], "group")
    if result.heatmap is not None:
        import numpy as np

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

if result.collection is not None:
    col = result.collection
    st.subheader(f"Semantic deviation and FLOPs (k = {col['k']})")
    rows = []
    dev = col["deviation"]
    for kind_name, pa in dev["a"]["sets"].items():
        pb = dev["b"]["sets"].get(kind_name) or {}
        for key, label in (
            ("exact_at_k", f"Exact@{col['k']}"), ("semantic_at_k", f"Semantic@{col['k']}"),
            ("flops", "FLOPs (different items)"), ("mean_active_dims", "mean active dims"),
        ):  # fmt: skip
            rows.append({"set": kind_name, "measure": label, "A": pa.get(key), "B": pb.get(key)})
    if dev["a"]["flops_captions_images"] is not None:
        rows.append(
            {"set": "captions × images", "measure": "FLOPs (D2S)",
             "A": dev["a"]["flops_captions_images"], "B": dev["b"]["flops_captions_images"]}
        )  # fmt: skip
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
        if search["metrics"]:
            mt = search["metrics"]
            st.caption(f"{mt['relevant']} items carry the label '{search['query']}'.")
            st.dataframe(
                pd.DataFrame([{"side": s.upper(), **mt[s]} for s in ("a", "b")]), hide_index=True
            )
        cols = st.columns(2)
        for c, s in zip(cols, ("a", "b"), strict=True):
            c.markdown(f"**Top {search['top']} in {s.upper()}**")
            frame = pd.DataFrame(search[f"hits_{s}"])
            empty = [n for n in ("text", "image") if n in frame and not frame[n].astype(bool).any()]
            c.dataframe(frame.drop(columns=empty), hide_index=True, width="stretch")
        st.markdown("**Which hits moved, and the terms that moved them** (contribution B − A)")
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "id": h["id"], "status": h["status"], "rank A": h["rank_a"],
                        "rank B": h["rank_b"], "score A": h["score_a"], "score B": h["score_b"],
                        "changed terms": ", ".join(
                            f"{t['token']} {t['change']:+.3f}" for t in h["changed_terms"]
                        ),
                    }
                    for h in search["hits"]
                ]
            ),
            hide_index=True,
            width="stretch",
        )  # fmt: skip
        st.caption(
            f"Ranks beyond {search['rank_depth']} are empty. Each side's contributions "
            "q_t · d_t sum to its score; the JSON holds all of them."
        )

files = result.files()
st.divider()
st.caption(
    "Download the comparison: a self-contained HTML report, the JSON document "
    "(`lexlens compare … --json` prints the same) and its tables as CSV."
)
d = st.columns(len(files))
KINDS_OF_FILE = {"html": ("Report", "text/html"), "json": ("JSON", "application/json"),
                 "csv": ("CSV", "text/csv")}  # fmt: skip
for col_, (name, data) in zip(d, files.items(), strict=True):
    what, mime = KINDS_OF_FILE[name.rsplit(".", 1)[-1]]
    col_.download_button(f"{what}: {name}", data, name, mime, key=f"compare_dl_{name}")
