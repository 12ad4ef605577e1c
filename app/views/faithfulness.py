"""Each page's faithfulness section: the explanation it shows, tested by running the model
on the edited input against a seeded random baseline (every number from
:mod:`lexlens.analysis.faithfulness`; drawing only)."""

from __future__ import annotations

import io
from typing import Any

import pandas as pd
import streamlit as st

from lexlens.analysis.attribution.ig_curves import ig_faithfulness
from lexlens.analysis.core.counts import counted
from lexlens.analysis.core.curves import DeletionCurve
from lexlens.analysis.faithfulness.benchmark import FailuresFaithfulness as Found
from lexlens.analysis.faithfulness.benchmark import failures_faithfulness
from lexlens.analysis.faithfulness.contrib import ContribFaithfulnessOptions, contrib_faithfulness
from lexlens.analysis.faithfulness.occlusion import occluded, occlusion_of
from lexlens.analysis.faithfulness.options import FaithfulnessOptions
from lexlens.analysis.faithfulness.provenance import provenance_faithfulness
from lexlens.analysis.lexical.patches import units_to_indices
from lexlens.analysis.render.attribution_plots import curves_figure
from lexlens.app.views.section_jobs import (
    section_outcome,
    show_section_job,
    start_section_job,
)
from lexlens.models import LexlensError

CAPTION = (
    "Measured by re-encoding: the model is run again on the edited input; random = the same "
    "number of parts drawn at random ({draws} seeded draws)."
)


def _aopc_line(curve: DeletionCurve) -> str:
    return (
        f"AOPC {curve.aopc:.4g} (explanation's order) vs {curve.random_aopc:.4g} (random order)"
        + (
            f"; normalised {curve.normalized_aopc:.3f} vs {curve.normalized_random_aopc:.3f}"
            if curve.normalized_aopc is not None and curve.normalized_random_aopc is not None
            else ""
        )
    )


@st.cache_data(show_spinner="Re-encoding the edited queries…", max_entries=32)
def _contrib_curve(_q, _d, key: str, query: str, doc: Any, image: Any, mode: str, k: int, n: int):
    return contrib_faithfulness(
        _q,
        _d,
        query=query,
        doc=doc,
        doc_image=image,
        options=ContribFaithfulnessOptions.of(query_mode=mode, gate_k=k, curve_k=n),
    )


def show_deletion_curve(result: Any, q_encoder: Any, d_encoder: Any, d_image: Any) -> None:
    """Query ⊙ Document: the score after deleting the query's words in the order of their
    summed contributions, re-encoded, against random orders; with AOPC."""
    st.subheader("Is it true? The deletion curve")
    text = result.query.get("text")
    if text is None:
        st.caption("The deletion curve deletes query words: an image query has none.")
        return
    words = len(text.split())
    try:
        found = _contrib_curve(
            q_encoder,
            d_encoder,
            f"{q_encoder.name}|{d_encoder.name}",
            text,
            result.document.get("text"),
            d_image if "image" in result.document else None,
            result.query_mode,
            result.gate_k,
            max(1, min(20, words)),
        )
    except LexlensError as exc:
        st.info(f"No deletion curve: {exc}")
        return
    curve = found.curve
    fig = curves_figure(
        {"explanation's order": curve.explained, "random order (mean)": curve.random},
        "score",
        "query words deleted (k)",
    )
    st.plotly_chart(fig, width="stretch", key="faith_contrib_chart")
    st.caption(
        f"{_aopc_line(curve)}. Order: "
        + ", ".join(curve.parts)
        + ". "
        + CAPTION.format(draws=curve.draws)
    )
    for note in found.notes:
        st.caption(f"Note: {note}")


def show_provenance_check(encoder: Any, result: Any, merged: bool, top: int) -> None:
    """Text page: each shown top term's weight after deleting its named source word."""
    text = result.input.get("text")
    if not text:
        return
    st.subheader("Is the provenance true? Each term without its source word")
    try:
        found = _provenance(
            encoder,
            f"{encoder.name}|{encoder.source}",
            text,
            result.input.get("side", "query"),
            merged,
            top,
        )
    except LexlensError as exc:
        st.info(f"No provenance check: {exc}")
        return
    if found.dropped_share is not None:
        st.metric(
            "Top terms whose weight drops by at least half",
            f"{found.dropped_share:.0%}",
            help=f"{counted(found.tested, 'term')} with a source word; {found.untested} produced by "
            "[CLS], [SEP] or punctuation (not tested)",
        )
    table = pd.DataFrame(found.terms).rename(columns={"token": "term", "from_word": "source word"})
    st.dataframe(table, hide_index=True, width="stretch")
    st.caption("Measured by re-encoding the text without the source word.")


@st.cache_data(show_spinner="Re-encoding without each source word…", max_entries=32)
def _provenance(_encoder, key: str, text: str, side: str, merged: bool, top: int):

    return provenance_faithfulness(_encoder, text, merged=merged, top=top, side=side)


def show_occlusion_check(view: Any, picture: Any, groups: list) -> None:
    """Images page: each patch group's cells occluded (the preprocessing mean), the whole
    image re-encoded: its top terms before and after, against random cells."""

    shown = [(g, r) for g, r in enumerate(groups) if r is not None and r.input.get("cells")]
    if not shown:
        return
    st.markdown("**Is it true? Each group occluded and the image re-encoded**")
    for g, group in shown:
        units = units_to_indices(view.encoding, group.input["cells"])
        try:
            found = occlusion_of(
                view.encoder,
                picture,
                view.encoding,
                units,
                view.rows(group)[:10],
                FaithfulnessOptions(),
            )
        except LexlensError as exc:
            st.info(f"No occlusion check: {exc}")
            return
        left, right = st.columns([1, 2])
        left.image(
            occluded(picture, view.encoding, units, found.fill),
            width="stretch",
            caption=f"group {'AB'[g]} occluded ({len(units)} cells)",
        )
        table = pd.DataFrame(found.terms)[["token", "before", "after", "random_after"]]
        right.dataframe(
            table.rename(
                columns={
                    "before": "whole image",
                    "after": "group occluded",
                    "random_after": f"{len(units)} random cells occluded (mean)",
                }
            ),
            hide_index=True,
            width="stretch",
        )
        right.caption(
            f"Mean drop {found.drop:.0%} (group) vs {found.random_drop:.0%} (random cells); "
            f"terms halved: {found.dropped_share:.0%} vs {found.random_dropped_share:.0%}. "
            + CAPTION.format(draws=found.draws)
        )


