"""Search & exclusion page: search a stored collection (text → image with the default pair,
text → text, image → text) or a small text file; "A but not B" by SR's dimension sets or a
baseline; metrics when the collection has labels.

Thin: every number is a :class:`~lexlens.analysis.search.search.SearchResult` from
``lexlens.analysis.search.search`` — the JSON download is the document ``lexlens search
… --json`` prints for the same inputs.
"""

from __future__ import annotations

import streamlit as st

from lexlens.analysis.collections.store import open_index
from lexlens.analysis.collections.workspace import list_collections
from lexlens.analysis.core.gating import DEFAULT_GATE_K
from lexlens.analysis.core.samples import sample_path
from lexlens.analysis.search.examples import example_queries
from lexlens.analysis.search.exclusion import METHODS
from lexlens.analysis.search.memory_collection import collection_from_file
from lexlens.analysis.search.queries import (
    BOW_QUERY_NEEDS,
    IMAGE_QUERY_NEEDS,
    TEXT_QUERY_NEEDS,
    QuerySpec,
    default_query_encoder,
)
from lexlens.analysis.search.search import SearchResult, search
from lexlens.app.runtime.state import (
    content_key,
    encoder_picker,
    keep_for_reload,
    kept,
    kept_result,
    remembered_uploads,
    restore_inputs,
)
from lexlens.app.views.search import show_result
from lexlens.models import LexlensError

SOURCES = ["Stored collection", "Sample texts (data/collection.csv)", "Upload a small text file"]
METHOD_HELP = {
    "sr": "SR: D1 from A's top-K items, D2 from B's, rank by magnitude on D1 \\ D2",
    "avg": "average embedding: E(A) − E(B), ranked by inner product",
    "text": "one query text 'images of A without B' (or 'A without B' for texts)",
}

st.header("Search & exclusion")
st.caption(
    "Rank a collection by E_q · E_d; every hit lists the terms that make its score, and they "
    "sum to it. With an exclusion “A but not B”, SR ranks by the dimensions of A's top items "
    "that B's top items do not use (D = D1 \\ D2), beside two baselines. Collections with "
    "labels get MRR@1, MRR@10, NDCG@10 and AP@10 for every method (ir-measures; relevant = "
    "labelled A and not B)."
)

restore_inputs("search")  # a reload, a bookmark or a link: the inputs in the URL's run
kept_files: list[tuple[str, bytes]] = []  # an uploaded collection, an uploaded query image
kept_images: list[tuple[str, bytes]] = []
source = st.radio("Collection", SOURCES, horizontal=True, key=kept("search_source", SOURCES[0]))
cards = [c for c in list_collections() if "error" not in c]
if source == SOURCES[0] and not cards:
    st.info(
        "No stored collection yet: build one on the **Collections** page (the sample photos "
        "are one click), or with `lexlens index`. Meanwhile, the sample texts:"
    )
    source = SOURCES[1]


@st.cache_resource(show_spinner=False, max_entries=8)
def opened(path: str, updated: str):
    """An opened index, shared while its manifest's date stays the same."""
    return open_index(path)


@st.cache_data(show_spinner=False, max_entries=32)
def examples(_target, key: str) -> tuple[str, str]:
    """(A, B) example queries from the collection's labels or words (cached per collection)."""
    return example_queries(_target)


@st.cache_data(show_spinner="Encoding the collection…", max_entries=8)
def in_memory(_encoder, encoder_key: str, digest: str, data: bytes, name: str):
    return collection_from_file(_encoder, data, name)


# --------------------------------------------------------------------------- the target
target = None
query_kind = "Text"
if source == SOURCES[0]:
    names = [c["name"] for c in cards]
    if st.session_state.get("search_collection") not in names:
        st.session_state["search_collection"] = names[0]
    chosen = st.selectbox("Stored collection", names, key=kept("search_collection", names[0]))
    card = next(c for c in cards if c["name"] == chosen)
    try:
        target = opened(card["path"], str(card.get("updated")))
    except LexlensError as exc:
        st.error(str(exc))
        st.stop()
    st.caption(
        f"{card['items']:,} {card['modality']} items encoded with **{card['encoder']}** "
        f"(gate k {card['gate_k']}), {card['labelled']} labelled."
    )
    query_kind = st.radio(
        "Query", ["Text", "Image"], horizontal=True, key=kept("search_query_kind", "Text")
    )
# The mode decides which encoders can make the query (a D2S head: bag-of-words only).
mode = st.radio(
    "Query mode", ["parametric", "bow"], horizontal=True, key=kept("search_mode", "parametric"),
    disabled=query_kind == "Image",
    help="bow: VDR's nonparametric query, the bag of the query's own tokens (texts only)",
)  # fmt: skip
bow = mode == "bow" and query_kind == "Text"
if target is not None:
    modality = "image" if query_kind == "Image" else "text"
    try:
        default = default_query_encoder(target, modality)
    except LexlensError:
        default = None
    encoder = encoder_picker(
        "Query encoder (same vocabulary as the collection)",
        IMAGE_QUERY_NEEDS if modality == "image" else BOW_QUERY_NEEDS if bow else TEXT_QUERY_NEEDS,
        key=f"search_query_encoder_{modality}{'_bow' if bow else ''}",
        default=default,
    )
