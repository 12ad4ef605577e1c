"""Results of several parts drawn in a notebook's output cell (IPython's ``_repr_html_``): a
benchmark evaluation (its measures, the worst queries, the failures grouped by cause with
their base rates), a counterfactual (the edit shown on the texts, the verified rank
before → after), a comparison of systems (the means with significance marks, the
significance table, each pair's sorted per-query differences) and a semantic deviation (each
set's metrics with the page's scatter of its items, plotly's script inline).

Each reads the result's JSON document (``to_dict()``), so the numbers shown are the
``--json`` ones; what only the capability computes (an order, a chart's bars) its result
passes in. Drawing only: one self-contained, escaped fragment of ``notebook_sections.html``
each, every table capped with the rest counted ("… N more")."""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from markupsafe import Markup

from lexlens.analysis.core.counts import counted
from lexlens.analysis.core.words import entry_label
from lexlens.analysis.render.html import num, render_fragment

#: Queries the evaluation view lists, worst first.
WORST_SHOWN = 10
#: Failures each cause's group lists.
FAILURES_PER_CAUSE = 10

MARK = "background:#fde68a;padding:0 2px;border-radius:3px"
STRUCK = "text-decoration:line-through;color:#b91c1c"


def rank_text(rank: int | None) -> str:
    """A rank as the views say it ("not retrieved" when there is none)."""
    return "not retrieved" if rank is None else str(rank)


def marked_query(query: str, edits: list[Mapping]) -> str:
    """The query with the words ``edits`` delete struck through (HTML, escaped)."""
    deleted = [e["word"] for e in edits if e.get("op") == "delete" and "word" in e]
    out = []
    for word in query.split():
        if word in deleted:
            deleted.remove(word)
            out.append(f'<span style="{STRUCK}">{html.escape(word)}</span>')
        else:
            out.append(html.escape(word))
    return " ".join(out)


def marked_document(edited: str | None, edits: list[Mapping]) -> str:
    """The edited document with the words ``edits`` insert (at its end) marked (HTML,
    escaped)."""
    text = edited or ""
    inserted = [e["word"] for e in edits if e.get("op") == "insert"]
    if not inserted:
        return html.escape(text)
    tail = " ".join(inserted)
    head = text[: len(text) - len(tail)].rstrip()
    words = " ".join(f'<mark style="{MARK}">+{html.escape(w)}</mark>' for w in inserted)
    return f"{html.escape(head)} {words}"


def _section(heading: str, **parts: Any) -> dict:
    """One part of a fragment, every key the template reads given (empty when absent)."""
    return {
        "summary": "",
        "texts": [],
        "table": None,
        "numeric": (),
        "chart": None,
        "figure": "",
        "more": 0,
        "more_where": "",
        **parts,
        "heading": heading,
    }


def _capped(rows: list[list[Any]], cap: int) -> tuple[list[list[Any]], int]:
    """The first ``cap`` rows and how many are left out."""
    return rows[:cap], max(0, len(rows) - cap)


def evaluation_html(doc: Mapping, worst: list[Mapping]) -> str:
    """A benchmark evaluation from its JSON document (``lexlens evaluate``'s, one system) and
    its per-query rows worst first: the mean measures, the :data:`WORST_SHOWN` worst
    queries by nDCG@10, and the failures grouped by cause (a failure under each of its
    causes; the worst query's first) with each cause's base rate among the successes when
    recorded."""
    aggregate = doc["metrics"]["aggregate"]
    per_query = doc["metrics"]["per_query"]
    failures = doc.get("failures") or []
    measures = list(aggregate)
    sections = [
        {
            "heading": "Measures (means over the queries)",
            "table": {"columns": measures, "rows": [[num(aggregate[m]) for m in measures]]},
            "numeric": tuple(range(len(measures))),
        }
    ]
    queries = [
        [q["id"], q["text"], num(q["nDCG@10"]), rank_text(q["first_relevant_rank"])] for q in worst
    ]
    shown, more = _capped(queries, WORST_SHOWN)
    sections.append(
        {
            "heading": "Queries, worst first",
            "summary": f"{len(per_query)} queries by nDCG@10, lowest first",
            "table": {"columns": ["query", "text", "nDCG@10", "first relevant"], "rows": shown},
            "numeric": (2, 3),
            "more": more,
            "more_where": "to_frame() holds every query",
        }
    )
    rates = {c["cause"]: c for c in (doc.get("cause_rates") or {}).get("causes", [])}
    counts = doc.get("causes") or {}
    rows = []
    for cause, count in counts.items():
        rate = rates.get(cause)
        rows.append(
            [
                cause,
                count,
                num(rate["success_rate"]) if rate else "–",
                num(rate["lift"]) if rate else "–",
                num(rate["p_bh"]) if rate else "–",
            ]
        )
    sections.append(
        {
            "heading": "Why queries fail: the failures by cause",
            "summary": f"{len(failures)} failures (a failure may have several causes); "
            "against the successes' base rate: lift = failures' rate / successes' rate, "
            "p (BH): Fisher's exact test, Benjamini–Hochberg across the causes",
            "table": {
                "columns": ["cause", "failures", "of successes", "lift", "p (BH)"],
                "rows": rows,
            },
            "numeric": (1, 2, 3, 4),
        }
    )
    place = {q["id"]: i for i, q in enumerate(worst)}
    ordered = sorted(failures, key=lambda f: place.get(f["query_id"], len(place)))
    for cause, count in counts.items():
        group = [f for f in ordered if cause in f.get("causes", [])]
        if not group:
            continue
        table = [
            [
                f["query_id"],
                f["query"],
                rank_text((f.get("relevant") or {}).get("rank")),
                (f.get("nonrelevant") or {}).get("id", ""),
                num(f.get("gap")),
                ", ".join(_word(d) for d in f.get("decisive", [])),
            ]
            for f in group
        ]
        shown, more = _capped(table, FAILURES_PER_CAUSE)
        sections.append(
            {
                "heading": f"{cause} — {counted(count, 'failure')}",
                "table": {
                    "columns": [
                        "query",
                        "text",
                        "relevant rank",
                        "ranked first",
                        "gap",
                        "decisive",
                    ],
                    "rows": shown,
                },
                "numeric": (2, 4),
                "more": more,
                "more_where": 'to_frame("failures") holds every failure',
            }
        )
    index = doc.get("index") or {}
    return render_fragment(
        "notebook_sections.html",
        title=f"Evaluation — {index.get('name') or index.get('path', '')}, {doc.get('encoder', '')}",
        notes=list(doc.get("notes") or []),
        summary="",
        sections=[_section(**s) for s in sections],
    )