def show_ig_curves(encoder: Any, attribution: Any, pick: int, key: str) -> Any:
    """Attribution page: deletion and insertion curves of each sub-vector's objective in
    attribution order (MoT) against RandT and GlobalT, averaged over the sub-vectors;
    returns the curves shown (``None`` when there are none), for the report."""
    st.subheader("Is it true? Deletion and insertion curves")
    try:
        found = _ig(encoder, f"{key}|{pick}", attribution, pick)
    except LexlensError as exc:
        st.info(f"No curves: {exc}")
        return None
    left, right = st.columns(2)
    x = "words deleted (k)"
    left.plotly_chart(
        curves_figure(found.deletion, "mean F_i = −‖d̂ᵢ − fᵢ‖²", x),
        width="stretch",
        key=f"faith_ig_del_{key}_{pick}",
    )
    right.plotly_chart(
        curves_figure(found.insertion, "mean F_i", "words inserted (k)"),
        width="stretch",
        key=f"faith_ig_ins_{key}_{pick}",
    )
    names = list(found.mean_deletion_aopc)
    table = {
        "ranking": names,
        "deletion AOPC (mean over sub-vectors)": [found.mean_deletion_aopc[n] for n in names],
        "insertion AOPC": [found.mean_insertion_aopc[n] for n in names],
    }
    st.dataframe(pd.DataFrame(table), hide_index=True, width="stretch")
    st.caption(
        f"Over {len(found.subvectors)} sub-vectors, k = 0…{found.k} of the words IG credits; "
        "every point is the model run on the edited tokens (measured by re-encoding). Higher "
        "AOPC: the ranking finds the words that move the code. " + " ".join(found.notes)
    )
    st.download_button(
        "Curves (JSON)",
        found.files()["ig_curves.json"],
        "ig_curves.json",
        "application/json",
        key=f"faith_ig_dl_{key}_{pick}",
    )
    return found


@st.cache_data(show_spinner="Running the edited texts…", max_entries=16)
def _ig(_encoder, key: str, _attribution, pick: int):

    return ig_faithfulness(_encoder, _attribution, pick)


def show_faithfulness(result: Any, index_path: str) -> None:
    """Evaluation page: every failure's explanation tested by re-encoding (on request, as a
    job), the summary against random, the deletion curves and the downloads."""

    st.subheader("Are the explanations true? Faithfulness by re-encoding")
    if st.button("Measure faithfulness", key="faith_eval_run"):
        device = st.session_state.get("device", "auto")
        try:
            start_section_job(
                "evaluation",
                "faithfulness",
                f"faithfulness of {counted(len(result.failures), 'failure')}",
                {},
                lambda progress: failures_faithfulness(
                    index_path,
                    result,
                    progress=progress,
                    device=None if device == "auto" else device,
                ),
            )
        except LexlensError as exc:
            st.error(str(exc))
    found, job, status, _ = section_outcome("evaluation", "faithfulness", Found)
    if show_section_job("faithfulness", job, status, "measurement"):
        return
    if found is None:
        st.caption(
            "Each failure's decisive words are deleted from its query, the query "
            "re-encoded and both items rescored, against as many random words."
        )
        return
    s = found.summary
    cols = st.columns(4)
    cols[0].metric(
        "Comprehensiveness (median)",
        f"{s.comprehensiveness or 0:.3f}",
        f"random {s.random_comprehensiveness or 0:.3f}",
        delta_color="off",
    )
    cols[1].metric(
        "Pairs flipped",
        f"{s.flip_rate or 0:.0%}",
        f"random {s.random_flip_rate or 0:.0%}",
        delta_color="off",
    )
    cols[2].metric(
        "AOPC (median)", f"{s.aopc or 0:.3f}", f"random {s.random_aopc or 0:.3f}", delta_color="off"
    )
    test = f"Wilcoxon p {s.wilcoxon_p:.1e}" if s.wilcoxon_p else None
    cols[3].metric("Beats random", f"{s.beats_random or 0:.0%}", test, delta_color="off")
    st.plotly_chart(
        curves_figure(
            {"explanation's order": s.curve, "random order": s.random_curve},
            "median share of the gap closed",
            "query words deleted (k)",
        ),
        width="stretch",
        key="faith_eval_chart",
    )
    st.caption(
        f"{counted(s.failures, 'failure')} measured by {s.measured_by} ({s.model_calls} edited "
        f"queries, {s.seconds:.1f} s). " + " ".join(found.notes)
    )
    rows = pd.read_csv(io.BytesIO(found.csv()))
    st.dataframe(rows, hide_index=True, width="stretch")
    d1, d2 = st.columns(2)
    d1.download_button(
        "Faithfulness (JSON)",
        found.files()["faithfulness.json"],
        "faithfulness.json",
        "application/json",
        key="faith_eval_json",
    )
    d2.download_button(
        "Faithfulness (CSV)", found.csv(), "faithfulness.csv", "text/csv", key="faith_eval_csv"
    )
