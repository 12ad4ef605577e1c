"""The Evaluation page's drawing of failures (grouped by cause, several open, whole texts with
their words marked), blame and downloads (numbers and marks: the result's and the analysis')."""

from __future__ import annotations

import html

import pandas as pd
import streamlit as st

from lexlens.analysis.core.counts import counted
from lexlens.analysis.core.words import entry_label
from lexlens.analysis.evaluation.causes import blame_lift_label, lift_label
from lexlens.analysis.evaluation.explain import Failure, GapSide, ItemExplanation, failure_spans
from lexlens.analysis.evaluation.result import (
    BLAME_COLUMNS,
    PER_QUERY_COLUMNS,
    Evaluation,
    blame_row,
    cause_counts,
    per_query_row,
    select_failures,
    sort_rows,
    worst_first,
)
from lexlens.analysis.evaluation.slices import SLICE_COLUMNS, slice_row
from lexlens.app.runtime.state import kept
from lexlens.app.views.highlight import legend, show_text
from lexlens.app.views.thumbnails import item_thumbnail

MIME = {"json": "application/json", "csv": "text/csv", "trec": "text/plain", "html": "text/html"}


def _item(col, item: ItemExplanation | None, title: str, absent: str, index, spans) -> None:
    col.markdown(f"**{title}**")
    if item is None:
        col.caption(absent)
        return
    where = "not retrieved" if item.rank is None else f"rank {item.rank}"
    col.caption(f"{item.id} — {where}, score {item.score:.4f}")
    if item.image:
        picture = item_thumbnail(index, {"image": item.image})
        if picture is not None:
            col.image(picture, width=220)
    show_text(col, item.text, spans, "Whole text")
    if not item.contributions and not item.other_terms:
        col.caption("no term of the query is in this item (q·d = 0)")
        return
    rows = [
        {
            "word (or piece)": entry_label(c, "token"),
            "q·d": c["contribution"],
            "pieces": " ".join(c.get("pieces", [])),
        }
        for c in item.contributions
    ]
    frame = pd.DataFrame(rows)
    if not frame.empty and not frame["pieces"].any():
        frame = frame.drop(columns="pieces")
    col.dataframe(frame, hide_index=True, width="stretch")
    if item.other_terms:
        col.caption(
            f"{counted(item.other_terms, 'more term')}, {item.other_contribution:+.4f} in all"
        )


def _side(col, side: GapSide | None, title: str) -> None:
    """One side of the gap: its words (largest |δ| first) and the sum of the rest."""
    total = side.total if side is not None else 0.0
    col.markdown(f"**{title}**: {total:+.4f}")
    if side is None or not side.words:
        col.caption("no word")
        return
    frame = pd.DataFrame(side.words).drop(columns=["piece", "piece_of"], errors="ignore")
    frame["word"] = [entry_label(w) for w in side.words]
    frame = frame.rename(
        columns={
            "word": "word (or piece)",
            "nonrelevant": "q·d wrong item",
            "relevant": "q·d relevant",
            "delta": "δ",
        }
    )
    if "pieces" in frame:
        frame["pieces"] = [" ".join(p) if isinstance(p, list) else "" for p in frame["pieces"]]
    col.dataframe(frame, hide_index=True, width="stretch")
    if side.other_words:
        col.caption(f"and {counted(side.other_words, 'more word')}, {side.other_delta:+.4f} in all")


def show_gap(failure: Failure) -> None:
    """The score gap word by word: the words favouring each item, whose sums add up to the
    gap, the decisive words, and the gap's split between query and expansion terms."""
    n, r = failure.favour_nonrelevant, failure.favour_relevant
    if failure.gap is None or (n is None and r is None):
        return
    net = (n.total if n else 0.0) + (r.total if r else 0.0)
    st.markdown(
        f"**Score gap** s(wrong) − s(relevant) = {failure.gap:.4f} = "
        f"{n.total if n else 0.0:+.4f} (words favouring the wrong item) "
        f"{r.total if r else 0.0:+.4f} (words favouring the relevant item)"
    )
    st.caption(
        f"δ = q·d(wrong item) − q·d(relevant) per word; net of both sides {net:+.6f}. "
        f"On the query's own terms {failure.query_delta:+.4f}, on expansion terms "
        f"{failure.expansion_delta:+.4f}."
    )
    left, right = st.columns(2)
    _side(left, n, "Favour the wrong item")
    _side(right, r, "Favour the relevant item")
    if failure.decisive:
        words = ", ".join(entry_label(d) for d in failure.decisive)
        total = sum(d["delta"] for d in failure.decisive)
        st.caption(
            f"Decisive words (the fewest favouring the wrong item whose δ reaches the gap; the "
            f"words to blame count these): {words} — {total:+.4f} ≥ gap {failure.gap:.4f}"
        )


