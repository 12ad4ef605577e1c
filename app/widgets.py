"""Drawing shared by the pages: word clouds and term tables (nothing computed here)."""

from __future__ import annotations

import streamlit as st

from lexlens.analysis.core.words import Term


@st.cache_data(show_spinner=False, max_entries=256)
def cloud_picture(terms: tuple[tuple[str, float], ...], highlight: frozenset[str] = frozenset()):
    """The cloud picture (1600×900) of ``(token, weight)`` pairs and its caption, cached."""
    from lexlens.analysis.render.plots import cloud_caption, cloud_layout, render_cloud

    layout = cloud_layout([Term(t, w, i) for i, (t, w) in enumerate(terms)])
    return render_cloud(layout, highlight=set(highlight)), cloud_caption(layout, "Word cloud")


def show_cloud(where, rows: list[dict], caption: str, highlight: frozenset[str] = frozenset()):
    """Draw the cloud of term rows (``token``, ``weight``) with ``caption``; returns the picture."""
    picture, how = cloud_picture(tuple((r["token"], r["weight"]) for r in rows), highlight)
    where.image(picture, caption=f"{caption} — {how[len('Word cloud: ') :]}", width="stretch")
    return picture


def term_table(rows: list[dict]):
    """A table of term rows: term and weight, and the pieces of merged words when any."""
    import pandas as pd

    table = pd.DataFrame(
        {"term": [r["token"] for r in rows], "weight": [r["weight"] for r in rows]}
    )
    if any("pieces" in r for r in rows):
        table["pieces"] = [" ".join(r.get("spelling", r.get("pieces", []))) for r in rows]
    return table
