"""Text page: a text's top terms, word cloud, and which input token produced each term.

Thin: the numbers are a :class:`~lexlens.analysis.lexical.terms.TermsResult` from the use-case
layer (the same document ``lexlens terms --text … --json`` prints); the page only draws it.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from lexlens.analysis.core.outputs import frame_csv_bytes, json_text
from lexlens.analysis.core.words import Term
from lexlens.analysis.lexical.terms import (
    TEXT_NEEDS,
    TermsOptions,
    TermsResult,
    encode_text,
    terms_of_encoding,
)
from lexlens.analysis.render.plots import (
    cloud_caption,
    cloud_layout,
    png_bytes,
    render_cloud,
    terms_bar_chart,
)
from lexlens.app.runtime import state
from lexlens.app.views.faithfulness import show_provenance_check
from lexlens.app.views.widgets import option_widget, terms_display
from lexlens.models import LexicalEncoding, LexlensError
from lexlens.models.base import check_texts

DEFAULT_TEXT = "a cat sleeping on a book"
LAST = "_text_page_last"  # the last result shown, kept when a later input fails

st.header("Text")
st.caption(
    "Type a text to see the vocabulary terms the encoder gives it. Blue terms are the "
    "input's own tokens (bag of words); orange terms are expansion terms the model added."
)

state.restore_inputs("text")  # a reload, a bookmark or a link: the inputs in the URL's run
state.kept("text_encoder")  # the sidebar choice survives a run that stops before the picker
with st.form("text_form"):
    text = st.text_area("Text", height=100, key=state.kept("text_input", DEFAULT_TEXT))
    side = option_widget(TermsOptions, "side", "text_side")
    st.form_submit_button("Encode", type="primary")
left_opts, right_opts = st.columns([3, 2])
k, merge = terms_display("text", left_opts, right_opts, high=100)


@st.cache_data(show_spinner="Encoding…", max_entries=64)
def encode(_encoder, encoder_key: str, text: str, side: str) -> LexicalEncoding:
    """Cached on (encoder, text, side): display options re-encode nothing."""
    return encode_text(_encoder, text, side=side)


def show(result: TermsResult, merged: bool) -> None:
    """Draw one result: cloud, bars, provenance tables, downloads."""

    rows = result.merged_terms if merged else result.terms
    if not rows:
        st.info("The encoder gave this text no positive term.")
        return
    terms = [Term(r["token"], r["weight"], r["index"]) for r in rows]
    in_input = {r["token"] for r in rows if r["in_input"]}
    layout = cloud_layout(terms)
    cloud = render_cloud(layout, highlight=in_input)
    left, right = st.columns([3, 2])
    left.image(cloud, caption=cloud_caption(layout), width="stretch")
    right.plotly_chart(terms_bar_chart(terms[:25], in_input=in_input), width="stretch")

    table = pd.DataFrame(
        {
            "term": [r["token"] for r in rows],
            "weight": [r["weight"] for r in rows],
            "kind": ["bag of words" if r["in_input"] else "expansion" for r in rows],
            "from input word": [r.get("from_word", r.get("from_unit", "")) for r in rows],
            "pieces": [" ".join(r.get("spelling", r.get("pieces", []))) for r in rows],
        }
    )
    if not table["pieces"].any():
        table = table.drop(columns="pieces")
    st.subheader("Top terms and their provenance")
    st.dataframe(table, hide_index=True, width="stretch")

    st.subheader("What each input word produces")
    st.caption(
        "For each word of the input, the top terms whose max-pooled weight came from one of "
        "its tokens (a word split into pieces counts once)."
    )
    by_unit: dict[str, list[str]] = {}
    for r in rows:
        if "from_unit_index" in r:
            by_unit.setdefault(r.get("from_word") or r["from_unit"], []).append(r["token"])
    st.dataframe(
        pd.DataFrame(
            {
                "input word": list(by_unit),
                "terms it produces": [", ".join(v) for v in by_unit.values()],
            }
        ),
        hide_index=True,
        width="stretch",
    )
    d1, d2, d3 = st.columns(3)
    d1.download_button(
        "Terms (CSV)", frame_csv_bytes(table), "terms.csv", "text/csv", key="text_dl_csv"
    )
    d2.download_button(
        "Terms (JSON)", json_text(result), "terms.json", "application/json", key="text_dl_json"
    )
    d3.download_button(
        "Word cloud (PNG)", png_bytes(cloud), "wordcloud.png", "image/png", key="text_dl_png"
    )


def show_last(reason: str) -> None:
    """After a failed input, keep showing the last result, saying which text it is for."""
    last: TermsResult | None = st.session_state.get(LAST)
    if last is not None:
        st.caption(f"{reason} Below: the last result, for “{last.input.get('text', '')}”.")
        show(last, merge)


# Validate before any model is loaded: an empty text needs no encoder.
try:
    check_texts([text])
except LexlensError as exc:
    st.error(str(exc))
    show_last("Nothing was encoded.")
    st.stop()

encoder = state.encoder_picker("Text encoder", TEXT_NEEDS, key="text_encoder")
if encoder is None:
    st.stop()

try:
    encoding = encode(encoder, f"{encoder.name}|{encoder.source}|{encoder.device}", text, side)
    result = terms_of_encoding(encoder, encoding, top=k, input_info={"text": text, "side": side})
except LexlensError as exc:
    st.error(str(exc))
    show_last("This text could not be encoded.")
    st.stop()

for note in result.notes:  # truncation, special tokens only: what changes how to read it
    st.warning(f"Note: {note}")
st.session_state[LAST] = result
# A new text, tower or encoder makes a new run; the display settings update this one.
state.keep_for_reload(
    "text", "text_", f"terms of “{text[:60]}”", subject=("text_input", "text_side", "text_encoder")
)
show(result, merge)
show_provenance_check(encoder, result, merge, k)
