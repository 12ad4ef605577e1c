"""The Evaluation page's drawing of failures, blame and downloads (numbers: the result's)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from lexlens.analysis.benchmark.evaluation_result import (
    BLAME_COLUMNS,
    BenchmarkEvaluationResult,
    blame_row,
)
from lexlens.analysis.benchmark.explain import Failure, ItemExplanation
from lexlens.app.runtime.state import kept
from lexlens.app.views.thumbnails import item_thumbnail

MIME = {"json": "application/json", "csv": "text/csv", "trec": "text/plain", "html": "text/html"}


def _item(col, item: ItemExplanation | None, title: str, absent: str, index) -> None:
    col.markdown(f"**{title}**")
    if item is None:
        col.caption(absent)
        return
    where = "not retrieved" if item.rank is None else f"rank {item.rank}"
    col.caption(f"{item.id} — {where}, score {item.score:.4f}")
    if item.image:
        picture = item_thumbnail(index, {"image": item.image})
        if picture is not None:
            col.image(picture, width=220)
    if item.text:
        col.text(item.text[:300])
    if not item.contributions and not item.other_terms:
        col.caption("no term of the query is in this item (q·d = 0)")
        return
    rows = [{"word": c["token"], "q·d": c["contribution"],
             "pieces": " ".join(c.get("pieces", []))} for c in item.contributions]  # fmt: skip
    frame = pd.DataFrame(rows)
    if not frame.empty and not frame["pieces"].any():
        frame = frame.drop(columns="pieces")
    col.dataframe(frame, hide_index=True, width="stretch")
    if item.other_terms:
        col.caption(f"{item.other_terms} more terms, {item.other_contribution:+.4f} in all")


def show_failure(failure: Failure, index) -> None:
    """One failing query: the item ranked first and the best relevant one side by side, and
    the words whose contribution difference makes up the score gap."""
    if failure.note:
        st.info(failure.note)
    left, right = st.columns(2)
    _item(left, failure.nonrelevant, "Ranked first, not relevant",
          "no non-relevant item of the collection is ranked", index)  # fmt: skip
    _item(right, failure.relevant, "Best relevant", "none in the collection", index)
    if failure.decisive:
        st.markdown(f"**Decisive words** — they make up the score gap of {failure.gap:.4f}")
        st.dataframe(pd.DataFrame(failure.decisive), hide_index=True, width="stretch")


def show_blame(result: BenchmarkEvaluationResult) -> None:
    """The words to blame across the benchmark, and the queries behind a chosen word."""
    st.subheader("Words to blame")
    if not result.blame:
        st.caption(
            "No word put a wrong item first, and no query's top word is missing from its relevant item."
        )
        return
    st.caption(
        "pushed: failures where the word helped put a non-relevant item above the best "
        "relevant one; amount: its summed contribution difference there; mismatch: queries "
        "whose top word it is and whose relevant item lacks it (as in blame.csv)"
    )
    shown = [c for c in BLAME_COLUMNS if not c.endswith("_queries")]
    table = pd.DataFrame([blame_row(b) for b in result.blame], columns=list(BLAME_COLUMNS))
    st.dataframe(table[shown], hide_index=True, width="stretch", key="eval_blame")
    words = [b["word"] for b in result.blame]
    word = st.selectbox("Queries behind a word", words, key=kept("eval_blame_word", words[0]))
    chosen = next(b for b in result.blame if b["word"] == word)
    st.caption(
        f"Pushed a wrong item up in: {', '.join(chosen['pushed_queries']) or 'none'}; "
        f"missing from the relevant item of: {', '.join(chosen['mismatch_queries']) or 'none'}"
    )


def show_downloads(result: BenchmarkEvaluationResult) -> None:
    """The result's files: JSON, CSV tables, the TREC run and an HTML report."""
    files = result.files()
    cols = st.columns(len(files))
    for col, (name, data) in zip(cols, files.items(), strict=True):
        col.download_button(name, data, name, MIME[name.rsplit(".", 1)[-1]], key=f"eval_dl_{name}")
