"""The text view of ``lexlens compare``: terms shared and apart, a patch group, a term's
heatmap, and two stored collections side by side."""

from __future__ import annotations

from lexlens.analysis.compare.result import CompareResult, TermComparison
from lexlens.analysis.deviation.flops import FLOPS_LABEL, PAIRS_LABEL
from lexlens.app.cli import common


def _terms_table(c: TermComparison) -> str:
    n = c.counts
    rc = c.rank_correlation
    rho = "not defined" if rc["rho"] is None else f"{rc['rho']:.4f}"
    lines = [
        f"active terms: A {n['active_a']}, B {n['active_b']}; shared {n['shared']}, only in A "
        f"{n['only_a']} ({n['only_a_no_counterpart']} not in B's vocabulary), only in B "
        f"{n['only_b']} ({n['only_b_no_counterpart']} not in A's vocabulary)",
        f"Spearman's rho of the shared weights: {rho} (n = {rc['n']})"
        + (f" — {rc['note']}" if rc.get("note") else ""),
    ]
    m = c.merged
    lines.append(
        common.format_table(
            [[r["token"], r["weight_a"], r["weight_b"], r["difference"]] for r in m["shared"]],
            ["shared (words)", "A", "B", "B - A"],
        )
    )
    lines.append(
        common.format_table([[r["token"], r["weight_a"]] for r in m["only_a"]], ["only in A", "A"])
    )
    lines.append(
        common.format_table([[r["token"], r["weight_b"]] for r in m["only_b"]], ["only in B", "B"])
    )
    return "\n\n".join(lines)


def render(result: CompareResult) -> str:
    """The plain-text view of a result."""
    a, b = result.a, result.b
    lines = [
        f"A: {a['encoder']} (gate k {a['gate_k']})" + (f", {a['index']}" if "index" in a else ""),
        f"B: {b['encoder']} (gate k {b['gate_k']})" + (f", {b['index']}" if "index" in b else ""),
    ]
    lines += [f"note: {n}" for n in result.notes]
    blocks = ["\n".join(lines)]
    if result.terms is not None:
        blocks.append(_terms_table(result.terms))
    if result.group is not None:
        g = result.group
        blocks.append(
            f"patch group: A cells {' '.join(g['cells_a'])}; B cells {' '.join(g['cells_b'])}\n"
            + _terms_table(g["terms"])
        )
    if result.heatmap is not None:
        h = result.heatmap
        parts = [
            f"{s.upper()}: max {h[s]['max']:.4f} at {h[s]['argmax']} of "
            f"{h[s]['grid'][0]}x{h[s]['grid'][1]}"
            for s in ("a", "b")
            if h[s] is not None
        ]
        blocks.append(f"heatmap of {h['word']!r}: " + "; ".join(parts))
    if result.collection is not None:
        blocks += _collection_blocks(result.collection)
    return "\n\n".join(blocks)


def _collection_blocks(col: dict) -> list[str]:
    rows = []
    dev_a, dev_b = col["deviation"]["a"], col["deviation"]["b"]
    for kind, pa in dev_a["sets"].items():
        pb = dev_b["sets"].get(kind) or {}
        for key, label in (
            ("exact_at_k", f"Exact@{col['k']}"),
            ("semantic_at_k", f"Semantic@{col['k']}"),
            ("flops_with_self_pairs", FLOPS_LABEL),
            ("flops", PAIRS_LABEL),
            ("mean_active_dims", "mean active dims"),
        ):
            rows.append([kind, label, _num(pa.get(key)), _num(pb.get(key))])
    if dev_a["flops_captions_images"] is not None:
        rows.append(
            [
                "captions x images",
                "FLOPs (D2S)",
                _num(dev_a["flops_captions_images"]),
                _num(dev_b["flops_captions_images"]),
            ]
        )
    blocks = [common.format_table(rows, ["set", "measure", "A", "B"])]
    vocab = col["vocabulary"]
    blocks.append(
        common.format_table(
            [
                [
                    t["token"],
                    _num(t["mean_weight_a"]),
                    _num(t["mean_weight_b"]),
                    _num(t["activation_rate_a"]),
                    _num(t["activation_rate_b"]),
                ]
                for t in vocab["top_terms"]
            ],
            ["term", "mean A", "mean B", "rate A", "rate B"],
        )
    )
    for s in ("a", "b"):
        if vocab[s] is not None:
            lazy = vocab[s]["lazy_terms"]
            blocks.append(f"lazy terms in {s.upper()}: " + (" ".join(lazy[:30]) or "none"))
    if col["search"] is not None:
        blocks += _search_blocks(col["search"])
    return blocks


def _search_blocks(search: dict) -> list[str]:
    """A query's metrics (when it has judgements or names a label) and its moved hits."""
    blocks, metrics = [], search["metrics"]
    if metrics:
        by = "kept judgements" if metrics.get("judged") == "kept" else "label"
        blocks.append(
            f"metrics of {search['query']!r} ({metrics['relevant']} relevant, by {by}): "
            + "; ".join(
                f"{s.upper()} " + " ".join(f"{m} {v:.4f}" for m, v in metrics[s].items())
                for s in ("a", "b")
            )
        )
    judged = any("relevance" in h for h in search["hits"])
    rows = [
        [
            *([h["relevance"] or "-"] if judged else []),
            h["id"],
            h["status"],
            h["rank_a"] or "-",
            h["rank_b"] or "-",
            h["score_a"],
            h["score_b"],
            " ".join(f"{c['token']}:{c['change']:+.3f}" for c in h["changed_terms"][:5]),
        ]
        for h in search["hits"]
    ]
    header = [
        *(["relevance"] if judged else []),
        "hit",
        "status",
        "rank A",
        "rank B",
        "score A",
        "score B",
        "changed terms",
    ]
    return [*blocks, common.format_table(rows, header)]


def _num(value: object) -> str:
    return "-" if value is None else f"{value:.4f}"
