"""The Search page's drawing of a :class:`~lexlens.analysis.search.search.SearchResult`:
notes, SR's dimension sets in words, the hits (thumbnails for images) with the words that
make each score, metrics and downloads. Nothing is computed here."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from lexlens.analysis.core.counts import counted
from lexlens.analysis.core.words import entry_label
from lexlens.analysis.lexical.highlight import preview, score_spans
from lexlens.analysis.search.exclusion import set_labels
from lexlens.analysis.search.hits import hit_summary
from lexlens.analysis.search.options import DEFAULT_COVERAGE, DEFAULT_K_ITEMS, SearchOptions
from lexlens.analysis.search.search import SearchResult
from lexlens.analysis.search.table_evaluation import MEASURES
from lexlens.app.views.highlight import highlighted_html, legend
from lexlens.app.views.thumbnails import item_thumbnail
from lexlens.app.views.widgets import option_widget

MIME = {"json": "application/json", "csv": "text/csv"}


def show_text_hits(result: SearchResult, target) -> None:
    """Text hits: a table of previews (cut at a word, "…"), and each hit's whole text with
    the query's words and the words adding to its score marked, and all its words."""
    rows = [
        {
            "#": h.rank,
            "id": h.id,
            "score": h.score,
            "text": preview(h.text, 120)[0],
            "words (sum = score)": preview(hit_summary(h), 120)[0],
        }
        | ({"relevant": h.relevant} if h.relevant is not None else {})
        for h in result.results
    ]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    st.caption("Each hit whole: its text with the words that add to its score marked.")
    st.html(legend(["match"]))
    query = str(result.query.get("text") or "")
    vocab = getattr(target, "vocab", None)
    for h in result.results:
        mark = {True: " ✓", False: " ✗", None: ""}[h.relevant]
        with st.expander(f"{h.rank}. {h.id}{mark} — score {h.score:.4f}"):
            st.html(highlighted_html(h.text, score_spans(h.text, query, _rows(h), vocab)))
            words = pd.DataFrame(h.top_words)
            if not words.empty:  # a piece is shown marked, never as a word
                words["word"] = [entry_label(w) for w in h.top_words]
                words = words.rename(columns={"word": "word (or piece)"})
                words = words.drop(columns=["piece", "piece_of"], errors="ignore")
            if "pieces" in words:
                words["pieces"] = [
                    " ".join(p) if isinstance(p, list) else "" for p in words["pieces"]
                ]
            st.dataframe(words, hide_index=True, width="stretch")
            if h.other_words:
                rest = h.score - sum(w["contribution"] for w in h.top_words)
                st.caption(f"and {counted(h.other_words, 'more word')}, {rest:+.4f} in all")


def _rows(hit) -> list[dict]:
    """A hit's words as contribution rows (``token``) for marking its text."""
    return [{**w, "token": w["word"]} for w in hit.top_words]


def show_result(result: SearchResult, target) -> None:
    """Everything the page shows of one result."""
    for note in result.notes:
        st.warning(note)
    if result.dimensions:
        d = result.dimensions
        st.markdown(
            f"**D1** ({result.query.get('text')}, from {counted(d['include_items'], 'item')}): "
            f"{', '.join(set_labels(d, 'include')[:20])}  \n"
            f"**D2** ({result.query.get('exclude')}, from {counted(d['exclude_items'], 'item')}): "
            f"{', '.join(set_labels(d, 'exclude')[:20])}  \n"
            f"**D = D1 \\ D2**: {', '.join(set_labels(d, 'kept')[:20]) or '(empty)'}"
        )
    if not result.results:
        st.info("No results.")
    elif any(h.kind == "image" for h in result.results):
        st.caption("Each hit: score = the sum of its words' contributions (largest first).")
        cols = st.columns(5)
        for n, hit in enumerate(result.results):
            with cols[n % 5]:
                data = item_thumbnail(target, {"image": hit.image})
                if data:
                    st.image(data, width="stretch")
                mark = {True: " ✓", False: " ✗", None: ""}[hit.relevant]
                st.markdown(f"**{hit.rank}. {hit.id}**{mark} — score {hit.score:.4f}")
                st.caption(hit_summary(hit))
    else:
        show_text_hits(result, target)
    if result.metrics:
        relevant = counted(result.relevant_count, "relevant item")
        st.markdown(f"**Metrics** ({relevant}: labelled A and not B)")
        table = pd.DataFrame([{"method": m, **v} for m, v in result.metrics.items()])
        st.dataframe(table[["method", *MEASURES]], hide_index=True)
    stem = Path(str(result.collection.get("name", "search"))).stem
    files = result.files()
    cols = st.columns(len(files))
    for col, (name, data) in zip(cols, files.items(), strict=True):
        kind = name.rsplit(".", 1)[-1]
        col.download_button(f"Results ({kind.upper()})", data, f"{stem}-{name}", MIME[kind])


def settings_widgets(uses_sets: bool) -> tuple:
    """The number of hits and SR's dimension-set settings (disabled without an exclusion
    searched by SR): top, k_items, coverage, magnitude, normalize."""
    c4, c5, c6, c7 = st.columns(4)
    top = option_widget(SearchOptions, "top", "search_top", c4, high=50)
    k_items = option_widget(
        SearchOptions,
        "k_items",
        "search_k_items",
        c5,
        disabled=not uses_sets,
        default=DEFAULT_K_ITEMS,
        high=1000,
    )
    coverage = option_widget(
        SearchOptions,
        "coverage",
        "search_coverage",
        c6,
        disabled=not uses_sets,
        default=DEFAULT_COVERAGE,
        low=0.05,
    )
    magnitude = option_widget(
        SearchOptions, "magnitude", "search_magnitude", c7, disabled=not uses_sets
    )
    normalize = option_widget(
        SearchOptions, "normalize", "search_normalize", disabled=not uses_sets
    )
    return top, k_items, coverage, magnitude, normalize
