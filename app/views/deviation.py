"""How the Semantic deviation page draws a result: metrics, per-item plot and table, the
dataset view of the vocabulary, and the downloads (the result's own files)."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from lexlens.analysis.deviation.flops import FLOPS_LABEL, PAIRS_LABEL
from lexlens.analysis.deviation.result import DeviationResult
from lexlens.analysis.deviation.sets import SetDeviation
from lexlens.analysis.render.deviation_plots import deviation_scatter
from lexlens.analysis.render.plots import png_bytes, wordcloud_image

NOUN = {"captions": "captions", "texts": "texts", "images": "images"}


def render_metrics(result: DeviationResult, part: SetDeviation, kk: int) -> None:
    """A set's metrics, the other denominator's values and what caps Exact@k."""
    noun = NOUN.get(part.kind, part.kind)
    m1, m2, m3, m4, m5 = st.columns(5)
    m1.metric(f"Exact@{kk}", "n/a" if part.exact is None else f"{part.exact:.1%}")
    m2.metric(f"Semantic@{kk}", "n/a" if part.semantic is None else f"{part.semantic:.1%}")
    with_self = part.flops_with_self_pairs
    m3.metric(
        "FLOPs Σⱼ p̄ⱼ²",
        "n/a" if with_self is None else f"{with_self:.3f}",
        help=f"{FLOPS_LABEL}: p̄ⱼ is the share of the {noun} that activate dimension j.",
    )
    m4.metric(
        "FLOPs, no self-pairs",
        "n/a" if part.flops is None else f"{part.flops:.3f}",
        help=f"The mean number of dimensions two different {noun} both activate: {PAIRS_LABEL}.",
    )
    m5.metric("Mean active dims", f"{part.mean_active_dims:.1f}")
    pairs = "n/a" if part.flops is None else f"{part.flops:.3f}"
    st.caption(
        f"{FLOPS_LABEL}: {'n/a' if with_self is None else f'{with_self:.3f}'}; {PAIRS_LABEL}: "
        f"{pairs}."
    )
    if part.exact is None:
        st.caption(f"No {noun[:-1]} has caption tokens to compare with: Exact@k is not defined.")
        return
    other = "active" if result.denominator == "k" else "k"
    st.caption(
        f"With the other denominator ({'min(k, positive terms)' if other == 'active' else 'k'}):"
        f" Exact@{kk} {part.by_denominator[other]['exact_at_k']:.1%}, "
        f"Semantic@{kk} {part.by_denominator[other]['semantic_at_k']:.1%}. "
        f"Static embeddings: {result.f_enc}. Gate k = {result.gate_k}."
    )
    pos = part.positive_terms
    if pos["below_k"]:
        st.info(
            f"**{pos['below_k']} of {part.n_measured} {noun} have fewer than {kk} positive "
            f"terms** (mean {pos['mean']:.1f}, min {pos['min']}, max {pos['max']}). With the "
            f"paper's denominator k, their Exact@{kk} is capped at positive/k: on this set "
            f"Exact@{kk} cannot exceed {pos['cap_exact_at_k']:.3f}. Choose 'min(k, positive "
            "terms)' to compare without the cap."
        )
    else:
        st.caption(f"Every one of the {noun} has at least {kk} positive terms.")
    if part.n_skipped:
        st.warning(
            f"{part.n_skipped} of the {noun} not measured ({part.skipped[0]['reason']}); the "
            "others were. They still count in FLOPs and the vocabulary view: "
            + "; ".join(repr(s["text"][:40]) for s in part.skipped[:5])
        )


def render_items(result: DeviationResult, part: SetDeviation, kk: int) -> None:
    """Per item: Exact@k against Semantic@k, and the table behind it."""
    noun = NOUN.get(part.kind, part.kind)
    one = noun[:-1]
    per = pd.DataFrame([r.to_dict() for r in part.rows])
    if per.empty:
        return
    exact_name, sem_name = f"Exact@{kk}", f"Semantic@{kk}"
    per["top_terms"] = per["top_words"].map(" ".join)
    per["caption_tokens"] = per["caption_tokens"].map(" ".join)
    fig = deviation_scatter([r.to_dict() for r in part.rows], kk, result.denominator, one)
    st.plotly_chart(fig, width="stretch", key=f"dev_scatter_{part.kind}")
    table = per.rename(
        columns={
            "text": one,
            "positive_terms": "positive terms",
            "cap": f"cap on {exact_name}",
            "exact_at_k": exact_name,
            "semantic_at_k": sem_name,
            "top_terms": f"top-{kk} terms",
            "caption_tokens": "caption tokens",
        }
    )
    columns = [
        one,
        "positive terms",
        f"cap on {exact_name}",
        exact_name,
        sem_name,
        f"top-{kk} terms",
        "caption tokens",
    ]
    st.dataframe(table[columns], hide_index=True, width="stretch")
    if len(part.rows) < part.n_measured:
        st.caption(f"Showing {len(part.rows)} of {part.n_measured} {noun}; the means cover all.")


def render_vocabulary(part: SetDeviation) -> bytes | None:
    """The dataset view; returns the cloud's PNG for the downloads."""
    vocab = part.vocabulary
    if vocab is None or not vocab.top_terms:
        return None
    noun = NOUN.get(part.kind, part.kind)
    st.markdown(f"**Dataset view: the vocabulary over all {vocab.n} {noun} (VDR App. D)**")
    st.caption(
        f"Mean weight of each term over the {vocab.n} {noun} (zeros included): the top "
        f"{len(vocab.top_terms)} as a cloud (word pieces joined into the words the {noun} "
        "spell), font size ∝ mean weight. Terms active for at "
        f"least {vocab.lazy_rate:.0%} of the {noun} are flagged *lazy*: always-on dimensions "
        "that signal disentanglement laziness."
    )
    cloud = wordcloud_image(part.cloud_terms)
    st.image(cloud, width="stretch")
    lazy = vocab.lazy_terms
    if lazy:
        st.warning(
            f"{len(lazy)} lazy term(s) (active for ≥ {vocab.lazy_rate:.0%} of {noun}): "
            + ", ".join(f"{t.token} ({t.activation_rate:.0%})" for t in lazy[:30])
            + (" …" if len(lazy) > 30 else "")
        )
    else:
        st.caption(f"No lazy term: none is active for ≥ {vocab.lazy_rate:.0%} of the {noun}.")
    shown = vocab.top_terms[:15]
    fig = go.Figure()
    for t in shown:
        values = vocab.distributions.get(t.token)
        if values is None or values.size == 0:
            continue
        fig.add_trace(
            go.Box(
                y=values,
                name=f"{t.token} ({t.activation_rate:.0%})",
                boxpoints="all" if values.size <= 30 else "outliers",
                jitter=0.3,
                pointpos=0,
                showlegend=False,
            )
        )
    fig.update_layout(
        title=(
            f"Weights of the top {len(shown)} terms where they are active "
            f"(in brackets: share of {noun} where active)"
        ),
        xaxis_title="term (activation rate)",
        yaxis_title="weight where active",
    )
    st.plotly_chart(fig, width="stretch", key=f"dev_box_{part.kind}")
    st.caption(
        f"Each box shows a term's weights over the {noun} where it is active: over all of "
        "them most terms are 0 for most items (a sparse encoder), which would collapse every "
        f"box onto 0. Distributions keep up to {vocab.reservoir} values per term (exact "
        "below that)."
    )
    stats = pd.DataFrame([t.to_dict() for t in vocab.top_terms])[
        ["token", "mean_weight", "activation_rate", "mean_when_active", "max_weight", "lazy"]
    ].rename(
        columns={
            "token": "term",
            "mean_weight": "mean weight",
            "activation_rate": "activation rate",
            "mean_when_active": "mean where active",
            "max_weight": "max weight",
        }
    )
    with st.expander(f"Top {len(stats)} terms by mean weight"):
        st.dataframe(stats, hide_index=True, width="stretch")
    return png_bytes(cloud)


