"""How the Collections page draws an import of vectors encoded elsewhere (widgets from the
declarations of :class:`~lexlens.analysis.collections.vector_import.VectorImportOptions`)
and what a build or an import did."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from lexlens.analysis.collections.build_parts import IndexResult
from lexlens.analysis.collections.vector_import import VECTOR_FORMATS, VectorImportOptions
from lexlens.analysis.collections.workspace_build import (
    check_import_request,
    import_collection,
    server_path_refusal,
)
from lexlens.analysis.core.results import progress_part
from lexlens.app.runtime import state
from lexlens.app.runtime.access import data_roots
from lexlens.app.views.collection import kept_benchmark
from lexlens.app.views.widgets import option_widget
from lexlens.models import LexlensError

#: An import's settings shown beside its format, in order.
IMPORT_OPTIONS = ("scale", "vector_ids", "queries", "qrels", "parity_sample")
#: Those typed as paths on this server (empty: not given).
IMPORT_PATHS = ("vector_ids", "queries", "qrels")
#: The widget keys of an import's inputs (kept with the page's other inputs).
INPUT_KEYS = (
    "collections_vectors_path",
    "collections_check_parity",
    "collections_accept_mismatch",
    "collections_import_vector_format",
    *(f"collections_import_{name}" for name in IMPORT_OPTIONS),
)
#: The format choice that leaves it to the import (told from the content).
DETECTED = "told from the content"


def vectors_inputs() -> tuple[str, str, bool, dict[str, Any]]:
    """The import's inputs: the typed server path, its refusal against the data roots (""
    when it passes), whether to check the vectors against the encoder, and the settings."""
    roots = data_roots()
    server_path = st.text_input(
        "Encoded corpus on this server: Anserini's JsonVectorCollection (.jsonl, "
        ".jsonl.gz, a folder of parts), a .npz CSR with its ids file, or a Hugging Face "
        "dataset / Parquet with indices and values",
        key=state.kept("collections_vectors_path", ""),
    )
    refusal = server_path_refusal(server_path, roots)  # as typed, before Import
    if refusal:
        st.error(refusal)
    check_parity = st.toggle(
        "Check the vectors against the encoder above (a seeded sample re-encoded from "
        "its text); off: stored as given, the analyses that re-encode are refused",
        key=state.kept("collections_check_parity", True),
    )
    with st.expander("Import options"):
        left, right = st.columns(2)
        fmt = left.selectbox(
            "Vector format",
            [DETECTED, *VECTOR_FORMATS],
            key=state.kept("collections_import_vector_format", DETECTED),
            help=VectorImportOptions.option("vector_format").spec.help,
        )
        typed = {
            name: option_widget(
                VectorImportOptions,
                name,
                f"collections_import_{name}",
                left if i % 2 else right,
                **({"default": ""} if name in IMPORT_PATHS else {}),
                **({"label": "Impact scale (0: the weights as given)"} if name == "scale" else {}),
            )
            for i, name in enumerate(IMPORT_OPTIONS)
        }
        typed["vector_format"] = None if fmt == DETECTED else fmt
        typed["accept_mismatch"] = option_widget(
            VectorImportOptions, "accept_mismatch", "collections_accept_mismatch"
        )
    return server_path, refusal, check_parity, typed


def show_build_outcome(last: IndexResult) -> None:
    """What a build or an import did: its counts, an import's notes (the parity line among
    them), the skipped items; the collection opened below."""
    st.session_state["collections_open"] = Path(last.out).name
    kept = kept_benchmark(last.kept_benchmark)
    if "imported" in last.manifest:
        st.success(f"{Path(last.out).name}: {last.items:,} items imported, nothing encoded")
        for note in last.notes:  # the format, the scale, unknown terms, the parity line
            st.caption(note)
    else:
        st.success(
            f"{Path(last.out).name}: {last.items} items — encoded {last.encoded}, "
            f"reused {last.reused}, skipped {last.skipped_count}"
            + (" (source unchanged: nothing to encode)" if last.up_to_date else "")
            + (f"; {kept}" if kept else "")
        )
    if last.skipped:
        if last.skipped_count > len(last.skipped):
            st.caption(f"The first {len(last.skipped)} of {last.skipped_count} skipped items:")
        st.dataframe(pd.DataFrame([s.to_dict() for s in last.skipped]), hide_index=True)


def start_import(
    name: str, path: str, typed: dict[str, Any], spec: str | None, inputs: dict
) -> None:
    """Check the import's request (every path inside the data roots) and start it as the
    page's job; a refusal is shown in its one line, nothing started."""
    try:
        roots = data_roots()
        # an empty path, or the scale's 0 (the widget's blank), is not given
        given = {k: (v or None) if k in (*IMPORT_PATHS, "scale") else v for k, v in typed.items()}
        options = check_import_request(
            name, path, roots=roots, options=VectorImportOptions.of(**given)
        )
        device = st.session_state.get("device", "auto")

        def work(progress, spec=spec, device=device):
            return import_collection(
                spec,
                name,
                path,
                roots=roots,
                options=options,
                device=None if device == "auto" else device,
                progress=progress_part(progress, 0.0, 1.0, "importing: "),
            )

        state.start_job("collections", f"import {name.strip()}", inputs, {}, work)
    except LexlensError as exc:
        st.error(str(exc))
