"""The Query ⊙ Document page's drawing of a
:class:`~lexlens.analysis.lexical.contrib.ContribResult`: the score, the document's whole text
with the words that add to it marked, the words and every token; a second document beside
the first when one is given (as the Evaluation page sends a failure's two items)."""

from __future__ import annotations

import pandas as pd
import plotly.express as px
import streamlit as st

from lexlens.analysis.core.outputs import json_text, records_csv_bytes
from lexlens.analysis.lexical.contrib import ContribResult
from lexlens.analysis.lexical.highlight import score_spans
from lexlens.app.views.highlight import legend, show_text

#: Where a page that sends the page its inputs puts them (query, doc, doc2, labels): read
#: and removed before the widgets are drawn.
PREFILL = "contrib_prefill"


def apply_prefill() -> None:
    """Give the widgets the inputs another page sent (texts on both sides, a second
    document when there is one)."""
    sent = st.session_state.pop(PREFILL, None)
    if not isinstance(sent, dict):
        return
    st.session_state["contrib_q_kind"] = st.session_state["contrib_d_kind"] = "Text"
    st.session_state["contrib_q_text"] = str(sent.get("query") or "")
    st.session_state["contrib_d_text"] = str(sent.get("doc") or "")
    st.session_state["contrib_d2_text"] = str(sent.get("doc2") or "")
    st.session_state["contrib_second"] = bool(sent.get("doc2"))
    labels = tuple(sent.get("labels") or ("", ""))
    st.session_state["contrib_labels"] = {sent.get("doc"): labels[0], sent.get("doc2"): labels[1]}


def _words(result: ContribResult) -> pd.DataFrame:
    words = pd.DataFrame(result.contributions_words).rename(columns={"token": "word"})
    if "pieces" in words:
        words["pieces"] = [" ".join(p) if isinstance(p, list) else "" for p in words["pieces"]]
    return words.drop(columns="index", errors="ignore")


def show_one(where, result: ContribResult, title: str, text: str | None, query: str, vocab):
    """One document's score, its marked text and its words (summing to the score)."""
    where.markdown(f"**{title}**")
    where.metric("Score", f"{result.score:.4f}", help=f"{len(result.contributions)} shared terms")
    if text:
        show_text(where, text, score_spans(text, query or "", result.contributions_words, vocab))
    if not result.contributions:
        where.info("The query and the document share no active term: the score is 0.")
        return
    words = _words(result)
    where.dataframe(words, hide_index=True, width="stretch")
    where.caption(
        f"Sum of contributions: {words['contribution'].sum():.6f} = score {result.score:.6f}"
    )


def show_pair(first: ContribResult, second: ContribResult, texts, query: str, vocab) -> None:
    """Two documents for one query side by side, and the difference of their scores."""
    sent = st.session_state.get("contrib_labels") or {}  # names of the texts another page sent
    st.html(legend(["match"]))
    left, right = st.columns(2)
    show_one(left, first, f"Document {sent.get(texts[0], '')}".strip(), texts[0], query, vocab)
    show_one(
        right, second, f"Second document {sent.get(texts[1], '')}".strip(), texts[1], query, vocab
    )
    st.caption(f"Score difference (document − second document): {first.score - second.score:+.4f}")


def show_single(result: ContribResult, text: str | None, query: str, vocab) -> None:
    """One document: the score, its marked text, the words as a chart and a table, every
    token, downloads."""
    st.metric("Score", f"{result.score:.4f}", help=f"{len(result.contributions)} shared terms")
    if text:
        st.html(legend(["match"]))
        show_text(st, text, score_spans(text, query or "", result.contributions_words, vocab))
    if not result.contributions:
        st.info("The query and the document share no active term: the score is 0.")
        return
    words = _words(result)
    fig = px.bar(words.head(30)[::-1], x="contribution", y="word", orientation="h")
    fig.update_layout(
        height=max(240, 22 * min(30, len(words)) + 60), margin=dict(l=10, r=10, t=10, b=10)
    )
    st.plotly_chart(fig, width="stretch")
    st.caption(
        "Word pieces are joined into the words the inputs spell; a word's contribution is the "
        "sum of its pieces'. Each token's own row is in the table below."
    )
    st.dataframe(words, hide_index=True, width="stretch")
    st.caption(
        f"Sum of contributions: {words['contribution'].sum():.6f} = score {result.score:.6f}"
    )
    table = pd.DataFrame([r.to_dict() for r in result.contributions]).drop(columns="index")
    with st.expander(f"Every token ({len(table)})"):
        st.dataframe(table, hide_index=True, width="stretch")
    d1, d2 = st.columns(2)
    d1.download_button(
        "Contributions (JSON)", json_text(result), "contributions.json", "application/json"
    )
    d2.download_button(
        "Contributions (CSV)",
        records_csv_bytes([r.to_dict() for r in result.contributions]),
        "contributions.csv",
        "text/csv",
    )