def _open_in_contrib(failure: Failure) -> None:
    """Leave for the Query ⊙ Document page with the query and both items' whole texts."""
    st.session_state["contrib_prefill"] = {
        "query": failure.query,
        "doc": failure.nonrelevant.text if failure.nonrelevant else "",
        "doc2": failure.relevant.text if failure.relevant else "",
        "labels": (
            f"{failure.nonrelevant.id if failure.nonrelevant else ''} (ranked first, not relevant)",
            f"{failure.relevant.id if failure.relevant else ''} (relevant)",
        ),
    }
    st.switch_page("app_pages/contrib.py")


def show_failure(failure: Failure, index) -> None:
    """One failing query: its causes, the item ranked first and the best relevant one side by
    side (whole texts, words marked by the side they favour), and the score gap by word."""
    if failure.note:
        st.info(failure.note)
    missing = f" (missing: {', '.join(failure.missing_words)})" if failure.missing_words else ""
    st.caption(f"Causes: {'; '.join(failure.causes) or 'none'}{missing}")
    spans = failure_spans(failure, getattr(index, "vocab", None))
    st.html(legend(["nonrelevant", "relevant"]))
    left, right = st.columns(2)
    _item(
        left,
        failure.nonrelevant,
        "Ranked first, not relevant",
        "no non-relevant item of the collection is ranked",
        index,
        spans.get("nonrelevant", []),
    )
    _item(
        right,
        failure.relevant,
        "Best relevant",
        "none in the collection",
        index,
        spans.get("relevant", []),
    )
    show_gap(failure)
    texts = [i.text for i in (failure.nonrelevant, failure.relevant) if i is not None]
    both = len(texts) == 2 and all(texts)
    if both and st.button("Open both in Query ⊙ Document", key=f"eval_contrib_{failure.query_id}"):
        _open_in_contrib(failure)


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def cause_table(result: Evaluation, counts: dict) -> pd.DataFrame:
    """The causes with their counts, and (when recorded) both rates, lift and p values."""
    rows = result.cause_rates.get("causes")
    if not rows:
        return pd.DataFrame({"cause": list(counts), "failures": list(counts.values())})
    return pd.DataFrame(
        {
            "cause": [r["cause"] for r in rows],
            "failures": [r["failures_with"] for r in rows],
            "of failures": [_rounded(r["failure_rate"], 3) for r in rows],
            "of successes": [_rounded(r["success_rate"], 3) for r in rows],
            "lift": [lift_label(r) for r in rows],
            "p": [float(f"{r['p']:.3g}") for r in rows],
            "p (BH)": [float(f"{r['p_bh']:.3g}") for r in rows],
        }
    )


#: How the rate columns of the slices and blame tables read on the page (the CSV files and the
#: frames keep their names).
RATE_LABELS = {
    "failure_rate": "failure rate",
    "rest_failure_rate": "rest's failure rate",
    "base_failure_rate": "base rate",
    "failure_share": "share of failures",
    "success_share": "share of successes",
    "successes_with": "successes with it",
    "success_rate": "success rate",
    "odds_ratio": "odds ratio",
    "p_bh": "p (BH)",
}


def _rate_columns(table: pd.DataFrame) -> dict:
    """The rate columns of ``table`` as numbers (a missing one blank, never "None") under
    their labels, three significant digits."""
    config = {}
    for name, label in RATE_LABELS.items():
        if name in table:
            table[name] = pd.to_numeric(table[name], errors="coerce")
            config[name] = st.column_config.NumberColumn(label, format="%.3g")
    return config


