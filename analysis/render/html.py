"""The one way Lexlens writes an HTML report: :func:`render_report` renders a Jinja2 template
of ``templates/`` (autoescaped, so every user string is escaped; every template extends
``base.html``: the title, the settings table, the style sheet inline). Also what the views
put in a report: number display, the diverging colour scale, the settings rows, the date.

Drawing only: a report's use case (in its capability's folder) computes what to show and
passes it here."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

TEMPLATES = Path(__file__).resolve().parent / "templates"

_POS = (178, 24, 43)  # red: the word pulls the sub-vector towards its code
_NEG = (33, 102, 172)  # blue: the word pushes it away


def render_report(template: str, *, title: str, meta: Mapping[str, Any], **context: Any) -> str:
    """A self-contained HTML report: ``template`` rendered with its ``title``, the settings
    table of ``meta`` (empty values left out, the time it is generated last) and ``context``."""
    rows = _meta_rows({**meta, "generated": now()})
    return _templates().get_template(template).render(title=title, meta=rows, **context)


#: Rows a notebook view draws of a table; the rest are counted ("… N more") and kept by the
#: result's ``to_frame()``.
NOTEBOOK_ROWS = 50


def render_fragment(template: str, **context: Any) -> str:
    """An HTML fragment for a notebook's output cell: ``template`` rendered (autoescaped),
    its style scoped to the fragment, nothing fetched from outside."""
    return _templates().get_template(template).render(**context)


@functools.cache
def _templates():
    """The Jinja2 environment of the report templates (autoescaped, strict about names;
    ``num`` available in every template)."""
    # heavy: jinja2 loads on first use
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    env = Environment(
        loader=FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=False,
        keep_trailing_newline=True,
    )
    env.globals["num"] = num
    return env


def num(value: Any) -> str:
    """Compact display of a number (the JSON and CSV keep the exact value)."""
    if value is None:
        return "–"
    value = float(value)
    return f"{value:.4g}" if math.isfinite(value) else "–"


def cell_colour(value: float, scale: float) -> str:
    """Diverging blue–white–red colour of ``value`` on a symmetric scale ``[-scale, scale]``."""
    if scale <= 0 or not math.isfinite(value):
        return "#ffffff"
    t = max(-1.0, min(1.0, value / scale))
    end = _POS if t >= 0 else _NEG
    a = abs(t)
    r, g, b = (round(255 + (c - 255) * a) for c in end)
    return f"#{r:02x}{g:02x}{b:02x}"


def _meta_rows(meta: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(name, text) rows of a report's settings table; empty values are left out."""

    def text(v: Any) -> str:
        if isinstance(v, Mapping):
            return ", ".join(f"{k}: {text(x)}" for k, x in v.items())
        if isinstance(v, (list, tuple)):
            return "; ".join(text(x) for x in v)
        if isinstance(v, float):
            return num(v)
        return str(v)

    return [(str(k), text(v)) for k, v in meta.items() if v not in ([], (), {}, None, "")]


def now() -> str:
    """The time a report is generated, to the minute, in UTC."""
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
