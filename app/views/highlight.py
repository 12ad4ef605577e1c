"""Drawing a text with its marked words (spans from
:func:`lexlens.analysis.lexical.highlight.highlight_spans`): every character of the text is
HTML-escaped, only the marks are tags. A long text shows a preview cut at a word with "…"
and the whole text, marked the same way, in an expander."""

from __future__ import annotations

import html
from collections.abc import Sequence

import streamlit as st

from lexlens.analysis.lexical.highlight import Span, preview

#: The colour of each side's marks (background) and the words they mean.
COLOURS = {
    "nonrelevant": ("#ffc9a8", "favours the wrong item"),
    "relevant": ("#b2f2bb", "favours the relevant item"),
    "match": ("#ffe8a3", "adds to the score"),
    "": ("transparent", "query word"),
}


def highlighted_html(text: str, spans: Sequence[Span], end: int | None = None) -> str:
    """``text[:end]`` as escaped HTML with each span marked (its side's colour; a query word
    underlined), in a block that keeps the text's line breaks."""
    end = len(text) if end is None else end
    out, at = [], 0
    for span in spans:
        if span.start < at or span.end > end:
            continue
        colour, meaning = COLOURS.get(span.side, COLOURS[""])
        style = f"background:{colour};padding:0 1px;border-radius:2px"
        if span.query:
            style += ";text-decoration:underline;font-weight:600"
            meaning = "query word" + ("" if not span.side else f", {meaning}")
        out.append(html.escape(text[at : span.start]))
        out.append(
            f'<mark style="{style}" title="{html.escape(meaning)}: {html.escape(span.term)}">'
            f"{html.escape(text[span.start : span.end])}</mark>"
        )
        at = span.end
    out.append(html.escape(text[at:end]))
    return '<div style="white-space:pre-wrap;line-height:1.5">' + "".join(out) + "</div>"


def legend(sides: Sequence[str]) -> str:
    """A one-line key to the marks of ``sides`` (and query words)."""
    parts = [
        f'<mark style="background:{COLOURS[s][0]}">{html.escape(COLOURS[s][1])}</mark>'
        for s in sides
    ]
    parts.append('<span style="text-decoration:underline;font-weight:600">query word</span>')
    return '<div style="font-size:0.85em">' + " · ".join(parts) + "</div>"


def show_text(where, text: str, spans: Sequence[Span], label: str = "Whole text") -> None:
    """The text marked: whole when short, else a preview cut at a word with "…" and the
    whole text in an expander."""
    if not text:
        return
    shown, cut = preview(text)
    if not cut:
        where.html(highlighted_html(text, spans))
        return
    end = len(shown) - 1  # without the "…"
    where.html(highlighted_html(text, spans, end)[: -len("</div>")] + "…</div>")
    with where.expander(f"{label} ({len(text):,} characters)"):
        st.html(highlighted_html(text, spans))
