"""Text page: per-token weights, word cloud, and which input token produced each term."""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from lexlens.analysis.plots import png_bytes, terms_bar_chart, wordcloud_image
from lexlens.analysis.terms import TEXT_NEEDS, Term, term_rows
from lexlens.app.state import encoder_picker
from lexlens.models import LexicalEncoding, LexlensError

st.header("Text")
st.caption(
    "Type a text to see the vocabulary terms the encoder gives it. Blue terms are the "
    "input's own tokens (bag of words); orange terms are expansion terms the model added."
)

encoder = encoder_picker("Text encoder", TEXT_NEEDS, key="text_encoder")
if encoder is None:
    st.stop()

with st.form("text_form"):
    text = st.text_area("Text", value="a cat sleeping on a book", height=100, key="text_input")
    cols = st.columns(3)
    k = cols[0].slider("Top terms", 5, 100, 30, key="text_k")
    merge = cols[1].checkbox("Merge word pieces (gi ##raf ##fe → giraffe)", key="text_merge")
    side = cols[2].radio("Tower", ["query", "document"], horizontal=True, key="text_side")
    st.form_submit_button("Encode", type="primary")


@st.cache_data(show_spinner="Encoding…", max_entries=64)
def encode(_encoder, spec: str, device: str, text: str, side: str) -> LexicalEncoding:
    """Cached on (encoder, text, side): other display options re-encode nothing."""
    return _encoder.encode_texts([text], side=side)[0]


try:
    encoding = encode(encoder, encoder.source or encoder.name, encoder.device, text, side)
except LexlensError as exc:
    st.error(str(exc))
    st.stop()

if encoding.truncated:
    st.warning(
        f"The text is longer than the encoder's limit: only its first {encoder.max_length} "
        "tokens were encoded."
    )

rows = term_rows(encoding, encoder.vocab, k, merge_pieces=merge, words=encoder.known_words)
if not rows:
    st.info("The encoder gave this text no positive term.")
    st.stop()
terms = [Term(r["token"], r["weight"], r["index"]) for r in rows]
in_input = {r["token"] for r in rows if r["in_input"]}

left, right = st.columns([3, 2])
cloud = wordcloud_image(terms, highlight=in_input)
left.image(cloud, caption="Word cloud: font size ∝ weight", width="stretch")
right.plotly_chart(terms_bar_chart(terms[:25], in_input=in_input), width="stretch")

table = pd.DataFrame(rows).rename(
    columns={"token": "term", "from_unit": "from input token", "in_input": "in input"}
)
table["kind"] = ["bag of words" if r["in_input"] else "expansion" for r in rows]
st.subheader("Top terms and their provenance")
st.dataframe(
    table[[c for c in ["term", "weight", "kind", "from input token"] if c in table.columns]],
    hide_index=True,
    width="stretch",
)

st.subheader("What each input token produces")
st.caption("For each input token, the top terms whose max-pooled weight came from its row.")
by_unit: dict[str, list[str]] = {}
for r in rows:
    if "from_unit_index" in r:
        label = f"{r['from_unit_index']}: {r['from_unit']}"
        by_unit.setdefault(label, []).append(r["token"])
st.dataframe(
    pd.DataFrame(
        {
            "input token": list(by_unit),
            "terms it produces": [", ".join(v) for v in by_unit.values()],
        }
    ),
    hide_index=True,
    width="stretch",
)

d1, d2, d3 = st.columns(3)
d1.download_button("Terms (CSV)", table.to_csv(index=False), "terms.csv", "text/csv")
d2.download_button(
    "Terms (JSON)",
    json.dumps({"encoder": encoder.name, "text": text, "terms": rows}, indent=2),
    "terms.json",
    "application/json",
)
d3.download_button("Word cloud (PNG)", png_bytes(cloud), "wordcloud.png", "image/png")
