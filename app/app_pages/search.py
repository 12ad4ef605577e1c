"""Search & exclusion page: search a collection; "A but not B" by dimension sets."""

from __future__ import annotations

import io
import json
import tempfile
from pathlib import Path

import pandas as pd
import streamlit as st

from lexlens.analysis.contrib import gate
from lexlens.analysis.search import (
    SEARCH_NEEDS,
    average_embedding_query,
    encode_collection,
    exclusion_search,
    read_labelled_csv,
    search,
)
from lexlens.app.state import ROOT, content_key, encoder_picker
from lexlens.models import LexlensError

st.header("Search & exclusion")
st.caption(
    "Search your collection; with an exclusion, rank by the dimensions of A that B does not "
    "use (SR: D = D1 \\ D2 from the top items of each query), or by a baseline."
)

encoder = encoder_picker("Text encoder", SEARCH_NEEDS, key="search_encoder")
if encoder is None:
    st.stop()

upload = st.file_uploader("Collection (.csv with a text column, or .txt)", type=["csv", "txt"])
source = upload.getvalue() if upload else (ROOT / "data" / "collection.csv").read_bytes()
suffix = Path(upload.name).suffix if upload else ".csv"
st.caption(f"Collection: {upload.name if upload else 'sample data/collection.csv'}")

c1, c2, c3 = st.columns(3)
query = c1.text_input("Find (A)", "dog", key="search_query")
exclude = c2.text_input("But not (B) — optional", "beach", key="search_exclude")
method = c3.selectbox("Exclusion method", ["sr", "avg", "text"], key="search_method")
c4, c5, c6 = st.columns(3)
top = c4.slider("Results", 1, 50, 10, key="search_top")
k_items = c5.slider("Items per dimension set (K)", 1, 50, 10, key="search_k_items")
coverage = c6.slider("Magnitude coverage", 0.05, 1.0, 0.5, key="search_coverage")


@st.cache_data(show_spinner="Encoding the collection…", max_entries=8)
def build(_encoder, spec: str, key: str, data: bytes, suffix: str):
    with tempfile.NamedTemporaryFile(suffix=suffix) as handle:
        handle.write(data)
        handle.flush()
        ids, texts, labels = read_labelled_csv(handle.name)
    bar = st.progress(0.0, "Encoding the collection")
    collection = encode_collection(_encoder, texts, ids=ids, labels=labels, progress=bar.progress)
    bar.empty()
    return collection


try:
    collection = build(encoder, encoder.source or encoder.name, content_key(source), source, suffix)
    q = gate(encoder.encode_texts([query])[0], encoder.vocab, 768)
    if exclude.strip() and method == "sr":
        b = gate(encoder.encode_texts([exclude])[0], encoder.vocab, 768)
        result = exclusion_search(
            collection, q, b, encoder.vocab, top=top, k_items=k_items, coverage=coverage
        )
        sets = result.to_dict(encoder.vocab)
        st.write(
            f"**D1** ({query}): {', '.join(sets['include_terms'][:20])}  \n"
            f"**D2** ({exclude}): {', '.join(sets['exclude_terms'][:20])}  \n"
            f"**D = D1 \\ D2**: {', '.join(sets['kept_terms'][:20]) or '(empty)'}"
        )
        hits = result.hits
    elif exclude.strip():
        if method == "avg":
            b = gate(encoder.encode_texts([exclude])[0], encoder.vocab, 768)
            q = average_embedding_query(q, b)
        else:
            q = gate(encoder.encode_texts([f"{query} without {exclude}"])[0], encoder.vocab, 768)
        hits = search(collection, q, encoder.vocab, top=top)
    else:
        hits = search(collection, q, encoder.vocab, top=top)
except LexlensError as exc:
    st.error(str(exc))
    st.stop()

table = pd.DataFrame(
    [
        {
            "id": h.id,
            "score": h.score,
            "text": h.text,
            "top terms": ", ".join(c["token"] for c in h.top_contributions),
        }
        for h in hits
    ]
)
st.dataframe(table, hide_index=True, width="stretch")
buf = io.StringIO()
table.to_csv(buf, index=False)
st.download_button("Results (CSV)", buf.getvalue(), "results.csv", "text/csv")
st.download_button(
    "Results (JSON)",
    json.dumps({"results": [h.to_dict() for h in hits]}, indent=2),
    "results.json",
    "application/json",
)
