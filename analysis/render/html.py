"""What every HTML report shares: the Jinja2 templates (autoescaped, so every user string is
escaped), number display, the diverging colour scale, the settings table and the date."""

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


@functools.cache
def templates():
    """The Jinja2 environment of the report templates (autoescaped, strict about names)."""
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    return Environment(
        loader=FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=False,
        keep_trailing_newline=True,
    )


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


def meta_rows(meta: Mapping[str, Any]) -> list[tuple[str, str]]:
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
