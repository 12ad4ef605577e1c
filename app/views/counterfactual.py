""" "What would it take?": a failure's counterfactual on the Evaluation page (one failure on
request, or every failure with FlipRate as a job), and a document against a rival on the Query ⊙
Document page. Every number comes from :mod:`lexlens.analysis.counterfactual` (each edit
shown verified by re-encoding); this module only draws."""

from __future__ import annotations

import io
from typing import Any

import pandas as pd
import streamlit as st

from lexlens.analysis.collections.memory import encode_collection
from lexlens.analysis.core.counts import counted
from lexlens.analysis.counterfactual.counterfactual import counterfactual
from lexlens.analysis.counterfactual.evaluation import (
    EvaluationCounterfactuals,
    failures_counterfactuals,
)
from lexlens.analysis.counterfactual.options import CounterfactualOptions
from lexlens.analysis.counterfactual.result import Counterfactual, CounterfactualResult
from lexlens.analysis.render.notebook import marked_document, marked_query, rank_text
from lexlens.app.views.section_jobs import (
    section_outcome,
    show_section_job,
    start_section_job,
)
from lexlens.app.views.widgets import option_widget
from lexlens.models import LexlensError


def _rank(rank: int | None) -> str:
    return rank_text(rank)


def _marked_query(query: str, answer: Counterfactual) -> str:
    """The query with its deleted words struck through (HTML, escaped)."""
    return marked_query(query, answer.edits)


def _marked_document(answer: Counterfactual) -> str:
    """The edited document with its inserted words marked (HTML, escaped)."""
    return marked_document(answer.edited_document, answer.edits)


def show_answer(result: CounterfactualResult, key: str) -> None:
    """One counterfactual: the verified edits (or the closest tried, marked not a fix), the
    rank before and after, the first rival; the term-level set step by step."""
    answer = result.counterfactual
    if answer is not None:
        calls = f"{answer.model_calls} model calls, {answer.seconds:.2f} s"
        if answer.found and not answer.edits:
            st.success(f"{answer.target} already ranks first.")
        elif answer.found:
            st.success(
                f"{len(answer.edits)} edit(s) rank **{answer.target}** first (was rank "
                f"{_rank(answer.rank_before)}) — verified: re-encoded and ranked against all "
                f"{result.index.get('items', 0):,} items ({calls})."
            )
        else:
            st.warning(
                f"No edit within the budget ranks **{answer.target}** first. The closest tried "
                f"reaches rank {_rank(answer.rank_after)} (was {_rank(answer.rank_before)}; "
                f"re-encoded, {calls}) — shown below, not a fix."
            )
        if answer.edits:
            st.markdown(f"**Query:** {_marked_query(result.query, answer)}", unsafe_allow_html=True)
            if answer.edited_document is not None and any(
                e["side"] == "document" for e in answer.edits
            ):
                st.markdown(
                    f"**{answer.target}:** {_marked_document(answer)}", unsafe_allow_html=True
                )
        c1, c2, c3 = st.columns(3)
        c1.metric(
            "Rank after",
            _rank(answer.rank_after),
            f"before {_rank(answer.rank_before)}",
            delta_color="off",
        )
        c2.metric(
            "Score after",
            f"{answer.score_after:.3f}",
            f"before {answer.score_before:.3f}",
            delta_color="off",
        )
        c3.metric(
            "First rival after",
            answer.rival_after or "–",
            f"score {answer.rival_score_after:.3f}",
            delta_color="off",
        )
        for note in answer.notes:
            st.caption(f"Note: {note}")
    _show_terms(result.terms, key)
    shown = answer.notes if answer is not None else []
    for note in (n for n in result.notes if n not in shown):  # the answer's own are above
        st.caption(f"Note: {note}")


def _show_terms(terms: Counterfactual, key: str) -> None:
    """The term-level answer: each term removed from the query vector, step by step."""
    if terms.found and terms.edits:
        how = "the smallest set" if terms.exact else "the smallest found (beyond 4 terms)"
        st.caption(
            f"Term level ({how}): removing {len(terms.edits)} vocabulary term(s) from the query "
            "vector ranks it first among all items — after each removal:"
        )
        st.dataframe(pd.DataFrame(terms.steps), hide_index=True, width="stretch", key=key)
    elif not terms.found:
        st.caption(
            "Term level: no set of query terms removed from the query vector ranks it "
            "first (" + "; ".join(terms.notes) + ")."
        )


def _budget(prefix: str) -> dict[str, Any]:
    """The side and budget widgets (from the declaration)."""
    c1, c2, c3 = st.columns([2, 1, 1])
    return {
        "side": option_widget(CounterfactualOptions, "side", f"{prefix}_side", where=c1),
        "max_edits": option_widget(CounterfactualOptions, "max_edits", f"{prefix}_edits", where=c2),
        "max_calls": option_widget(
            CounterfactualOptions, "max_calls", f"{prefix}_calls", where=c3, high=1000
        ),
    }


