"""How a comparison of systems is drawn: the means († significant against the baseline),
their costs and the effectiveness–efficiency chart (nDCG@10 against FLOPs and latency), the
significance table, GeoRisk, the sorted per-query delta chart beside the A-versus-B
scatter (plotly), the largest wins and losses, the why of a chosen query side by side, the
queries each pair fixes and breaks (McNemar's exact test, their causes), the blame shift,
and the downloads (the result's files)."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from lexlens.analysis.core.words import entry_label
from lexlens.analysis.render.notebook import rank_text
from lexlens.analysis.systems.comparison import why_of
from lexlens.analysis.systems.engine_loss import loss_lines, loss_rows
from lexlens.analysis.systems.engine_sweep import ACCURACY, NDCG, EngineSweep
from lexlens.analysis.systems.report import efficiency_figure, marks, sweep_figure
from lexlens.analysis.systems.result import SystemsComparison
from lexlens.analysis.systems.why import ItemOnBoth, QueryWhy
from lexlens.app.runtime import state
from lexlens.models import LexlensError

MIME = {
    "json": "application/json",
    "csv": "text/csv",
    "html": "text/html",
    "tex": "application/x-tex",
}
#: The efficiency columns of the means table, as the page names them.
EFFICIENCY_LABELS = {
    "flops": "FLOPs",
    "postings_per_query": "postings / query",
    "latency_ms": "latency (ms)",
    "index_bytes": "index bytes",
}
#: The reasons' summary's columns, as the page names them.
REASON_LABELS = {
    "relevant_items": "relevant items",
    "share_of_lost_relevant": "share of the lost relevant",
}
TABLE = [
    "system_b",
    "system_a",
    "measure",
    "delta",
    "ci_low",
    "ci_high",
    "p_t_corrected",
    "p_wilcoxon_corrected",
    "p_randomization_corrected",
    "significant",
    "effect_size",
    "wins",
    "ties",
    "losses",
    "urisk_0",
    "urisk_1",
    "urisk_2",
    "trisk_1",
    "p_trisk_1",
]


def _means(result: SystemsComparison) -> pd.DataFrame:
    significant = marks(result)
    rows = []
    for s in result.systems:
        row = {
            "system": s.name + (" (baseline)" if s.name == result.baseline else ""),
            "kind": s.kind,
        }
        for m in result.measures:
            row[m] = f"{result.means[s.name][m]:.4f}" + (
                "†" if significant.get((s.name, m)) else ""
            )
        row["missing queries"] = result.missing[s.name]["count"]
        costs = result.efficiency.get(s.name) or {}
        for column, label in EFFICIENCY_LABELS.items():
            row[label] = costs.get(column)
        rows.append(row)
    return pd.DataFrame(rows)


def _charts(result: SystemsComparison, pair: tuple[str, str], measure: str) -> None:
    a, b = pair
    rows = sorted(
        (
            {
                "id": q["id"],
                "text": q["text"],
                "a": q["values"][a][measure],
                "b": q["values"][b][measure],
            }
            for q in result.per_query
        ),
        key=lambda r: (-(r["b"] - r["a"]), r["id"]),
    )
    deltas = [r["b"] - r["a"] for r in rows]
    bars = go.Figure(
        go.Bar(
            x=list(range(1, len(rows) + 1)),
            y=deltas,
            marker_color=["#2166ac" if d > 0 else "#b2182b" for d in deltas],
            customdata=[[r["id"], r["text"][:60]] for r in rows],
            hovertemplate="%{customdata[0]}: %{customdata[1]}<br>Δ %{y:.4f}<extra></extra>",
        )
    )
    bars.update_layout(
        title=f"{measure}: B − A per query, sorted",
        height=360,
        xaxis_title="queries (sorted by Δ)",
        yaxis_title="Δ",
        bargap=0,
    )
    scatter = go.Figure(
        [
            go.Scatter(
                x=[r["a"] for r in rows],
                y=[r["b"] for r in rows],
                mode="markers",
                customdata=[[r["id"], r["text"][:60]] for r in rows],
                marker={"size": 6},
                hovertemplate="%{customdata[0]}: %{customdata[1]}<br>A %{x:.3f}, B %{y:.3f}"
                "<extra></extra>",
                name="queries",
            ),
            go.Scatter(
                x=[0, 1],
                y=[0, 1],
                mode="lines",
                line={"dash": "dot", "color": "#999"},
                name="A = B",
                hoverinfo="skip",
            ),
        ]
    )
    scatter.update_layout(
        title=f"{measure}: {a} (x) vs {b} (y)",
        height=360,
        xaxis_title=a,
        yaxis_title=b,
        showlegend=False,
    )
    left, right = st.columns(2)
    left.plotly_chart(bars, key="sys_delta_chart")
    right.plotly_chart(scatter, key="sys_scatter_chart")


def _item(where, it: ItemOnBoth | None, side: str, name: str, what: str) -> None:
    if it is None:
        where.caption(f"No {what}.")
        return
    rank = getattr(it, f"rank_{side}")
    score = getattr(it, f"score_{side}")
    where.markdown(
        f"**{what}** `{it.id}` under **{name}**: "
        f"{'not retrieved' if rank is None else f'rank {rank}'}, "
        f"score {'–' if score is None else f'{score:.4f}'}"
    )
    if it.text:
        where.caption(it.text[:300])
    words = getattr(it, f"words_{side}")
    if words:
        where.dataframe(pd.DataFrame(words[:12]), hide_index=True, width="stretch")


def _why(why: QueryWhy) -> None:
    st.markdown(
        f"**{why.query_id}**: {why.query} — {why.measure} {why.system_a} "
        f"{why.value_a:.4f} → {why.system_b} {why.value_b:.4f}"
    )
    if why.note:
        st.caption(f"Note: {why.note}")
    left, right = st.columns(2)
    for where, side, name in ((left, "a", why.system_a), (right, "b", why.system_b)):
        _item(where, why.relevant, side, name, "Relevant item")
        _item(where, why.rival, side, name, "Non-relevant rival")
        decisive = why.decisive_a if side == "a" else why.decisive_b
        if decisive:
            where.caption(
                f"Decisive under {name} (puts {decisive[0]['above']} above): "
                + ", ".join(f"{entry_label(d)} ({d['delta']:+.3f})" for d in decisive)
            )
    if why.changed:
        st.caption("The relevant item's words whose contribution changed most (B − A)")
        st.dataframe(pd.DataFrame(why.changed), hide_index=True, width="stretch")
    if why.moved:
        st.caption("Items that moved in or out of the top 10, by rank")
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "item": m.id,
                        "relevant": m.relevant,
                        "rank A": rank_text(m.rank_a),
                        "rank B": rank_text(m.rank_b),
                        "text": m.text[:80],
                    }
                    for m in why.moved
                ]
            ),
            hide_index=True,
            width="stretch",
        )


def _blame_shift(result: SystemsComparison, pair: tuple[str, str]) -> None:
    """The words behind one system's failures and not the other's (or why there are none)."""
    shift = next(s for s in result.blame_shift if (s["system_a"], s["system_b"]) == pair)
    st.subheader("Blame shift")
    if shift.get("note"):
        st.caption(f"None shown: {shift['note']}.")
        return
    left, right = st.columns(2)
    for where, key, label in (
        (left, "a_not_b", f"under {pair[0]}, not {pair[1]}"),
        (right, "b_not_a", f"under {pair[1]}, not {pair[0]}"),
    ):
        where.caption(f"Words that put non-relevant items first {label}")
        where.dataframe(pd.DataFrame(shift[key]), hide_index=True, width="stretch")


def _fixes(result: SystemsComparison, pair: tuple[str, str]) -> None:
    """The pair's fixed and broken queries, McNemar's exact p, and their causes."""
    found = next((f for f in result.fixes if (f["system_a"], f["system_b"]) == pair), None)
    if found is None:
        return
    a, b = pair
    st.subheader("Failures across systems")
    st.markdown(
        f"**{b}** fixes **{found['fixed']}** and breaks **{found['broken']}** of "
        f"{found['queries']:,} queries against **{a}** (both succeed {found['both_succeed']}, "
        f"both fail {found['both_fail']}); McNemar's exact p **{found['p_mcnemar']:.3g}**."
    )
    st.caption(
        "A query succeeds when its first relevant item is first. The causes of the fixed are "
        f"{a}'s, of the new failures {b}'s (not exclusive); p: two-sided binomial test on "
        "fixed vs broken."
    )
    left, right = st.columns(2)
    for where, key, label in (
        (left, "fixed_causes", f"Causes of the fixed (under {a})"),
        (right, "broken_causes", f"Causes of the new failures (under {b})"),
    ):
        where.caption(label)
        if found[key]:
            where.dataframe(pd.DataFrame(found[key]), hide_index=True, width="stretch")
    if found["causes"]:
        st.caption(f"Failures per cause, {a} → {b}")
        st.dataframe(pd.DataFrame(found["causes"]), hide_index=True, width="stretch")


def _engine_losses(result: SystemsComparison) -> None:
    """What each named engine lost from the exact top k, and why (its reasons' summary,
    then every lost item with its numbers)."""
    for entry in result.engine:
        losses = entry.get("losses")
        if not losses:
            continue
        st.subheader(f"What {entry['run']} lost, and why")
        st.caption(loss_lines([entry])[0])
        summary = pd.DataFrame(losses["reasons"]).rename(columns=REASON_LABELS)
        share = REASON_LABELS["share_of_lost_relevant"]
        st.dataframe(
            summary,
            hide_index=True,
            width="stretch",
            key="sys_reasons",
            column_config={share: st.column_config.NumberColumn(share, format="percent")},
        )
        for note in losses["notes"]:
            st.caption(f"Note: {note}")
        rows = loss_rows([entry])
        if rows:
            items = pd.DataFrame(rows).rename(columns=lambda c: c.replace("_", " "))
            st.dataframe(items, hide_index=True, width="stretch")


def _sweep_table(sweep: EngineSweep) -> pd.DataFrame:
    """One row per setting and the exact scorer's: its quality, latency and the items lost
    by reason, under the page's names."""
    rows = []
    for p in sweep.points:
        row = {
            "setting": p.name,
            ACCURACY: p.accuracy,
            NDCG: p.ndcg,
            "latency (µs)": round(p.latency_us, 1),
            "items lost": p.lost,
            "relevant lost": p.lost_relevant,
        }
        row |= {f"lost: {s['reason']}": s["items"] for s in p.reasons}
        rows.append(row)
    return pd.DataFrame(rows)


