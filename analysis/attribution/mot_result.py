"""The result of the masking evaluation: the table, its tests, the IG completeness behind
it, and the files it is saved as (mot.json, CSV tables, an HTML view)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from lexlens.analysis.attribution.mot_stats import pairwise
from lexlens.analysis.attribution.options import DEFAULT_TOLERANCE
from lexlens.analysis.attribution.report_html import render_attribution_html
from lexlens.analysis.core.outputs import csv_bytes, frame_csv_bytes, json_bytes
from lexlens.analysis.core.results import Result, internal


@dataclass(frozen=True)
class MotResult(Result):
    """The masking table, its significance tests and the IG completeness behind it.

    Attributes:
        table: mean error, rows = rankings (+ reference rows), columns = M (int).
        significance: one row per (M, baseline): mean errors, the share of documents where
            MoT's error is lower, Wilcoxon and t-test p-values and their FDR q-values.
        per_doc: for each M, per-document errors (rows = corpus positions).
        gaps / deltas: for each M, ``F_i(x) − F_i(x')`` and the completeness gap ``delta_i``
            of every document × sub-vector, at the steps used (``steps``: per document).
        settings: what was run (keep, steps, mask, K, corpus sizes, seed, choices).
        source: the name of the corpus (shown in the HTML view only).
    """

    file_stem = "mot"

    encoder: str
    table: pd.DataFrame
    significance: pd.DataFrame
    per_doc: dict[int, pd.DataFrame]
    gaps: dict[int, pd.DataFrame]
    deltas: dict[int, pd.DataFrame]
    steps: dict[int, pd.Series]
    settings: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    source: str = internal(default="")

    def relative_deltas(self, m: int) -> pd.DataFrame:
        """``|delta_i| / |F_i(x) − F_i(x')|`` per document × sub-vector."""
        gap = self.gaps[m].abs()
        return (self.deltas[m].abs() / gap.where(gap > 0)).fillna(np.inf)

    def convergence(self) -> pd.DataFrame:
        """Per M: steps used and the relative completeness deltas at those steps."""
        rows = []
        tol = float(self.settings.get("tolerance", DEFAULT_TOLERANCE))
        for m in self.table.columns:
            rel = self.relative_deltas(m).to_numpy().ravel()
            rel = rel[np.isfinite(rel)]
            steps = self.steps[m]
            rows.append(
                {
                    "m": int(m),
                    "steps_min": int(steps.min()),
                    "steps_median": float(steps.median()),
                    "steps_max": int(steps.max()),
                    "relative_delta_mean": float(rel.mean()) if rel.size else 0.0,
                    "relative_delta_median": float(np.median(rel)) if rel.size else 0.0,
                    "relative_delta_max": float(rel.max()) if rel.size else 0.0,
                    "share_above_tolerance": float((rel > tol).mean()) if rel.size else 0.0,
                }
            )
        return pd.DataFrame(rows)

    def to_dict(self) -> dict:
        """Every number: the table, the tests, the per-document errors and deltas.

        Written by hand: the fields are pandas frames keyed by M, and the JSON holds their
        records (with the pairwise tests and the convergence summary derived from them).
        """
        ms = [int(m) for m in self.table.columns]
        return {
            "kind": "mot",
            "encoder": self.encoder,
            "settings": dict(self.settings),
            "notes": list(self.notes),
            "rankings": list(self.table.index),
            "table": {str(m): {r: float(v) for r, v in self.table[m].items()} for m in ms},
            "significance": self.significance.to_dict(orient="records"),
            "pairwise": pairwise(self.per_doc).to_dict(orient="records"),
            "convergence": self.convergence().to_dict(orient="records"),
            "per_m": {
                str(m): {
                    "docs": [int(i) for i in self.per_doc[m].index],
                    "errors": {c: self.per_doc[m][c].tolist() for c in self.per_doc[m].columns},
                    "steps": [int(s) for s in self.steps[m]],
                    "target_gap": self.gaps[m].to_numpy().tolist(),
                    "delta": self.deltas[m].to_numpy().tolist(),
                }
                for m in ms
            },
        }

    def csv_files(self) -> dict[str, bytes]:
        """The CSV tables: the table, the tests, convergence, per-document errors and deltas
        (also part of the attribution report's files when it ran the masking evaluation)."""
        table = self.table.copy()
        table.columns = [str(c) for c in table.columns]
        files = {
            "mot.csv": frame_csv_bytes(table, index=True),
            "mot_tests.csv": frame_csv_bytes(self.significance),
            "mot_pairs.csv": frame_csv_bytes(pairwise(self.per_doc)),
            "mot_convergence.csv": frame_csv_bytes(self.convergence()),
        }
        for m, frame in self.per_doc.items():
            files[f"mot_docs_M{m}.csv"] = frame_csv_bytes(frame.rename_axis("doc"), index=True)
            rows = []
            rel = self.relative_deltas(m)
            for doc in frame.index:
                for j in range(m):
                    col = f"sv{j}"
                    rows.append(
                        [
                            int(doc),
                            j,
                            int(self.steps[m].loc[doc]),
                            float(self.gaps[m].loc[doc, col]),
                            float(self.deltas[m].loc[doc, col]),
                            float(rel.loc[doc, col]),
                        ]
                    )
            files[f"mot_deltas_M{m}.csv"] = csv_bytes(
                ["doc", "subvector", "steps", "target_gap", "delta", "relative_delta"], rows
            )
        return files

    def html(self) -> str:
        """The HTML view: the masking table, the tests and the completeness summary."""

        meta = {"corpus": self.source, **{k: v for k, v in self.settings.items() if k != "k"}}
        meta["notes"] = list(self.notes)
        return render_attribution_html([], encoder_name=self.encoder, mot=self, meta=meta)

    def files(self) -> dict[str, bytes]:
        """mot.json (``to_dict``), the CSV tables and report.html."""
        return {
            "mot.json": json_bytes(self),
            **self.csv_files(),
            "report.html": self.html().encode(),
        }
