"""Collections page: build a stored collection (upload, server path or the sample photos)
or import vectors encoded elsewhere, list, open and delete the stored ones, each with its
card.

Thin: building is ``lexlens.analysis.collections.workspace_build.build_collection`` (the
same build as ``lexlens index``, its settings drawn from ``IndexOptions``; a typed path is
held to the data roots there) or ``import_collection`` (``lexlens index --vectors``, its
settings drawn from ``VectorImportOptions``: :mod:`lexlens.app.views.collection_import`),
the card is the stored collection's ``card()``. Collections live in the workspace
(``LEXLENS_HOME``, default ``~/.lexlens``): ``collections/<name>`` holds the index,
``sources/<name>`` an uploaded source; both survive page switches, reruns and restarts.
"""

from __future__ import annotations

import streamlit as st

from lexlens.analysis.collections.build_parts import IndexResult
from lexlens.analysis.collections.options import IndexOptions
from lexlens.analysis.collections.source_index import INDEX_NEEDS
from lexlens.analysis.collections.store import open_index
from lexlens.analysis.collections.workspace import (
    collections_dir,
    delete_collection,
    list_collections,
    workspace,
)
from lexlens.analysis.collections.workspace_build import (
    build_collection,
    check_collection_request,
    server_path_refusal,
)
from lexlens.analysis.core.results import progress_part
from lexlens.analysis.core.samples import SAMPLE_BENCHMARKS
from lexlens.app.runtime import state
from lexlens.app.runtime.access import data_roots
from lexlens.app.views.collection import (
    benchmark_texts,
    build_numbers,
    collections_table,
    propose_from_path,
    show_collection,
)
from lexlens.app.views.collection_import import INPUT_KEYS as IMPORT_KEYS
from lexlens.app.views.collection_import import show_build_outcome, start_import, vectors_inputs
from lexlens.app.views.widgets import option_widget
from lexlens.models import LexlensError, load_encoder

#: The source choices shown → the analysis' source kinds.
SOURCES = {
    "Upload files": "upload",
    "Path on this server": "path",
    "Sample photos (scikit-image)": "sample",
    "Vectors encoded elsewhere": "vectors",
}
LABELS = list(SOURCES)

st.header("Collections")
st.caption(
    "A collection is a dataset encoded once and stored sparse: the gated vectors "
    "E = V ⊙ G as memory-mapped CSR arrays, item metadata in Parquet, a manifest with the "
    "encoder's weight fingerprint. Re-building an unchanged source encodes nothing; added "
    f"items are encoded alone. Stored in `{workspace()}` (LEXLENS_HOME)."
)


INPUT_KEYS = (
    "collections_encoder",
    "collections_encoder_dir",
    "collections_source",
    "collections_path",
    "collections_name",
    "collections_k",
    "collections_batch",
    "collections_split",
    "collections_images",
    "collections_image_column",
    "collections_text_columns",
    "collections_ray",
    *IMPORT_KEYS,
)
state.restore_inputs("collections")  # a reload or a link: the run's inputs back into the widgets

