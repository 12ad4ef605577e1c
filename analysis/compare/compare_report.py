"""The comparison report: compare.html (the template ``compare.html`` through
:func:`lexlens.analysis.render.html.render_report`, autoescaped), compare.json and its CSV
tables — what ``lexlens compare --out`` writes and the Compare page offers."""

from __future__ import annotations

from typing import Any

import numpy as np

from lexlens.analysis.compare.vocabularies import SIDES, vocabulary_note
from lexlens.analysis.core.outputs import csv_bytes, json_bytes, records_csv_bytes
from lexlens.analysis.render.html import cell_colour, num, render_report

TERMS_CSV_HEADER = [
    "scope",
    "view",
    "status",
    "token",
    "weight_a",
    "weight_b",
    "difference",
    "rank_a",
    "rank_b",
]


def _term_csv_rows(scope: str, c: Any) -> list[list[Any]]:
    rows: list[list[Any]] = []
    for status in ("shared", "only_a", "only_b"):
        for r in getattr(c, status):
            rows.append(
                [
                    scope,
                    "raw",
                    status,
                    r["token"],
                    r.get("weight_a"),
                    r.get("weight_b"),
                    r.get("difference"),
                    r.get("rank_a"),
                    r.get("rank_b"),
                ]
            )
        for r in c.merged[status]:
            rows.append(
                [
                    scope,
                    "merged",
                    status,
                    r["token"],
                    r.get("weight_a"),
                    r.get("weight_b"),
                    r.get("difference"),
                    None,
                    None,
                ]
            )
    return rows


def compare_files(result: Any) -> dict[str, bytes]:
    """compare.html, compare.json and the CSV tables of a result (CLI ``--out``, the page's
    downloads): every number the HTML shows is in the JSON, unrounded."""
    files = {
        "compare.html": render_html(result).encode("utf-8"),
        "compare.json": json_bytes(result),
    }
    if result.terms is not None:
        rows = _term_csv_rows("input", result.terms)
        if result.group is not None:
            rows += _term_csv_rows("group", result.group["terms"])
        files["compare_terms.csv"] = csv_bytes(TERMS_CSV_HEADER, rows)
    collection = result.collection
    if collection is not None:
        dev_rows = []
        for s in SIDES:
            d = collection["deviation"][s]
            for kind, part in d["sets"].items():
                dev_rows.append(
                    {
                        "side": s.upper(),
                        "set": kind,
                        "gate_k": d["gate_k"],
                        "n": part["n"],
                        "exact_at_k": part["exact_at_k"],
                        "semantic_at_k": part["semantic_at_k"],
                        "flops": part["flops"],
                        "flops_with_self_pairs": part["flops_with_self_pairs"],
                        "mean_active_dims": part["mean_active_dims"],
                        "flops_captions_images": d["flops_captions_images"],
                    }
                )
        files["compare_deviation.csv"] = records_csv_bytes(dev_rows)
        files["compare_vocabulary.csv"] = records_csv_bytes(collection["vocabulary"]["top_terms"])
        search = collection["search"]
        if search is not None:
            files["compare_hits.csv"] = records_csv_bytes(
                [
                    {
                        "id": h["id"],
                        "status": h["status"],
                        "rank_a": h["rank_a"],
                        "rank_b": h["rank_b"],
                        "score_a": h["score_a"],
                        "score_b": h["score_b"],
                        "changed_terms": [
                            f"{c['token']}:{c['change']:+.4g}" for c in h["changed_terms"]
                        ],
                    }
                    for h in search["hits"]
                ]
            )
    return files


def _heat_rows(side: dict | None) -> list[list[dict]] | None:

    if side is None:
        return None
    values = np.asarray(side["values"], dtype=np.float64)
    scale = float(np.abs(values).max()) if values.size else 0.0
    return [
        [
            {"colour": cell_colour(float(v), scale), "title": f"r{r}c{c}: {num(v)}"}
            for c, v in enumerate(row)
        ]
        for r, row in enumerate(values)
    ]


def render_html(result: Any) -> str:
    """The comparison as one self-contained HTML page (Jinja2, autoescaped)."""

    d = result.to_dict()
    info: dict[str, Any] = {"kind": result.kind, **result.input}
    for s in SIDES:
        side = d[s]
        info[s.upper()] = {k: v for k, v in side.items() if k not in ("crop_box",)}
    heat = None
    if result.heatmap is not None:
        heat = {
            "word": result.heatmap["word"],
            "a": result.heatmap["a"],
            "b": result.heatmap["b"],
            "rows_a": _heat_rows(result.heatmap["a"]),
            "rows_b": _heat_rows(result.heatmap["b"]),
        }
    return render_report(
        "compare.html",
        title=f"Lexlens comparison — A: {result.a['encoder']} (gate k {result.a['gate_k']})"
        f" · B: {result.b['encoder']} (gate k {result.b['gate_k']})",
        meta=info,
        r=d,
        vocabulary_note=vocabulary_note(result.vocabulary),
        heat=heat,
    )