def slice_table(result: Evaluation) -> pd.DataFrame:
    """The slices by query feature (slices.csv's rows, the feature by its name), each slice's
    failure rate beside the rest's and the base rate."""
    rows = [slice_row(r) for r in result.slices.get("slices", [])]
    table = pd.DataFrame(rows, columns=list(SLICE_COLUMNS))
    names = result.slices.get("features", {})
    table["feature"] = [names.get(f, f) for f in table["feature"]]
    return table.drop(columns=["low", "high"])


def show_slices(result: Evaluation) -> None:
    """The failure rate by query feature (length, expansion share, mean IDF), each slice
    against the rest with Fisher's p and BH (slices.csv)."""
    if not result.slices.get("slices"):
        return
    st.markdown("**Failure rate by query feature**")
    table = slice_table(result)
    st.dataframe(
        table,
        hide_index=True,
        width="stretch",
        key="eval_slices",
        column_config=_rate_columns(table),
    )
    notes = "".join(f"; {n}" for n in result.slices.get("notes", []))
    st.caption(
        f"{result.slices['rule']}; the failure rate beside the rest's and the base rate (all the "
        f"queries with the feature){notes} (slices.csv)."
    )


def show_failures(result: Evaluation, order: list[str], index) -> None:
    """The failures grouped by cause, filtered by cause and query length, several open at
    once (``order``: the query ids in the order of the table above)."""
    st.subheader("Failures by cause")
    counts = result.causes or cause_counts(result.failures)
    st.caption(
        f"{counted(len(result.failures), 'failing query')} of {result.settings.get('queries')}. A "
        "failure may have several causes (the counts may sum to more): lexical mismatch — "
        "a content word of the query is not in the relevant item; won on expansion terms — "
        "on the query's own terms the relevant item scores at least as much; not retrieved — "
        "the ranking does not hold the relevant item; other — none of these."
    )
    st.dataframe(cause_table(result, counts), hide_index=True, key="eval_causes")
    if result.cause_rates.get("causes"):
        st.caption(
            f"Against the base rate: each cause tested on the "
            f"{result.cause_rates['successes']:,} successful queries too; lift = the failures' "
            "rate / the successes' rate (≈ 1: successes share it as often, it explains "
            "little); p: Fisher's exact test, BH: Benjamini–Hochberg across the causes "
            "(causes.csv)."
        )
    show_slices(result)
    lengths = [f.query_length for f in result.failures]
    c1, c2 = st.columns([3, 2])
    present = [c for c, n in counts.items() if n]
    before = st.session_state.get("eval_cause_filter")
    st.session_state["eval_cause_filter"] = [
        c for c in (present if before is None else before) if c in present
    ]
    chosen = c1.multiselect("Causes", present, key=kept("eval_cause_filter"))
    low, high = min(lengths), max(lengths)
    span = (low, high)
    if high > low:
        was = st.session_state.get("eval_length") or (low, high)
        st.session_state["eval_length"] = (max(low, min(was[0], high)), min(high, max(was[1], low)))
        span = c2.slider("Query length (words)", low, high, key=kept("eval_length"))
    rank = {q: n for n, q in enumerate(order)}
    selected = sorted(
        select_failures(result.failures, chosen, span),
        key=lambda f: rank.get(f.query_id, len(rank)),
    )
    if not selected:
        st.info("No failure has the causes and query length chosen.")
        return
    by_id = {f.query_id: f for f in selected}
    ids = list(by_id)
    filters = (tuple(chosen), tuple(span), len(result.failures))
    if st.session_state.get("eval_open_for") != filters:  # new filters: their worst two open
        st.session_state["eval_open_for"] = filters
        st.session_state["eval_open"] = ids[:2]
    opened = st.session_state.get("eval_open", ids[:2])
    st.session_state["eval_open"] = [q for q in opened if q in by_id]
    picks = st.multiselect(
        f"Failing queries to open ({len(ids)} with these filters, in the table's order)",
        ids,
        key=kept("eval_open"),
        format_func=lambda q: f"{q}: {by_id[q].query[:80]}",
    )
    for q in picks:
        f = by_id[q]
        with st.expander(f"{q}: {f.query} — {'; '.join(f.causes)}", expanded=True):
            show_failure(f, index)


