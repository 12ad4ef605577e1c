"""What a comparison of systems returns and writes: :class:`SystemsComparison` and its files
comparison.json, comparison.csv (the significance table), per_query_deltas.csv,
comparison.html (Jinja2, autoescaped) and comparison.tex (a LaTeX table)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from lexlens.analysis.core.outputs import csv_bytes, json_bytes
from lexlens.analysis.core.results import Result, internal
from lexlens.analysis.render.notebook import systems_html
from lexlens.analysis.systems.efficiency import EFFICIENCY_COLUMNS
from lexlens.analysis.systems.engine_loss import loss_files
from lexlens.analysis.systems.engine_sweep import EngineSweep
from lexlens.analysis.systems.report import (
    CHART_HEIGHT,
    CHART_WIDTH,
    comparison_html,
    delta_bars,
    latex_table,
    marks,
)
from lexlens.analysis.systems.risk import ALPHAS
from lexlens.analysis.systems.systems import System
from lexlens.analysis.systems.why import QueryWhy

#: comparison.csv's columns (one row per pair × measure).
TABLE_COLUMNS = (
    "system_a",
    "system_b",
    "measure",
    "mean_a",
    "mean_b",
    "delta",
    "ci_low",
    "ci_high",
    "t",
    "p_t",
    "p_t_corrected",
    "wilcoxon",
    "p_wilcoxon",
    "p_wilcoxon_corrected",
    "p_randomization",
    "p_randomization_corrected",
    "significant",
    "effect_size",
    "wins",
    "ties",
    "losses",
    *(f"{k}_{a}" for a in ALPHAS for k in ("urisk", "trisk", "p_trisk")),
    "fixed",
    "broken",
    "p_mcnemar",
    *(f"{c}_{side}" for c in EFFICIENCY_COLUMNS for side in ("a", "b")),
)
#: per_query_deltas.csv's columns (one row per pair × query × measure).
DELTA_COLUMNS = ("system_a", "system_b", "query_id", "query", "measure", "a", "b", "delta")


@dataclass(frozen=True)
class SystemsComparison(Result):
    """Several systems on one benchmark (see :mod:`lexlens.analysis.systems.comparison`):
    ``means`` per system and measure; ``table`` one row per compared pair × measure;
    ``georisk`` per measure and system (three or more systems); ``per_query`` every
    query's values; ``extremes`` the largest wins and losses of each pair; ``why`` those
    explained; ``blame_shift`` the words behind one system's failures and not the other's
    (``note``: why a pair has none);
    ``engine`` how an outside run of a collection differs from its exact ranking;
    ``missing`` the judged queries each run does not list; ``fixes`` per pair the queries B
    fixes and breaks, McNemar's exact p and the causes behind both; ``efficiency`` what each
    system costs (FLOPs, postings, latency, bytes); ``sweep`` the engine itself at several
    settings beside the exact scorer. A section of the baseline's
    evaluation (:class:`~lexlens.analysis.evaluation.sections.Section`) under
    ``comparison``: what ``lexlens evaluate`` reports for several systems."""

    file_stem = "comparison"
    key: ClassVar[str] = "comparison"

    systems: list[System]
    baseline: str
    measures: list[str]
    settings: dict
    means: dict
    table: list[dict]
    georisk: dict | None
    per_query: list[dict]
    extremes: list[dict]
    why: list[QueryWhy]
    blame_shift: list[dict]
    engine: list[dict]
    missing: dict
    notes: list[str] = field(default_factory=list)
    #: per compared pair: the queries B fixes and breaks, McNemar's exact p, their causes
    #: (:mod:`lexlens.analysis.systems.fixes`)
    fixes: list[dict] = field(default_factory=list)
    #: per system: FLOPs, mean postings touched per query, the exact scorer's mean latency
    #: (ms) and the index's bytes (:mod:`lexlens.analysis.systems.efficiency`; ``None``: a run)
    efficiency: dict = field(default_factory=dict)
    #: what if the engine ran at other settings: accuracy@10, nDCG@10 and latency per
    #: setting beside the exact scorer's (:mod:`lexlens.analysis.systems.engine_sweep`)
    sweep: EngineSweep | None = None
    #: {system: {query: [(item, score), …]}} as evaluated, and the relevant judgements
    #: ({query: {item: relevance}}): what explaining another query needs; not in the JSON
    runs: dict = internal(default_factory=dict)
    judged: dict = internal(default_factory=dict)

    def pairs(self) -> list[tuple[str, str]]:
        """The compared pairs (A, B), in the table's order."""
        return list(dict.fromkeys((r["system_a"], r["system_b"]) for r in self.table))

    def deltas(self) -> list[dict]:
        """per_query_deltas.csv's rows: each pair × measure × query, B − A."""
        rows = []
        for a, b in self.pairs():
            for m in self.measures:
                for q in self.per_query:
                    x, y = q["values"][a][m], q["values"][b][m]
                    rows.append(
                        {
                            "system_a": a,
                            "system_b": b,
                            "query_id": q["id"],
                            "query": q["text"],
                            "measure": m,
                            "a": x,
                            "b": y,
                            "delta": y - x,
                        }
                    )
        return rows

    def frame_rows(self) -> list[dict]:
        """comparison.csv's rows: one per compared pair × measure."""
        return [{c: r.get(c) for c in TABLE_COLUMNS} for r in self.table]

    def frame_tables(self) -> dict:
        """comparison (comparison.csv: each pair × measure) and deltas
        (per_query_deltas.csv: each pair × measure × query, B − A)."""
        return {
            "comparison": (TABLE_COLUMNS, self.frame_rows),
            "deltas": (
                DELTA_COLUMNS,
                lambda: [{c: r[c] for c in DELTA_COLUMNS} for r in self.deltas()],
            ),
        }

    def notebook_html(self) -> str:
        """Means with † marks, the significance table, the delta charts (notebook view)."""
        primary = self.measures[0]
        charts = {f"{a} → {b}": delta_bars(self, (a, b), primary) for a, b in self.pairs()}
        size = (CHART_WIDTH, CHART_HEIGHT)
        return systems_html(self.to_dict(), marks(self), charts, size)

    def files(self) -> dict[str, bytes]:
        """comparison.json, comparison.csv, per_query_deltas.csv, comparison.html,
        comparison.tex and, when an engine's losses have reasons, engine_losses.csv; with a
        sweep, engine_sweep.csv."""
        return {
            "comparison.json": json_bytes(self),
            "comparison.csv": csv_bytes(
                TABLE_COLUMNS, [[r.get(c) for c in TABLE_COLUMNS] for r in self.table]
            ),
            "per_query_deltas.csv": csv_bytes(
                DELTA_COLUMNS, [[r[c] for c in DELTA_COLUMNS] for r in self.deltas()]
            ),
            "comparison.html": comparison_html(self).encode("utf-8"),
            "comparison.tex": latex_table(self).encode("utf-8"),
            **loss_files(self.engine),
            **(self.sweep.section_files() if self.sweep is not None else {}),
        }

    def section_files(self) -> dict[str, bytes]:
        """Its files (:meth:`files`), beside the evaluation's."""
        return self.files()

    def html(self) -> str:
        """No block in evaluation.html: the comparison is its own report (comparison.html)."""
        return ""

    def text(self) -> str:
        """No lines after the evaluation's: the command shows the comparison instead."""
        return ""