def _word(entry: Mapping) -> str:
    """A decisive word as the report names it (a piece marked)."""
    return entry_label(entry)


def counterfactual_html(doc: Mapping) -> str:
    """A counterfactual from its JSON document (``lexlens counterfactual``'s): for each
    level, the edits shown on the texts (deleted query words struck, inserted words marked;
    the closest tried said not to be a fix) and the verified rank before → after."""
    items = (doc.get("index") or {}).get("items", 0)
    sections = []
    text = doc.get("counterfactual")
    if text is not None:
        edits = text["edits"]
        if text["found"] and not edits:
            summary = f"{text['target']} already ranks first."
        elif text["found"]:
            summary = (
                f"{len(edits)} edit(s) rank {text['target']} first (was rank "
                f"{rank_text(text['rank_before'])}) — verified: re-encoded and ranked against "
                f"all {items} items ({text['model_calls']} model calls)."
            )
        else:
            summary = (
                f"No edit within the budget ranks {text['target']} first; the closest tried "
                f"reaches rank {rank_text(text['rank_after'])} (was "
                f"{rank_text(text['rank_before'])}) — shown, not a fix."
            )
        texts = [("Query", Markup(marked_query(doc["query"], edits)))]
        if text.get("edited_document") is not None and any(
            e.get("side") == "document" for e in edits
        ):
            texts.append((text["target"], Markup(marked_document(text["edited_document"], edits))))
        sections.append(
            {
                "heading": "Text level: word edits, re-encoded",
                "summary": summary,
                "texts": texts,
                "table": _ranks_table(text),
                "numeric": (1, 2),
            }
        )
        sections[-1]["table"]["rows"].append(
            ["searched", f"{text['searched']} of {text['space']}", text["search"] or "–"]
        )
    terms = doc["terms"]
    removed = ", ".join(str(e.get("term")) for e in terms["edits"])
    if terms["found"] and terms["edits"]:
        how = "the smallest set" if terms["exact"] else "the smallest found"
        summary = f"Removing {how} of query-vector terms ranks it first: {removed}."
    elif terms["found"]:
        summary = f"{terms['target']} already ranks first."
    else:
        summary = (
            "No set of query terms removed ranks it first (" + "; ".join(terms["notes"]) + ")."
        )
    sections.append(
        {
            "heading": "Term level: vocabulary terms removed from the query vector",
            "summary": summary,
            "table": _ranks_table(terms),
            "numeric": (1, 2),
        }
    )
    shown = set(text["notes"]) if text is not None else set()
    notes = [
        *(text["notes"] if text is not None else []),
        *(n for n in doc.get("notes", []) if n not in shown),
    ]
    return render_fragment(
        "notebook_sections.html",
        title=f"What would it take? {doc['target']} first for {doc['query']!r}",
        notes=notes,
        summary="",
        sections=[_section(**s) for s in sections],
    )


def _ranks_table(answer: Mapping) -> dict:
    """An answer's rank, score and first rival, before → after."""
    return {
        "columns": ["", "before", "after"],
        "rows": [
            ["rank", rank_text(answer["rank_before"]), rank_text(answer["rank_after"])],
            ["score", num(answer["score_before"]), num(answer["score_after"])],
            ["first rival", answer.get("rival_before") or "–", answer.get("rival_after") or "–"],
        ],
    }


#: Rows of a comparison's significance table the view draws.
PAIRS_SHOWN = 20