def show_sweep(sweep: EngineSweep) -> None:
    """What if the engine ran at other settings: the chart, the table, the notes."""
    st.subheader(f"What if: {sweep.engine} at {len(sweep.settings)} settings")
    st.caption(
        f"{sweep.engine} built once over {sweep.collection}'s stored vectors "
        f"({sweep.items:,} items; n_postings {sweep.n_postings:,}, heap_factor "
        f"{sweep.heap_factor:g}) in {sweep.build_seconds:.2f} s, then searched one query at a "
        f"time ({sweep.queries:,} queries, top {sweep.depth}); the exact scorer (red square) "
        f"timed the same way. {ACCURACY}: the share of the exact top {sweep.depth} returned; "
        "latency: median per query, timed in the app's own process beside its server "
        "(`lexlens evaluate --sweep` times it steadier)."
    )
    st.plotly_chart(sweep_figure(sweep), key="sys_sweep_chart")
    st.dataframe(_sweep_table(sweep), hide_index=True, width="stretch", key="sys_sweep_table")
    for note in ([sweep.ndcg_note] if sweep.ndcg_note else []) + sweep.notes:
        st.caption(f"Note: {note}")


def show_comparison(result: SystemsComparison) -> None:
    """Everything a comparison shows (see the module docstring)."""
    for note in result.notes:
        st.caption(f"Note: {note}")
    settings = result.settings
    st.subheader("Means")
    st.dataframe(_means(result), hide_index=True, width="stretch")
    st.caption(
        f"†: differs from {result.baseline} ({settings['test']}, "
        f"{settings['correction']}-corrected p < {settings['significance']}) over "
        f"{settings['queries']:,} queries. FLOPs: expected multiplications per query–item "
        "pair, Σₜ p_q(t)·p_d(t) (SPLADE, Dense2Sparse); postings: every posting of a query's "
        "terms; latency: the exact scorer's mean per query; empty for another engine's run."
    )
    figure = efficiency_figure(result)
    if figure is not None:
        st.subheader("Effectiveness against efficiency")
        st.plotly_chart(figure, key="sys_efficiency_chart")
    st.subheader("Significance")
    st.dataframe(
        pd.DataFrame([{k: r[k] for k in TABLE} for r in result.table]),
        hide_index=True,
        width="stretch",
        key="sys_table",
    )
    pairs = result.pairs()
    c1, c2 = st.columns([3, 1])
    pair = c1.selectbox(
        "Comparison",
        pairs,
        format_func=lambda p: f"{p[1]} vs {p[0]}",
        key=state.kept("sys_pair", pairs[0]),
    )
    measure = c2.selectbox(
        "Measure", result.measures, key=state.kept("sys_measure", result.measures[0])
    )
    _charts(result, tuple(pair), measure)
    extreme = next(e for e in result.extremes if (e["system_a"], e["system_b"]) == tuple(pair))
    queries = [q["query_id"] for q in extreme["wins"] + extreme["losses"]]
    queries += [q["id"] for q in result.per_query if q["id"] not in queries]
    texts = {q["id"]: q["text"] for q in result.per_query}
    st.subheader("Why")
    pick = st.selectbox(
        "Query (the largest wins and losses first)",
        queries,
        format_func=lambda q: f"{q}: {texts[q][:70]}",
        key="sys_query",
    )
    known = {(w.system_a, w.system_b, w.query_id): w for w in result.why}
    why = known.get((pair[0], pair[1], pick))
    if why is None:
        try:
            why = why_of(result, pick, tuple(pair))
        except LexlensError as exc:
            st.error(str(exc))
    if why is not None:
        _why(why)
    _fixes(result, tuple(pair))
    _engine_losses(result)
    if result.sweep is not None:
        show_sweep(result.sweep)
    _blame_shift(result, tuple(pair))
    files = result.files()
    cols = st.columns(len(files))
    for col, (name, data) in zip(cols, files.items(), strict=True):
        col.download_button(name, data, name, MIME[name.rsplit(".", 1)[-1]], key=f"sys_dl_{name}")