def show_counterfactuals(result: Any, index_path: str) -> None:
    """Evaluation page: "What would it take?" for a chosen failure, and every failure's
    counterfactual with FlipRate (on request)."""
    failures = [f for f in result.failures if f.relevant is not None]
    st.subheader("What would it take? The smallest edit that fixes a failure")
    if not failures or result.settings.get("run"):
        st.caption("No failure with a relevant item in the collection (or another system's run).")
        return
    labels = {
        f"{f.query_id}: {f.query[:60]} → {f.relevant.id} (rank {_rank(f.relevant.rank)})": f
        for f in failures
    }
    chosen = labels[st.selectbox("Failure", list(labels), key="cf_failure")]
    values = _budget("cf")
    store = st.session_state.setdefault("_cf_one", {})
    key = (index_path, chosen.query_id, chosen.relevant.id, tuple(sorted(values.items())))
    if st.button("What would it take?", key="cf_run", type="primary"):
        try:
            with st.spinner("Editing, re-encoding and ranking against every item…"):
                store[key] = counterfactual(
                    index_path,
                    chosen.query,
                    chosen.relevant.id,
                    query_encoder=result.settings.get("query_encoder"),
                    options=CounterfactualOptions.of(
                        **values,
                        query_mode=result.settings["query_mode"],
                        gate_k=result.settings["gate_k"],
                    ),
                )
        except LexlensError as exc:
            st.error(str(exc))
    if key in store:
        show_answer(store[key], "cf_one_terms")
    _show_all(result, index_path, values)


def _show_all(result: Any, index_path: str, values: dict) -> None:
    """Every failure's counterfactual, as a job (on request): FlipRate, mean edits, mean
    calls."""

    if st.button("Counterfactuals of every failure", key="cf_all_run"):
        try:
            options = CounterfactualOptions.of(**values)
            device = st.session_state.get("device", "auto")
            start_section_job(
                "evaluation",
                "counterfactuals",
                f"counterfactuals of {counted(len(result.failures), 'failure')}",
                values,
                lambda progress: failures_counterfactuals(
                    index_path,
                    result,
                    progress=progress,
                    options=options,
                    device=None if device == "auto" else device,
                ),
            )
        except LexlensError as exc:
            st.error(str(exc))
    found, job, status, asked = section_outcome(
        "evaluation", "counterfactuals", EvaluationCounterfactuals
    )
    if show_section_job("counterfactuals", job, status, "counterfactuals"):
        return
    if found is None:
        return
    if asked and asked != values:
        st.caption(
            "Computed with "
            + ", ".join(f"{k} = {v}" for k, v in asked.items())
            + ": press the button for the budget above."
        )
    s = found.summary
    cols = st.columns(4)
    cols[0].metric(
        "FlipRate", f"{s.flip_rate or 0:.0%}", f"{s.found} of {s.tried}", delta_color="off"
    )
    cols[1].metric("Mean edits (fixed)", f"{s.mean_edits or 0:.2f}")
    cols[2].metric("Mean model calls", f"{s.mean_model_calls or 0:.1f}")
    cols[3].metric(
        "Term level flips",
        f"{s.term_flip_rate or 0:.0%}",
        f"mean {s.mean_terms or 0:.2f} terms",
        delta_color="off",
    )
    st.markdown(
        f"**{s.flip_rate_text()}** · no fix: none exists for {s.none_exists}, none found "
        f"(budget ran out) for {s.none_found} · fixes by side: query only "
        f"{s.by_side.get('query', 0)}, document only {s.by_side.get('document', 0)}, both "
        f"{s.by_side.get('both', 0)}"
    )
    st.dataframe(pd.read_csv(io.BytesIO(found.csv())), hide_index=True, width="stretch")
    d1, d2 = st.columns(2)
    d1.download_button(
        "Counterfactuals (JSON)",
        found.files()["counterfactuals.json"],
        "counterfactuals.json",
        "application/json",
        key="cf_all_json",
    )
    d2.download_button(
        "Counterfactuals (CSV)", found.csv(), "counterfactuals.csv", "text/csv", key="cf_all_csv"
    )


def show_pair_counterfactual(
    q_encoder: Any, d_encoder: Any, query: Any, documents: tuple[str, str], mode: str, k: int
) -> None:
    """Query ⊙ Document with a second document: what it would take for the lower-scoring of
    the two to rank above the other (the two documents are the whole collection)."""

    first, second = documents
    if not (first or "").strip() or not (second or "").strip() or not query:
        return
    st.subheader("What would it take? The smallest edit that puts one above the other")
    values = _budget("cf_pair")
    if not st.button("What would it take?", key="cf_pair_run"):
        return
    try:
        with st.spinner("Editing, re-encoding and ranking…"):
            pair = encode_collection(
                d_encoder,
                [first, second],
                ids=["document", "second"],
                gate_k=k,
                name="the two documents",
            )
            options = CounterfactualOptions.of(**values, query_mode=mode, gate_k=k)
            probe = counterfactual(
                pair,
                query,
                "document",
                query_encoder=q_encoder,
                options=CounterfactualOptions.of(options, level="terms"),
            )
            target = "second" if probe.terms.rank_before == 1 else "document"
            found = counterfactual(pair, query, target, query_encoder=q_encoder, options=options)
    except LexlensError as exc:
        st.info(f"No counterfactual: {exc}")
        return
    st.caption(
        f"Target: the {'second ' if target == 'second' else ''}document, now below the other."
    )
    show_answer(found, "cf_pair_terms")