def systems_html(
    doc: Mapping,
    significant: Mapping[tuple[str, str], bool],
    charts: Mapping[str, list[dict]],
    size: tuple[int, int],
) -> str:
    """A comparison of systems from its JSON document (``lexlens evaluate`` with several),
    which (system, measure) differ significantly from the baseline, and per pair ("A → B")
    the report's bars of the sorted per-query differences (``size``: the chart's width and
    height): each system's means, † where significant; each pair × measure's difference
    with its corrected p-values and wins/ties/losses; the charts as inline SVG."""
    measures = list(doc["measures"])
    means = [
        [
            s["name"] + (" (baseline)" if s["name"] == doc["baseline"] else ""),
            *(
                num(doc["means"][s["name"]][m]) + ("†" if significant.get((s["name"], m)) else "")
                for m in measures
            ),
        ]
        for s in doc["systems"]
    ]
    settings = doc.get("settings") or {}
    sections = [
        _section(
            "Means",
            summary=f"†: differs from {doc['baseline']} ({settings.get('test', '')}, "
            f"{settings.get('correction', '')}-corrected p < {settings.get('significance', '')})",
            table={"columns": ["system", *measures], "rows": means},
            numeric=tuple(range(1, len(measures) + 1)),
        )
    ]
    rows = [
        [
            f"{t['system_b']} vs {t['system_a']}",
            t["measure"],
            num(t["delta"]) + ("†" if t.get("significant") else ""),
            num(t.get("p_t_corrected")),
            num(t.get("p_wilcoxon_corrected")),
            f"{t['wins']}/{t['ties']}/{t['losses']}",
        ]
        for t in doc["table"]
    ]
    shown, more = _capped(rows, PAIRS_SHOWN)
    sections.append(
        _section(
            "Significance: B − A",
            table={
                "columns": ["B vs A", "measure", "Δ", "p t (corr.)", "p Wilcoxon (corr.)", "W/T/L"],
                "rows": shown,
            },
            numeric=(2, 3, 4),
            more=more,
            more_where="to_frame() holds every pair and measure",
        )
    )
    for pair, bars in charts.items():
        sections.append(
            _section(
                f"Per query: {measures[0]}, {pair}, B − A sorted",
                chart={"width": size[0], "height": size[1], "bars": bars},
            )
        )
    return render_fragment(
        "notebook_sections.html",
        title=f"Systems compared — {len(doc['systems'])} systems",
        notes=list(doc.get("notes") or []),
        summary="",
        sections=sections,
    )


#: Items of a deviation set the view lists (the scatter draws every item the result holds).
DEVIATION_ITEMS_SHOWN = 20


def deviation_html(doc: Mapping, figures: Mapping[str, str]) -> str:
    """A semantic deviation from its JSON document (``lexlens deviation``'s) and, per set
    kind, the page's scatter of its items as self-contained HTML (plotly's figure with its
    script inline): each set's Exact@k, Semantic@k (both denominators), FLOPs and mean
    active dimensions, the figure, and its first items (what caps Exact@k: the notes)."""
    k = doc["k"]
    sections = []
    for part in (doc.get("captions"), doc.get("images")):
        if part is None:
            continue
        kind = part["kind"]
        by = part.get("by_denominator") or {}
        measured = f"{part['n_measured']} of {part['n']} {kind} measured"
        sections.append(
            _section(
                f"{kind.capitalize()}: the metrics",
                summary=measured,
                table={
                    "columns": [
                        "denominator",
                        f"Exact@{k}",
                        f"Semantic@{k}",
                        "FLOPs Σⱼ p̄ⱼ²",
                        "FLOPs, no self-pairs",
                        "mean active dims",
                    ],
                    "rows": [
                        [
                            name + (" (this result's)" if name == doc["denominator"] else ""),
                            num(values.get("exact_at_k")),
                            num(values.get("semantic_at_k")),
                            num(part["flops_with_self_pairs"]),
                            num(part["flops"]),
                            num(part["mean_active_dims"]),
                        ]
                        for name, values in by.items()
                    ],
                },
                numeric=(1, 2, 3, 4, 5),
            )
        )
        items = [
            [
                r["text"],
                r["positive_terms"],
                num(r["exact_at_k"]),
                num(r["semantic_at_k"]),
                " ".join(r.get("top_words") or r.get("top_terms") or []),
            ]
            for r in part["rows"]
        ]
        shown, more = _capped(items, DEVIATION_ITEMS_SHOWN)
        sections.append(
            _section(
                f"{kind.capitalize()}: per item",
                figure=Markup(figures.get(kind, "")),
                table={
                    "columns": [
                        kind[:-1],
                        "positive terms",
                        f"Exact@{k}",
                        f"Semantic@{k}",
                        f"top-{k} terms",
                    ],
                    "rows": shown,
                },
                numeric=(1, 2, 3),
                more=more,
                more_where="to_frame() holds every item",
            )
        )
    flops = doc.get("flops_captions_images")
    return render_fragment(
        "notebook_sections.html",
        title=f"Semantic deviation — {doc.get('encoder', '')}, k = {k}, gate k = "
        f"{doc.get('gate_k', '')}",
        notes=list(doc.get("notes") or []),
        summary="" if flops is None else f"FLOPs between the captions and the images: {num(flops)}",
        sections=sections,
    )
