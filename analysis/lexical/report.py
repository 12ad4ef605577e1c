"""The terms report (lexical encoders): per text an inline word-cloud PNG and its top terms.

One use case, :func:`terms_report`, returning a :class:`TermsReport` whose ``files()`` are
report.html (the template ``terms.html`` through
:func:`lexlens.analysis.render.html.render_report`, autoescaped), report.json (exactly
``to_dict()``) and terms.csv (formula-safe cells).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lexlens.analysis.core.arguments import loaded_encoder, texts_argument
from lexlens.analysis.core.options import checked
from lexlens.analysis.core.outputs import csv_bytes, json_bytes
from lexlens.analysis.core.results import Record, Result
from lexlens.analysis.lexical.terms import (
    REPORT_TOP,
    TEXT_NEEDS,
    TermsOptions,
    TermsResult,
    cloud_url,
    term_kind,
    terms_of_encoding,
)
from lexlens.analysis.render.html import num, render_report

#: Inputs drawn in the HTML; the rest are in the JSON only.
MAX_HTML_ITEMS = 50
TERMS_CSV_HEADER = ["item_index", "label", "rank", "token", "weight", "index", "kind"]


@dataclass(frozen=True)
class LabelledTerms(Record):
    """The top terms of one input of the report, under its label."""

    label: str
    terms: TermsResult

    def to_dict(self) -> dict:
        """The terms result's own document with the label first (written by hand: one flat
        item per input, as the report has always written it)."""
        return {"label": self.label, **self.terms.to_dict()}


@dataclass(frozen=True, kw_only=True)
class TermsReport(Result):
    """Top terms (with word clouds) of each text, for a lexical encoder."""

    file_stem = "report"

    kind: str = field(default="terms-report", init=False)
    encoder: str
    meta: dict = field(default_factory=dict)
    items: list[LabelledTerms]

    @property
    def notes(self) -> list[str]:
        """The notes of every input, each once."""
        return list(dict.fromkeys(n for item in self.items for n in item.terms.notes))

    def html(self, max_items: int = MAX_HTML_ITEMS) -> str:
        """report.html: per input (up to ``max_items``) its notes, word cloud and top terms."""
        shown = []
        for item in self.items[: max(0, max_items)]:
            rows = item.terms.terms
            shown.append(
                {
                    "label": item.label,
                    "notes": list(item.terms.notes),
                    "cloud": cloud_url(rows),
                    "table": {
                        "columns": ["rank", "term", "weight", "kind"],
                        "rows": [
                            [r + 1, t["token"], num(t["weight"]), term_kind(t)]
                            for r, t in enumerate(rows)
                        ],
                    },
                }
            )
        return render_report(
            "terms.html",
            title=f"Lexlens terms report — {self.encoder}",
            meta={"encoder": self.encoder, "inputs": len(self.items), **self.meta},
            items=shown,
            hidden=len(self.items) - len(shown),
        )

    def files(self) -> dict[str, bytes]:
        """report.html, report.json (``to_dict``) and terms.csv (one row per input × term)."""
        rows = [
            [i, item.label, r + 1, t["token"], float(t["weight"]), int(t["index"]), term_kind(t)]
            for i, item in enumerate(self.items)
            for r, t in enumerate(item.terms.terms)
        ]
        return {
            "report.html": self.html().encode("utf-8"),
            "report.json": json_bytes(self),
            "terms.csv": csv_bytes(TERMS_CSV_HEADER, rows),
        }


def terms_report(
    encoder, texts: list[str], *, top: int = REPORT_TOP, source: str = ""
) -> TermsReport:
    """The top terms of every text through a lexical text encoder (the use case); ``top`` is
    checked by :class:`TermsOptions`' declaration."""
    texts = texts_argument(texts)
    top = checked(TermsOptions, "top", top)
    encoder = loaded_encoder(encoder, needs=TEXT_NEEDS)
    encodings = encoder.encode_texts(texts, keep_units=False)
    items = [
        LabelledTerms(text, terms_of_encoding(encoder, enc, top=top, input_info={"text": text}))
        for text, enc in zip(texts, encodings, strict=True)
    ]
    meta = {"source": source, "texts": len(texts), "top terms": top}
    return TermsReport(encoder=encoder.name, meta=meta, items=items)
