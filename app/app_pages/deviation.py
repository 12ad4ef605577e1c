"""Semantic deviation page: Exact@k, Semantic@k, FLOPs and the dataset-level term view."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.express as px
import streamlit as st

from lexlens.analysis.cli.common import read_corpus
from lexlens.analysis.cli.deviation import static_embeddings_for
from lexlens.analysis.deviation import DEVIATION_NEEDS, dataset_deviation, mean_term_weights
from lexlens.analysis.plots import png_bytes, wordcloud_image
from lexlens.analysis.terms import top_terms
from lexlens.app.state import ROOT, content_key, encoder_picker
from lexlens.models import LexlensError

st.header("Semantic deviation")
st.caption(
    "How far do a caption's top terms stray from its own words? Exact@k: share of the k "
    "top terms that are caption tokens. Semantic@k: their mean best cosine to a caption "
    "token in the encoder's static word-embedding space. FLOPs: expected co-activated "
    "dimensions of two items (long posting lists when high)."
)

encoder = encoder_picker("Text encoder", DEVIATION_NEEDS, key="dev_encoder")
if encoder is None:
    st.stop()
upload = st.file_uploader(
    "Captions (.txt one per line, or .csv with a text column)", type=["txt", "csv"]
)
data = upload.getvalue() if upload else (ROOT / "data" / "captions.txt").read_bytes()
suffix = Path(upload.name).suffix if upload else ".txt"
k = st.slider("k", 1, 100, 20, key="dev_k")


@st.cache_data(show_spinner="Encoding captions…", max_entries=8)
def encode(_encoder, spec: str, key: str, data: bytes, suffix: str):
    with tempfile.NamedTemporaryFile(suffix=suffix) as handle:
        handle.write(data)
        handle.flush()
        texts = read_corpus(handle.name)
    bar = st.progress(0.0, "Encoding captions")
    encodings = []
    for start in range(0, len(texts), 64):
        encodings += _encoder.encode_texts(texts[start : start + 64], keep_units=False)
        bar.progress(min(1.0, (start + 64) / len(texts)))
    bar.empty()
    return texts, encodings


try:
    texts, encodings = encode(
        encoder, encoder.source or encoder.name, content_key(data), data, suffix
    )
    result = dataset_deviation(
        encodings, texts, encoder.vocab, static_embeddings_for(encoder, None), k
    )
except LexlensError as exc:
    st.error(str(exc))
    st.stop()

m1, m2, m3, m4 = st.columns(4)
m1.metric(f"Exact@{k}", f"{result['exact_at_k']:.1%}")
m2.metric(f"Semantic@{k}", f"{result['semantic_at_k']:.1%}")
m3.metric("FLOPs", f"{result['flops']:.2f}")
m4.metric("Mean active dims", f"{result['mean_active_dims']:.1f}")
per = pd.DataFrame(result["per_caption"])
per["top_terms"] = per["top_terms"].map(" ".join)
per["caption_tokens"] = per["caption_tokens"].map(" ".join)
st.plotly_chart(
    px.scatter(per, x="exact_at_k", y="semantic_at_k", hover_data=["text"]), width="stretch"
)
st.dataframe(per, hide_index=True, width="stretch")

st.subheader("Dataset view: mean weight of each term")
st.caption("Terms high for nearly every input suggest 'disentanglement laziness' (VDR App. D).")
mean = mean_term_weights(encodings)
top = top_terms(mean, encoder.vocab, 100)
cloud = wordcloud_image(top)
st.image(cloud, width="stretch")
weights = np.stack([e.weights for e in encodings])
box = pd.DataFrame({t.token: weights[:, t.index] for t in top[:15]}).melt(
    var_name="term", value_name="weight"
)
st.plotly_chart(px.box(box, x="term", y="weight"), width="stretch")
st.download_button(
    "Metrics (JSON)", json.dumps(result, indent=2), "deviation.json", "application/json"
)
st.download_button("Mean-term cloud (PNG)", png_bytes(cloud), "dataset_cloud.png", "image/png")
