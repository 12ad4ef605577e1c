"""Search & exclusion page: search a stored collection (text → image with the default pair,
text → text, image → text) or a small text file; "A but not B" by SR's dimension sets or a
baseline; metrics when the collection has labels.

Thin: every number is a :class:`~lexlens.analysis.search.search.SearchResult` from
``lexlens.analysis.search.search`` — the JSON download is the document ``lexlens search
… --json`` prints for the same inputs.
"""

from __future__ import annotations

import streamlit as st

from lexlens.analysis.collections.memory import collection_from_file
from lexlens.analysis.collections.store import open_index
from lexlens.analysis.collections.stored import is_stored
from lexlens.analysis.collections.workspace import list_collections
from lexlens.analysis.core.samples import sample_path
from lexlens.analysis.retrieval.queries import (
    BOW_QUERY_NEEDS,
    IMAGE_QUERY_NEEDS,
    TEXT_QUERY_NEEDS,
    default_query_encoder,
)
from lexlens.analysis.search.examples import example_queries
from lexlens.analysis.search.options import SearchOptions
from lexlens.analysis.search.search import SearchResult, search
from lexlens.app.runtime import state
from lexlens.app.views.search import settings_widgets, show_result
from lexlens.app.views.widgets import option_widget
from lexlens.models import LexlensError

SOURCES = ["Stored collection", "Sample texts (data/collection.csv)", "Upload a small text file"]
METHOD_NAMES = {
    "sr": "SR (dimension sets)",
    "avg": "average embedding",
    "text": "single-line query",
}

st.header("Search & exclusion")
st.caption(
    "Rank a collection by E_q · E_d; every hit lists the terms that make its score, and they "
    "sum to it. With an exclusion “A but not B”, SR ranks by the dimensions of A's top items "
    "that B's top items do not use (D = D1 \\ D2), beside two baselines. Collections with "
    "labels get RR@1, RR@10, nDCG@10 and AP@10 for every method (ir-measures; relevant = "
    "labelled A and not B)."
)

state.restore_inputs("search")  # a reload, a bookmark or a link: the inputs in the URL's run
kept_files: list[tuple[str, bytes]] = []  # an uploaded collection, an uploaded query image
kept_images: list[tuple[str, bytes]] = []
source = st.radio(
    "Collection", SOURCES, horizontal=True, key=state.kept("search_source", SOURCES[0])
)
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
    chosen = st.selectbox("Stored collection", names, key=state.kept("search_collection", names[0]))
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
        "Query", ["Text", "Image"], horizontal=True, key=state.kept("search_query_kind", "Text")
    )
# The mode decides which encoders can make the query (a D2S head: bag-of-words only).
mode = option_widget(SearchOptions, "query_mode", "search_mode", disabled=query_kind == "Image")
bow = mode == "bow" and query_kind == "Text"
if target is not None:
    modality = "image" if query_kind == "Image" else "text"
    try:
        default = default_query_encoder(target, modality)
    except LexlensError:
        default = None
    encoder = state.encoder_picker(
        "Query encoder (same vocabulary as the collection)",
        IMAGE_QUERY_NEEDS if modality == "image" else BOW_QUERY_NEEDS if bow else TEXT_QUERY_NEEDS,
        key=f"search_query_encoder_{modality}{'_bow' if bow else ''}",
        default=default,
    )
else:  # a small text file: the encoder encodes its texts too
    encoder = state.encoder_picker("Text encoder", TEXT_QUERY_NEEDS, key="search_encoder")
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
        kept_files = state.remembered_uploads("search_upload", [upload] if upload else [])
        if not kept_files:
            st.info("Upload a file, or build a stored collection on the Collections page.")
            st.stop()
        name, data = kept_files[0]
    try:
        target = in_memory(
            encoder, encoder.source or encoder.name, state.content_key(data), data, name
        )
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
    kept_images = state.remembered_uploads("search_image", [upload] if upload else [])
    if not kept_images:
        st.info("Upload an image to search with.")
        st.stop()
    image_upload = kept_images[0]
    st.image(image_upload[1], width=160)
c1, c2, c3 = st.columns(3)
if query_kind == "Text":
    example_a, example_b = examples(
        target, str(target.path) if target.path is not None else target.label
    )
    previous = st.session_state.get("search_examples_for")
    if previous != (example_a, example_b):
        # Another collection: its own examples replace the last one's (not what was typed).
        st.session_state["search_examples_for"] = (example_a, example_b)
        for key, old, new in (("search_query", 0, example_a), ("search_exclude", 1, example_b)):
            if key not in st.session_state or (previous and st.session_state[key] == previous[old]):
                st.session_state[key] = new
    query = c1.text_input("Find (A)", key=state.kept("search_query", example_a))
    exclude = c2.text_input(
        "But not (B) — optional",
        key=state.kept("search_exclude", example_b),
        help=f"Examples from this collection's labels: {example_a!r} but not {example_b!r}"
        if example_b
        else None,
    )
else:
    exclude = ""
    c2.caption("Exclusion needs a text query A.")
method = option_widget(
    SearchOptions,
    "method",
    "search_method",
    c3,
    disabled=not exclude.strip(),
    format_func=METHOD_NAMES.get,
)
uses_sets = bool(exclude.strip()) and method == "sr"
top, k_items, coverage, magnitude, normalize = settings_widgets(uses_sets)

# ---------------------------------------------------------------------------- searching
try:
    options = SearchOptions.of(
        top=top,
        query_mode="bow" if bow else "parametric",
        method=method,
        k_items=k_items if uses_sets else None,
        coverage=coverage if uses_sets else None,
        magnitude=magnitude,
        normalize=normalize,
    )
except LexlensError as exc:
    st.error(str(exc))
    st.stop()
inputs = {"query": query, "exclude": exclude}
if image_upload is not None:
    inputs = {"query_image": image_upload[1], "image_name": image_upload[0]}
key = state.content_key(
    repr(sorted(options.to_dict().items())),
    query,
    exclude,
    encoder.name,
    str(target.path) if target.path is not None else "",
    str(target.manifest.updated) if is_stored(target) else "",
    image_upload[0] if image_upload else "",
    image_upload[1] if image_upload else b"",
)
result: SearchResult | None = state.kept_result(
    "search_result", lambda: search(target, encoder, options=options, **inputs), key=key
)
if result is None:
    st.stop()
# A new query, collection or encoder makes a new run; the search settings update this one.
state.keep_for_reload(
    "search",
    "search_",
    f"search “{query or 'an image'}”",
    {
        key: files
        for key, files in (("search_upload", kept_files), ("search_image", kept_images))
        if files
    },
    subject=(
        "search_source",
        "search_collection",
        "search_encoder",
        "search_query_kind",
        "search_query",
        "search_exclude",
    ),
)

show_result(result, target)