else:  # a small text file: the encoder encodes its texts too
    encoder = encoder_picker("Text encoder", TEXT_QUERY_NEEDS, key="search_encoder")
    if encoder is None:
        st.stop()
    if source == SOURCES[1]:
        data, name = sample_path("collection.csv").read_bytes(), "collection.csv"
    else:
        upload = st.file_uploader(
            "Collection (.csv/.jsonl with a text column and optional id, labels; or .txt)",
            type=["csv", "txt", "jsonl"],
            key="search_upload",
        )
        kept_files = remembered_uploads("search_upload", [upload] if upload else [])
        if not kept_files:
            st.info("Upload a file, or build a stored collection on the Collections page.")
            st.stop()
        name, data = kept_files[0]
    try:
        target = in_memory(encoder, encoder.source or encoder.name, content_key(data), data, name)
    except LexlensError as exc:
        st.error(str(exc))
        st.stop()
if encoder is None or target is None:
    st.stop()

# ---------------------------------------------------------------------------- the query
image_upload: tuple[str, bytes] | None = None
query = ""
if query_kind == "Image":
    upload = st.file_uploader(
        "Query image", type=["png", "jpg", "jpeg", "webp", "gif"], key="search_image"
    )
    kept_images = remembered_uploads("search_image", [upload] if upload else [])
    if not kept_images:
        st.info("Upload an image to search with.")
        st.stop()
    image_upload = kept_images[0]
    st.image(image_upload[1], width=160)
c1, c2, c3 = st.columns(3)
if query_kind == "Text":
    example_a, example_b = examples(target, str(getattr(target, "path", "")) or target.name)
    previous = st.session_state.get("search_examples_for")
    if previous != (example_a, example_b):
        # Another collection: its own examples replace the last one's (not what was typed).
        st.session_state["search_examples_for"] = (example_a, example_b)
        for key, old, new in (("search_query", 0, example_a), ("search_exclude", 1, example_b)):
            if key not in st.session_state or (previous and st.session_state[key] == previous[old]):
                st.session_state[key] = new
    query = c1.text_input("Find (A)", key=kept("search_query", example_a))
    exclude = c2.text_input(
        "But not (B) — optional", key=kept("search_exclude", example_b),
        help=f"Examples from this collection's labels: {example_a!r} but not {example_b!r}"
        if example_b else None,
    )  # fmt: skip
else:
    exclude = ""
    c2.caption("Exclusion needs a text query A.")
method = c3.selectbox(
    "Exclusion method", list(METHODS), key=kept("search_method", "sr"),
    format_func=lambda m: {"sr": "SR (dimension sets)", "avg": "average embedding",
                           "text": "single-line query"}[m],
    disabled=not exclude.strip(), help=METHOD_HELP.get(st.session_state.get("search_method", "sr")),
)  # fmt: skip
uses_sets = bool(exclude.strip()) and method == "sr"
c4, c5, c6, c7 = st.columns(4)
top = c4.slider("Results", 1, 50, key=kept("search_top", 10))
k_items = c5.number_input(
    "Items per dimension set (K)", 1, 1000, key=kept("search_k_items", 10), disabled=not uses_sets,
    help="SR only: how many top items of A (and of B) the dimension sets are taken from",
)  # fmt: skip
coverage = c6.slider(
    "Magnitude coverage", 0.05, 1.0, key=kept("search_coverage", 0.5), disabled=not uses_sets,
    help="SR only: each set is the smallest one holding this share of its items' magnitude",
)  # fmt: skip
magnitude = c7.radio(
    "Magnitude", ["sum", "l2"], key=kept("search_magnitude", "sum"), disabled=not uses_sets,
    horizontal=True, help="SR only: a dimension's magnitude is its weight (sum) or its squared "
    "weight (l2: items rank by the L2 norm of their weights on D)",
)  # fmt: skip
normalize = st.toggle(
    "L2-normalise items (SR)", key=kept("search_normalize", True), disabled=not uses_sets,
    help="SR only: each item's vector is divided by its L2 norm before extracting and ranking, "
    "so items whose mass lies on B's dimensions rank lower",
)  # fmt: skip

# ---------------------------------------------------------------------------- searching
options = {
    "query": query if query_kind == "Text" else None,
    "exclude": exclude if query_kind == "Text" else None,
    "method": method,
    "top": int(top),
    "k_items": int(k_items) if uses_sets else None,
    "coverage": float(coverage) if uses_sets else None,
    "magnitude": magnitude,
    "normalize": bool(normalize),
}
spec = QuerySpec(encoder, "bow" if bow else "parametric", DEFAULT_GATE_K)
key = content_key(
    repr(sorted(options.items())), spec.mode, encoder.name, str(getattr(target, "path", "")),
    str(getattr(target, "manifest", {}).get("updated", "")), image_upload[1] if image_upload else b"",
)  # fmt: skip
if image_upload is not None:
    options |= {"query_image": image_upload[1], "image_name": image_upload[0]}
result: SearchResult | None = kept_result(
    "search_result", lambda: search(target, spec, **options), key=key
)
if result is None:
    st.stop()
keep_for_reload("search", "search_", f"search “{options.get('query') or 'an image'}”", {
    key: files for key, files in (("search_upload", kept_files), ("search_image", kept_images))
    if files
})  # fmt: skip

show_result(result, target)
