"""Query ⊙ Document page: which terms make a score, summing exactly to it."""

from __future__ import annotations

import json

import pandas as pd
import plotly.express as px
import streamlit as st

from lexlens.analysis.contrib import CONTRIB_NEEDS, bag_of_words, contributions, gate
from lexlens.app.state import encoder_picker
from lexlens.models import LexlensError

st.header("Query ⊙ Document")
st.caption(
    "sim(q, d) = E_q · E_d with E(x) = V(x) ⊙ G(x) (top-k dimensions and the input's own "
    "tokens). Each shared term contributes q_t · d_t; the contributions sum to the score."
)

encoder = encoder_picker("Query encoder", CONTRIB_NEEDS, key="contrib_encoder")
if encoder is None:
    st.stop()

with st.form("contrib_form"):
    query = st.text_input("Query", "cat on a book", key="contrib_query")
    doc = st.text_area("Document", "a kitten sleeping on an old novel", key="contrib_doc")
    c1, c2 = st.columns(2)
    mode = c1.radio(
        "Query mode",
        ["parametric", "bow"],
        horizontal=True,
        help="bow: the query is the binary bag of its own tokens (VDR's nonparametric mode)",
        key="contrib_mode",
    )
    k = c2.number_input("Gate k (-1 = all, 0 = own tokens)", -1, 30522, 768, key="contrib_k")
    st.form_submit_button("Score", type="primary")

try:
    q_enc = encoder.encode_texts([query], side="query")[0]
    d_enc = encoder.encode_texts([doc], side="document")[0]
except LexlensError as exc:
    st.error(str(exc))
    st.stop()

q_vec = bag_of_words(q_enc, encoder.vocab) if mode == "bow" else gate(q_enc, encoder.vocab, int(k))
score, rows = contributions(q_vec, gate(d_enc, encoder.vocab, int(k)), encoder.vocab)
st.metric("Score", f"{score:.4f}", help=f"{len(rows)} shared terms")
if not rows:
    st.info("The query and the document share no active term: the score is 0.")
    st.stop()
table = pd.DataFrame([r.to_dict() for r in rows]).drop(columns="index")
fig = px.bar(table.head(30)[::-1], x="contribution", y="token", orientation="h")
fig.update_layout(
    height=max(240, 22 * min(30, len(rows)) + 60), margin=dict(l=10, r=10, t=10, b=10)
)
st.plotly_chart(fig, width="stretch")
st.dataframe(table, hide_index=True, width="stretch")
st.caption(f"Sum of contributions: {table['contribution'].sum():.6f} = score {score:.6f}")
st.download_button(
    "Contributions (JSON)",
    json.dumps({"score": score, "contributions": [r.to_dict() for r in rows]}, indent=2),
    "contributions.json",
    "application/json",
)