# --------------------------------------------------------------------------------- build
with st.expander("Build a collection", expanded=not list_collections()):
    # Only the choice here: the encoder loads when the user builds.
    encoder_spec = state.encoder_choice(
        "Collection encoder",
        INDEX_NEEDS,
        key="collections_encoder",
        default="efficientnet-lite0-lexical",
    )
    propose = {
        "on_change": propose_from_path,
        "args": (data_roots(), "collections_encoder", "collections_name", "collections_path"),
    }
    source_kind = SOURCES[
        st.radio(
            "Source",
            LABELS,
            horizontal=True,
            key=state.kept("collections_source", LABELS[2]),
            **propose,
        )
    ]
    files: list[tuple[str, bytes]] = []
    server_path, refusal = "", ""
    bench: dict[str, str | None] = {}
    if source_kind == "upload":
        uploads = st.file_uploader(
            "Images, and/or one .csv/.jsonl/.txt (image paths in it are the uploaded file "
            "names; columns: image, text, id, caption…, labels)",
            type=["png", "jpg", "jpeg", "webp", "gif", "bmp", "tif", "tiff", "csv", "jsonl", "txt"],
            accept_multiple_files=True,
            key="collections_uploads",
        )
        files = state.remembered_uploads("collections_uploads", uploads)
    elif source_kind == "path":
        samples = ", ".join(f"sample:{n}" for n in SAMPLE_BENCHMARKS)
        server_path = st.text_input(
            "Folder of images, a .txt/.csv/.jsonl file, or a benchmark (a BEIR folder, MS "
            "MARCO files, a Karpathy split JSON, a Hugging Face dataset on disk, irds:ID; "
            f"shipped with Lexlens: {samples})",
            key=state.kept("collections_path", ""),
            **propose,
        )
        refusal = server_path_refusal(server_path, data_roots())  # as typed, before Build
        if refusal:
            st.error(refusal)
        with st.expander("Benchmark options (the split's queries and judgements are kept)"):
            bench = benchmark_texts()
    elif source_kind == "vectors":
        server_path, refusal, check_parity, typed_import = vectors_inputs()
    else:
        st.caption(
            "19 scikit-image photos with captions and labels written for Lexlens "
            "(data/photos.csv): the text→image sample for Search & exclusion."
        )
    c1, c2, c3 = st.columns(3)
    name = c1.text_input("Name", key=state.kept("collections_name", "photos"))
    importing = source_kind == "vectors"
    if not importing:  # an import encodes nothing: no gate, batch or Ray
        numbers = build_numbers(c2, c3)
        ray = option_widget(
            IndexOptions,
            "ray",
            "collections_ray",
            default="",
            label="Encode on Ray (empty: "
            "here; local: a private Ray on this machine; ray://HOST:PORT: a cluster's head)",
        )
    needs_encoder = not importing or check_parity
    build = st.button(
        "Import" if importing else "Build",
        type="primary",
        disabled=(needs_encoder and encoder_spec is None) or bool(refusal),
    )
    inputs = {k: st.session_state.get(k) for k in INPUT_KEYS}
    uploads = {"collections_uploads": files} if source_kind == "upload" else {}
    if build and importing:
        spec = encoder_spec if check_parity else None
        start_import(name, server_path, typed_import, spec, inputs)
    elif build and encoder_spec:
        try:
            typed = bench | {"ray": (ray or "").strip() or None}
            options = IndexOptions.of(IndexOptions.from_texts(typed), **numbers)
            roots = data_roots()  # a typed path is read only inside them
            options = check_collection_request(
                name, source_kind, path=server_path, roots=roots, options=options
            )
            device = st.session_state.get("device", "auto")

            def work(progress, spec=encoder_spec, device=device):
                progress(0.0, f"loading the encoder {spec}…")
                encoder = load_encoder(spec, device=None if device == "auto" else device)
                INDEX_NEEDS.check(encoder)
                return build_collection(
                    encoder,
                    name,
                    source_kind,
                    files=files,
                    path=server_path,
                    roots=roots,
                    options=options,
                    progress=progress_part(progress, 0.05, 1.0, "building: "),
                )

            state.start_job("collections", f"build {name.strip()}", inputs, uploads, work)
        except LexlensError as exc:
            st.error(str(exc))

# The build's progress and outcome, outside the form: seen on return with the form closed.
last, job, status = state.job_outcome("collections", IndexResult, inputs, uploads)
state.show_job_state(job, status, "Building", "build")
if last is not None:
    show_build_outcome(last)

# ---------------------------------------------------------------------------------- list
cards = list_collections()
if not cards:
    st.info(
        "No stored collection yet: build one above, or with `lexlens index … --out "
        f"{collections_dir()}/NAME`."
    )
    st.stop()
table = collections_table(cards)
st.subheader("Stored collections")
st.dataframe(table, hide_index=True, width="stretch")
names = [c["name"] for c in cards]
if st.session_state.get("collections_open") not in names:
    st.session_state["collections_open"] = names[0]
chosen = st.selectbox("Open", names, key=state.kept("collections_open", names[0]))
card = next(c for c in cards if c["name"] == chosen)
if "error" in card:
    st.error(card["error"])
else:
    try:
        index = open_index(card["path"])
    except LexlensError as exc:
        st.error(str(exc))
        st.stop()
    show_collection(index, card)
    with st.popover("Delete…"):
        st.write(f"Delete **{chosen}** and its stored vectors? This cannot be undone.")
        if st.button("Delete for good", key="collections_delete", type="primary"):
            try:
                delete_collection(chosen)
                st.session_state.pop("collections_open", None)
                st.session_state.pop("collections_last_build", None)
                st.rerun()
            except LexlensError as exc:
                st.error(str(exc))