def _cell(value: object) -> str:
    """A table cell: an integer as it is, a measure to 4 decimals, nothing for no value."""
    if value is None:
        return "<td></td>"
    if isinstance(value, float):
        return f'<td style="text-align:right">{value:.4f}</td>'
    if isinstance(value, int):
        return f'<td style="text-align:right">{value}</td>'
    return f"<td>{html.escape(str(value))}</td>"


def table_html(rows: list[dict], columns: list[str]) -> str:
    """Rows as an escaped HTML table in a scrolling box, its header kept on top."""
    head = "".join(
        f'<th style="position:sticky;top:0;background:#f0f2f6;text-align:left">'
        f"{html.escape(c)}</th>"
        for c in columns
    )
    body = "".join("<tr>" + "".join(_cell(r.get(c)) for c in columns) + "</tr>" for r in rows)
    return (
        '<div style="max-height:420px;overflow:auto;font-size:0.85em">'
        f'<table style="border-collapse:collapse;width:100%"><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>"
    )


def show_worst(result: Evaluation) -> list[str]:
    """The queries worst first (or sorted by a chosen column: numbers by value, ids in
    natural order, no value last) under the CSV's column names; returns the ids shown."""
    rows = [
        {**per_query_row(q), "top_terms": ", ".join(t["word"] for t in q["top_terms"][:6])}
        for q in worst_first(result.metrics["per_query"])
    ]
    columns = [*PER_QUERY_COLUMNS, "top_terms"]
    c1, c2 = st.columns([3, 1])
    choices = ["worst first", *[c for c in PER_QUERY_COLUMNS if c != "query"]]
    by = c1.selectbox("Sort by", choices, key=kept("eval_sort", "worst first"))
    descending = c2.toggle("Descending", key=kept("eval_sort_desc", False))
    if by != "worst first":
        rows = sort_rows(rows, by, descending)
    st.caption(
        "first_relevant_rank: the first relevant item's place in the ranking evaluated (empty: "
        "none there); relevant_rank: the best relevant item's exact rank, empty when it is not "
        "retrieved (it scores 0, or the run omits it); relevant_status says which. The same "
        "columns as per_query.csv."
    )
    st.html(table_html(rows, columns))
    return [r["query_id"] for r in rows]


def show_blame(result: Evaluation) -> None:
    """The words to blame across the benchmark, and the queries behind a chosen word."""
    st.subheader("Words to blame")
    if not result.blame:
        st.caption(
            "No word put a wrong item first, and no query's top word is missing from its relevant item."
        )
        return
    st.caption(
        "pushed: failures where the word helped put a non-relevant item above the best "
        "relevant one; amount: its summed contribution difference there; mismatch: queries "
        "whose top word it is and whose relevant item lacks it (as in blame.csv). "
        "Against the base rate: the failure rate (pushed / failures) beside the success rate; "
        + result.cause_rates.get("blame_rule", "")
    )
    shown = [c for c in BLAME_COLUMNS if not c.endswith("_queries")]
    table = pd.DataFrame([blame_row(b) for b in result.blame], columns=list(BLAME_COLUMNS))
    table["lift"] = [blame_lift_label(b, result.cause_rates) for b in result.blame]
    table = table[shown].copy()
    st.dataframe(
        table,
        hide_index=True,
        width="stretch",
        key="eval_blame",
        column_config=_rate_columns(table),
    )
    words = [b["word"] for b in result.blame]
    word = st.selectbox("Queries behind a word", words, key=kept("eval_blame_word", words[0]))
    chosen = next(b for b in result.blame if b["word"] == word)
    st.caption(
        f"Pushed a wrong item up in: {', '.join(chosen['pushed_queries']) or 'none'}; "
        f"missing from the relevant item of: {', '.join(chosen['mismatch_queries']) or 'none'}"
    )


def show_downloads(result: Evaluation) -> None:
    """The result's files: JSON, CSV tables, the TREC run and an HTML report."""
    files = result.files()
    cols = st.columns(len(files))
    for col, (name, data) in zip(cols, files.items(), strict=True):
        col.download_button(name, data, name, MIME[name.rsplit(".", 1)[-1]], key=f"eval_dl_{name}")