def show_result(result: DeviationResult) -> None:
    """The whole result: a heading, its notes, each set, and the downloads."""
    kk = result.k
    den_text = "k" if result.denominator == "k" else "min(k, positive terms)"
    where = result.input.get("captions") or result.input.get("index")
    st.subheader(f"{where} · {result.encoder} · k = {kk} · denominator {den_text}")
    if result.seconds is not None and "index" in result.input:
        loaded = result.load_seconds or 0.0
        cpu = f", {result.cpu_seconds:.2f} s of CPU" if result.cpu_seconds is not None else ""
        st.caption(
            f"Measured {result.input.get('items', 0):,} stored items in {result.seconds:.2f} s"
            f"{cpu}"
            + (f"; the encoder was loaded first, in {loaded:.1f} s." if loaded >= 0.5 else ".")
        )
    for note in result.notes:
        if "positive terms" not in note and "skipped" not in note:
            st.caption(note)
    if result.flops_captions_images is not None:
        st.metric(
            "FLOPs captions × images",
            f"{result.flops_captions_images:.3f}",
            help=(
                "D2S: (1/(|C||I|)) Σ_c Σ_i s_c⁰·s_i⁰ over every caption × image pair — the "
                "mean number of dimensions a caption query and an image both activate."
            ),
        )
    parts = [p for p in (result.images, result.captions) if p is not None]
    clouds: dict[str, bytes] = {}
    for part in parts:
        if len(parts) > 1:
            title = "Images against their paired captions" if part.kind == "images" else "Captions"
            st.subheader(f"{title} ({part.n})")
        render_metrics(result, part, kk)
        render_items(result, part, kk)
        png = render_vocabulary(part)
        if png:
            clouds[part.kind] = png
    files = result.files()
    st.markdown("**Downloads**")
    columns = st.columns(len(files) + len(clouds))
    for col, (fname, payload) in zip(columns, files.items(), strict=False):
        json_file = fname.endswith(".json")
        col.download_button(
            fname,
            payload,
            fname,
            "application/json" if json_file else "text/csv",
            help="The same document as `lexlens deviation --json`" if json_file else None,
        )
    for col, (kind, png) in zip(columns[len(files) :], clouds.items(), strict=False):
        fname = f"dataset_cloud_{kind}.png"
        col.download_button(fname, png, fname, "image/png")
