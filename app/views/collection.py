"""How the Collections page draws: a build's settings (widgets from the declarations of
:class:`~lexlens.analysis.collections.options.IndexOptions`), and an opened collection: its
figures, strongest words, first items, skipped items and manifest."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from lexlens.analysis.collections.options import BENCHMARK_OPTIONS, IndexOptions
from lexlens.analysis.collections.stored import StoredCollection
from lexlens.analysis.collections.workspace_build import propose_build
from lexlens.analysis.core.outputs import json_text
from lexlens.analysis.core.words import spelling
from lexlens.app.views.thumbnails import item_thumbnail
from lexlens.app.views.widgets import option_widget

#: The widget key of each option the page draws.
KEYS = {
    "gate_k": "collections_k",
    "batch_size": "collections_batch",
    "split": "collections_split",
    "images": "collections_images",
    "image_column": "collections_image_column",
    "text_columns": "collections_text_columns",
}


def propose_from_path(roots, encoder_key: str, name_key: str, path_key: str) -> None:
    """A typed server path proposes its collection's name and encoder (a text benchmark →
    a text encoder, images → an image encoder): a widget callback, so the proposal fills
    the widgets before they are drawn; the user may change both afterwards."""
    proposal = propose_build(st.session_state.get(path_key) or "", roots)
    if proposal is None:
        return
    st.session_state[name_key] = proposal.name
    if proposal.encoder is not None:
        st.session_state[encoder_key] = proposal.encoder


def kept_benchmark(counts: dict | None) -> str:
    """ "300 queries (300 judged) and 4,666 judgements kept" for a collection built from a
    benchmark (``counts``: its card, or a build's ``kept_benchmark``), else ""."""
    if not isinstance(counts, dict) or counts.get("queries") is None:
        return ""
    return (
        f"{counts['queries']:,} queries ({counts.get('judged_queries') or 0:,} judged) and "
        f"{counts.get('judgements') or 0:,} judgements kept with the collection"
    )


def build_numbers(gate_where, batch_where) -> dict[str, int]:
    """The gate k and batch size widgets of a build; their values by option name."""
    return {
        "gate_k": int(option_widget(IndexOptions, "gate_k", KEYS["gate_k"], where=gate_where)),
        "batch_size": int(
            option_widget(IndexOptions, "batch_size", KEYS["batch_size"], where=batch_where)
        ),
    }


def benchmark_texts() -> dict[str, str | None]:
    """A benchmark's options as typed (text, as the command line takes them: the options
    type parses them); an empty field is ``None``."""
    values = {}
    for name, where in zip(BENCHMARK_OPTIONS, st.columns(len(BENCHMARK_OPTIONS)), strict=True):
        typed = option_widget(IndexOptions, name, KEYS[name], where=where, default="")
        values[name] = (typed or "").strip() or None
    return values


def show_collection(index: StoredCollection, card: dict) -> None:
    """One opened collection (``card``: its line of the workspace list)."""
    m1, m2, m3, m4 = st.columns(4)
    m1.metric("Items", f"{card['items']:,}")
    m2.metric("Non-zeros per item", f"{card['mean_nnz']:.1f}")
    m3.metric("Gate k", card["gate_k"])
    m4.metric(
        "On disk",
        f"{card['disk_bytes'] / 1e6:.2f} MB",
        help=f"CSR alone {card['csr_bytes'] / 1e6:.2f} MB",
    )
    st.caption(
        f"Encoder **{card['encoder']}** · {card['modality']} items · {card['labelled']} "
        f"labelled · {card['captioned']} captioned · {card['skipped']} skipped · source "
        f"`{card['source']}` · created {card['created']} · updated {card['updated']}"
    )
    kept = kept_benchmark(card)
    if kept:
        st.info(
            f"{kept}: the Evaluation page and `lexlens evaluate --index {card['name']}` use them."
        )
    terms = pd.DataFrame(
        [
            (reading.label, t.weight, " ".join(spelling(t, index.vocab)))
            for t, reading in index.strongest_readings()
        ],
        columns=["word (or piece)", "mean weight", "pieces"],
    )
    left, right = st.columns([1, 2])
    left.markdown("**Strongest terms over the collection** (mean gated weight)")
    left.dataframe(terms, hide_index=True, height=300)
    preview = index.meta(range(min(len(index), 12)))
    with right:
        st.markdown("**First items**")
        if index.modality == "image":
            cols = st.columns(4)
            for n, meta in enumerate(preview):
                data = item_thumbnail(index, meta, side=200)
                with cols[n % 4]:
                    if data:
                        st.image(data, caption=meta["id"], width="stretch")
                    else:
                        st.caption(f"{meta['id']} (image not found)")
        else:
            st.dataframe(
                pd.DataFrame(
                    [
                        {"id": x["id"], "text": x["text"], "labels": " | ".join(x["labels"])}
                        for x in preview
                    ]
                ),
                hide_index=True,
                width="stretch",
            )
    skipped = [s.to_dict() for s in index.manifest.skipped]
    if skipped:
        listed = "" if card["skipped"] <= len(skipped) else f", the first {len(skipped)} listed"
        with st.expander(f"{card['skipped']} skipped item(s){listed}"):
            st.dataframe(pd.DataFrame(skipped), hide_index=True, width="stretch")
    st.download_button(
        "Manifest (JSON)",
        json_text(index.manifest.to_dict()),
        f"{card['name']}-manifest.json",
        "application/json",
    )


def collections_table(cards: list[dict]) -> pd.DataFrame:
    """The stored collections' table: one row per card (a damaged one with its problem)."""
    table = pd.DataFrame(
        [
            {
                "name": c["name"],
                "encoder": c.get("encoder", "—"),
                "kind": c.get("modality", "—"),
                "items": c.get("items"),
                "mean non-zeros": round(c["mean_nnz"], 1) if "mean_nnz" in c else None,
                "labelled": c.get("labelled"),
                "queries kept": c.get("queries"),
                "judgements kept": c.get("judgements"),
                "updated": c.get("updated", ""),
                "MB on disk": round(c["disk_bytes"] / 1e6, 2) if "disk_bytes" in c else None,
                "problem": c.get("error", ""),
            }
            for c in cards
        ]
    )
    return table.astype({"queries kept": "Int64", "judgements kept": "Int64"})  # none: not kept
