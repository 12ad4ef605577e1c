"""Shared pieces of the ``lexlens`` subcommands: options, output, input files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lexlens.analysis.core.outputs import json_text
from lexlens.models.base import InputError


def add_common_args(parser: argparse.ArgumentParser) -> None:
    """``--json`` and ``--device`` on every subcommand."""
    parser.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    parser.add_argument(
        "--device", default=None, help="cpu, cuda or auto (default: cuda if available)"
    )


def emit(args: argparse.Namespace, payload: object, table: str) -> None:
    """Print ``payload`` (a result or a mapping) as strict JSON with ``--json``, else ``table``."""
    if getattr(args, "json", False):
        sys.stdout.write(json_text(payload) + "\n")
    else:
        sys.stdout.write(table.rstrip("\n") + "\n")


def format_table(rows: list[list[object]], header: list[str]) -> str:
    """A plain aligned text table."""
    cells = [[str(c) for c in header]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _fmt(value: object) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def read_corpus(path: str | Path) -> list[str]:
    """Texts from a .txt (one per line) or .csv (a ``text`` column); clear errors."""
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise InputError(f"corpus file not found: {path}")
    if path.suffix.lower() == ".csv":
        try:
            frame = pd.read_csv(path, dtype=str, keep_default_na=False)
        except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as exc:
            raise InputError(f"{path} is not a readable CSV: {str(exc).splitlines()[0]}") from None
        if "text" not in frame.columns:
            raise InputError(f"{path} has no 'text' column (columns: {', '.join(frame.columns)})")
        texts = [t for t in frame["text"].tolist() if t.strip()]
    else:
        try:
            texts = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
        except UnicodeDecodeError:
            raise InputError(f"{path} is not UTF-8 text") from None
        texts = [t for t in texts if t]
    if not texts:
        raise InputError(f"{path} holds no texts")
    return texts
