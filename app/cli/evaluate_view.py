"""The text views of ``lexlens evaluate``: one system's metrics, worst queries, failures and
blame; several systems' means, tests and largest wins and losses."""

from __future__ import annotations

from lexlens.analysis.core.counts import counted
from lexlens.analysis.core.words import entry_label
from lexlens.analysis.evaluation.causes import blame_lines, cause_lines
from lexlens.analysis.evaluation.result import (
    BLAME_COLUMNS,
    JUDGED,
    MEASURES,
    Evaluation,
    worst_first,
)
from lexlens.analysis.evaluation.slices import slice_lines
from lexlens.analysis.systems.engine_loss import loss_lines
from lexlens.analysis.systems.engine_sweep import sweep_lines
from lexlens.analysis.systems.fixes import fixes_lines
from lexlens.analysis.systems.report import marks
from lexlens.analysis.systems.result import SystemsComparison
from lexlens.app.cli import common

#: Rows of each table in the text view (the JSON and --out files hold all).
SHOWN = 10


#: The text view's columns (named as in per_query.csv and failures.csv).
WORST_COLUMNS = ["query_id", "nDCG@10", "first_relevant_rank", "relevant_rank", "relevant_status"]
FAILURE_COLUMNS = ["query_id", "nonrelevant", "relevant", "relevant_rank", "relevant_status"]


def _rank(rank: int | None) -> int | str:
    return "-" if rank is None else rank


def render(result: Evaluation) -> str:
    """The text view: metrics, the worst queries, failures and blame (columns named as in
    the CSV files; an absent rank is "-", relevant_status says why)."""
    aggregate = result.metrics["aggregate"]
    blocks = [
        f"{counted(result.settings['queries'], 'query')}, {result.index.get('items', '?')} items, "
        f"query encoder {result.encoder}",
        common.format_table([[aggregate[m] for m in MEASURES]], list(MEASURES)),
    ]
    if JUDGED in aggregate:
        blocks.append(f"{JUDGED} {aggregate[JUDGED]:.4f} (the share of the top 10 judged)")
    worst = [
        [
            q["id"],
            q["nDCG@10"],
            _rank(q["first_relevant_rank"]),
            _rank(q["relevant_rank"]),
            q["relevant_status"],
            q["text"][:50],
        ]
        for q in worst_first(result.metrics["per_query"])[:SHOWN]
    ]
    blocks.append(common.format_table(worst, [*WORST_COLUMNS, "query"]))
    failures = [
        [
            f.query_id,
            f.nonrelevant.id if f.nonrelevant else "-",
            f.relevant.id if f.relevant else "-",
            _rank(f.relevant.rank if f.relevant else None),
            f.relevant_status,
            ", ".join(entry_label(d) for d in f.decisive[:5]),
        ]
        for f in result.failures[:SHOWN]
    ]
    blocks.append(common.format_table(failures, [*FAILURE_COLUMNS, "decisive_words"]))
    blocks.append(
        common.format_table(
            [[b["word"], b["pushed"], b["amount"], b["mismatch"]] for b in result.blame[:SHOWN]],
            list(BLAME_COLUMNS[:4]),
        )
    )
    for lines in (
        cause_lines(result.cause_rates),
        blame_lines(result.blame, result.cause_rates),
        slice_lines(result.slices),
    ):
        if lines:
            blocks.append("\n".join(lines))
    blocks += [f"note: {n}" for n in result.notes]
    return "\n\n".join(blocks)


def view(result: Evaluation) -> str:
    """The text view of what ``lexlens evaluate`` reports: several systems' comparison, or
    one system's evaluation followed by its sections' lines."""
    comparison = result.reported()
    if isinstance(comparison, SystemsComparison):
        return compared(comparison)
    return render(result) + result.sections_text()


def _p(value: float) -> str:
    return f"{value:.3g}"


def _costs(result: SystemsComparison) -> list[str]:
    """Each measured system's FLOPs, postings per query, latency and index size (none: only
    runs, whose costs are not Lexlens's to measure)."""

    def shown(value: float | None, form: str) -> str:
        return "–" if value is None else format(value, form)

    rows = [
        [
            s.name,
            shown(e.get("flops"), ".4g"),
            shown(e.get("postings_per_query"), ",.1f"),
            shown(e.get("latency_ms"), ".2f"),
            shown(None if e.get("index_bytes") is None else e["index_bytes"] / 1e6, ".2f"),
        ]
        for s in result.systems
        for e in [result.efficiency.get(s.name) or {}]
    ]
    if all(r[1] == "–" for r in rows):
        return []
    header = ["system", "FLOPs", "postings/query", "latency ms", "index MB"]
    return [common.format_table(rows, header)]


def compared(result: SystemsComparison) -> str:
    """The text view of several systems: means (†: significant against the baseline), the
    significance table, the largest wins and losses, notes."""

    significant = marks(result)
    means = [
        [
            s.name + (" *" if s.name == result.baseline else ""),
            s.kind,
            *(
                f"{result.means[s.name][m]:.4f}" + ("†" if significant.get((s.name, m)) else "")
                for m in result.measures
            ),
        ]
        for s in result.systems
    ]
    settings = result.settings
    blocks = [
        f"{counted(settings['queries'], 'query')}, {len(result.systems)} systems, baseline * "
        f"{result.baseline}; † {settings['test']} {settings['correction']}-corrected p < "
        f"{settings['significance']}",
        common.format_table(means, ["system", "kind", *result.measures]),
        *_costs(result),
    ]
    rows = [
        [
            f"{t['system_b']} vs {t['system_a']}",
            t["measure"],
            f"{t['delta']:+.4f}" + ("†" if t["significant"] else ""),
            f"[{t['ci_low']:+.3f}, {t['ci_high']:+.3f}]",
            _p(t["p_t_corrected"]),
            _p(t["p_wilcoxon_corrected"]),
            _p(t["p_randomization_corrected"]),
            "-" if t["effect_size"] is None else f"{t['effect_size']:.2f}",
            f"{t['wins']}/{t['ties']}/{t['losses']}",
            f"{t['urisk_1']:+.4f}",
            "-" if t["trisk_1"] is None else f"{t['trisk_1']:.2f}",
        ]
        for t in result.table
    ]
    blocks.append(
        common.format_table(
            rows,
            [
                "comparison",
                "measure",
                "delta",
                "95% CI",
                "p_t",
                "p_wilcoxon",
                "p_rand",
                "d",
                "W/T/L",
                "urisk_1",
                "trisk_1",
            ],
        )
    )
    if lines := fixes_lines(result.fixes):
        blocks.append("\n".join(lines))
    for e in result.extremes:
        listed = [
            [kind, q["query_id"], f"{q['delta']:+.3f}", q["query"][:50]]
            for kind in ("wins", "losses")
            for q in e[kind][: SHOWN // 2]
        ]
        if listed:
            title = f"{e['system_b']} vs {e['system_a']}, {e['measure']}"
            blocks.append(
                title + "\n" + common.format_table(listed, ["", "query_id", "delta", "query"])
            )
    losses = loss_lines(result.engine)
    if losses:
        blocks.append("\n".join(losses))
    if result.sweep is not None:
        blocks.append("\n".join(sweep_lines(result.sweep)))
    blocks += [f"note: {n}" for n in result.notes]
    return "\n\n".join(blocks)
