"""Drawing shared by the pages: option widgets, word clouds and term tables (nothing computed
here)."""

from __future__ import annotations

from typing import Any

import streamlit as st

from lexlens.analysis.core.options import Options
from lexlens.analysis.core.words import Term
from lexlens.analysis.lexical.terms import TermsOptions
from lexlens.analysis.render.plots import cloud_caption, cloud_layout, render_cloud
from lexlens.app.runtime.state import kept


def option_widget(
    options_type: type[Options], name: str, key: str, where: Any = st, **display: Any
) -> Any:
    """The page widget of one declared option: its label, limits, choices and help come from
    the declaration (``display`` may narrow a slider's range or rename its label for this
    page: ``high=100``, ``label=…``); kept across page switches under ``key``. Returns the
    widget's value (checked later with the rest, by ``options_type.of``); ``disabled=True``
    shows it greyed out where the option does not apply."""
    declared = options_type.option(name)
    spec = declared.spec
    label = display.get("label", declared.label)
    low, high = display.get("low", spec.low), display.get("high", spec.high)
    default = display.get("default", declared.default)
    kind = display.get("widget", spec.widget)
    common = {
        "key": kept(key, default),
        "help": spec.help,
        "disabled": display.get("disabled", False),
    }
    if declared.kind is bool:
        return where.toggle(label, **common)
    if spec.choices is not None:
        options = list(spec.choices)
        fmt = display.get("format_func", str)
        if kind == "select":
            return where.selectbox(label, options, format_func=fmt, **common)
        return where.radio(label, options, horizontal=True, format_func=fmt, **common)
    if declared.kind in (int, float):
        cast = declared.kind
        bounds = {
            "min_value": None if low is None else cast(low),
            "max_value": None if high is None else cast(high),
        }
        step = display.get("step", spec.step)
        if step is not None:
            bounds["step"] = cast(step)
        if kind == "slider" and low is not None and high is not None:
            return where.slider(label, **bounds, **common)
        return where.number_input(label, **bounds, **common)
    return where.text_input(label, **common)


#: A merge of word pieces as each kind of input shows it: the evidence that the pieces are one
#: word is the input's own words for a text, the words the encoder knows it expresses for an
#: image (the one rule of :func:`lexlens.analysis.core.words.merge_word_pieces`).
MERGE_EXAMPLES = {
    "text": "gi ##raf ##fe → giraffe.",
    "image": "es ##press ##o → espresso, for words the encoder is known to spell.",
}


def terms_display(kind: str, top_at: Any, merge_at: Any, *, high: int) -> tuple[int, bool]:
    """The display settings of the terms of a ``kind`` input ("text" or "image"), kept under
    ``{kind}_k`` and ``{kind}_merge``: how many top terms (the declared ``top``, from 5 to
    ``high``) and whether word pieces are merged into words."""
    top = option_widget(TermsOptions, "top", f"{kind}_k", top_at, low=5, high=high)
    merge = merge_at.toggle(
        "Merge word pieces into words",
        key=kept(f"{kind}_merge", True),
        help=f"{MERGE_EXAMPLES[kind]} Off: the raw vocabulary tokens. Every JSON download holds "
        "both views.",
    )
    return top, merge


@st.cache_data(show_spinner=False, max_entries=256)
def cloud_picture(terms: tuple[tuple[str, float], ...], highlight: frozenset[str] = frozenset()):
    """The cloud picture (1600×900) of ``(token, weight)`` pairs and its caption, cached."""

    layout = cloud_layout([Term(t, w, i) for i, (t, w) in enumerate(terms)])
    return render_cloud(layout, highlight=set(highlight)), cloud_caption(layout, "Word cloud")


def show_cloud(where, rows: list[dict], caption: str, highlight: frozenset[str] = frozenset()):
    """Draw the cloud of term rows (``token``, ``weight``) with ``caption``; returns the picture."""
    picture, how = cloud_picture(tuple((r["token"], r["weight"]) for r in rows), highlight)
    where.image(picture, caption=f"{caption} — {how[len('Word cloud: ') :]}", width="stretch")
    return picture


def term_table(rows: list[dict]):
    """A table of term rows: term and weight, and the pieces of merged words when any."""
    import pandas as pd  # heavy: pandas loads on first use

    table = pd.DataFrame(
        {"term": [r["token"] for r in rows], "weight": [r["weight"] for r in rows]}
    )
    if any("pieces" in r for r in rows):
        table["pieces"] = [" ".join(r.get("spelling", r.get("pieces", []))) for r in rows]
    return table
