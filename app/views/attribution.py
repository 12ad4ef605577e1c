"""The Attribution page's drawing of an attribution report (every number is the report's)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from lexlens.analysis.attribution import display
from lexlens.analysis.attribution.report import AttributionReport
from lexlens.analysis.attribution.topics import DEFAULT_PER_TEXT, code_topic, topic_sizes
from lexlens.analysis.core.options import Options
from lexlens.analysis.render.attribution_plots import attribution_heatmap, series_bars
from lexlens.analysis.render.plots import cloud_caption, cloud_layout, render_cloud
from lexlens.app.runtime.state import kept

MIME = {".html": "text/html", ".json": "application/json", ".csv": "text/csv"}


def optional_choice(
    options_type: type[Options],
    name: str,
    key: str,
    where: Any,
    choices: Sequence[int],
    none: str,
) -> int | None:
    """A list widget of an option that may be none (IG's auto steps, the encoder's own M):
    the label and help are the declaration's, ``choices`` the page's numbers within its
    limits, and ``none`` names the empty choice (first, and the declared default)."""
    declared = options_type.option(name)
    low, high = declared.spec.low, declared.spec.high
    shown = [c for c in choices if (low is None or c >= low) and (high is None or c <= high)]
    if key in st.session_state and st.session_state[key] is None:
        # a selectbox given None in session state shows no choice at all (a restored run's
        # inputs, or a kept value): without it, the widget takes its first choice, None
        del st.session_state[key]
    return where.selectbox(
        declared.label,
        [None, *shown],
        format_func=lambda c: none if c is None else str(c),
        key=kept(key),
        help=declared.spec.help,
    )


def show_text(a, key: str) -> None:
    """Heatmap, completeness table and one sub-vector against GlobalT / RandT."""
    st.subheader("Attribution per sub-vector")
    heatmap = attribution_heatmap(a.attributions, a.words, display.subvector_labels(a))
    st.plotly_chart(heatmap, width="stretch", key="attr_heatmap")

    table = display.completeness_table(a)
    st.subheader("Completeness")
    st.caption(
        "Σ attributions should equal F(x) − F(x′); **delta** is the gap. "
        f"{a.steps} quadrature nodes ({a.method}); largest |delta| / tolerance scale here: "
        f"{float(table['delta / tolerance scale'].max()):.2%}. The tolerance scale is "
        "max(|F(x) − F(x′)|, its mean over sub-vectors): a sub-vector whose own gap is near 0 "
        "is judged against the mean, so its relative delta alone can look large."
    )
    percent = st.column_config.NumberColumn(format="percent")
    st.dataframe(
        table,
        hide_index=True,
        width="stretch",
        column_config={"relative delta": percent, "delta / tolerance scale": percent},
    )

    st.subheader("One sub-vector against GlobalT and RandT")
    sv = st.selectbox("Sub-vector", a.subvectors, key=kept(f"attr_sv_{key}", a.subvectors[0]))
    st.caption(
        "Each series is scaled to its own largest |value| (GlobalT attributes all M sub-vectors "
        "at once, so its raw values are about M times larger); hover for the raw value."
    )
    st.plotly_chart(
        series_bars(a.words, display.comparison_series(a, sv)), width="stretch", key="attr_bars"
    )


def show_topic(res, key: str) -> None:
    """RepMoT's topic view: the texts of the run that share a code, and the words deciding it."""
    st.subheader("Topic of a code")
    st.caption(
        "Texts whose sub-vector is quantised to the same code share a topic (RepMoT, Figure 1). "
        f"The cloud sums, over those texts, each one's top {DEFAULT_PER_TEXT} positively "
        "attributed words for that sub-vector (punctuation left out)."
    )
    c1, c2 = st.columns(2)
    sv = c1.selectbox("Topic sub-vector", range(res.m), key=kept(f"attr_tsv_{key}", 0))
    sizes = dict(topic_sizes(res, sv))
    code = c2.selectbox(
        "Code",
        list(sizes),
        format_func=lambda c: f"{c} ({sizes[c]} texts)",
        key=kept(f"attr_code_{key}_{sv}", next(iter(sizes))),
    )
    topic = code_topic(res, sv, code)
    layout = cloud_layout(topic.cloud_terms(), width=800, height=450)
    left, right = st.columns([3, 2])
    left.image(render_cloud(layout), caption=cloud_caption(layout, "Topic cloud"))
    words = [", ".join(w for w, _ in row) for row in topic.per_text]
    right.dataframe(
        pd.DataFrame({"text": topic.texts, "top words": words}), hide_index=True, key="attr_topic"
    )


def show_mot(report: AttributionReport) -> None:
    """The masking evaluation's table and tests."""
    mot = report.mot
    shown, tests = display.display_tables(mot)
    st.subheader("Masking evaluation (MoT)")
    st.caption(
        f"Mean ‖d̂ᵢ − fᵢ(mask(d))‖² after keeping the top {mot.settings['keep']:.0%} of each "
        "text's words (punctuation never kept) by each ranking and replacing the others with "
        "[UNK] (lower is better; rows in parentheses are references: nothing masked, "
        f"everything masked). {mot.settings['n_docs']} texts, M = {report.attribution.m}."
    )
    st.dataframe(shown, hide_index=True, width="stretch", key="attr_mot_table")
    st.caption(
        "MoT against each baseline: two-sided Wilcoxon p per text, q = Benjamini–Hochberg "
        "over the table, and the share of texts where MoT's error is lower."
    )
    st.dataframe(tests, hide_index=True, width="stretch", key="attr_mot_tests")
    for note in mot.notes:
        st.info(note)


def show_downloads(files: dict[str, bytes]) -> None:
    """The report's files as downloads (the same files ``lexlens report --out`` writes)."""
    st.subheader("Download the report")
    main = [n for n in ("report.html", "report.json", "attributions.csv") if n in files]
    extra = [n for n in files if n not in main]
    for names, width in ((main, len(main)), (extra, min(4, len(extra)))):
        cols = st.columns(width) if names else []
        for i, name in enumerate(names):
            cols[i % width].download_button(
                name,
                files[name],
                file_name=name,
                mime=MIME[Path(name).suffix],
                key=f"attr_dl_{name}",
            )
