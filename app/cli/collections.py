"""``lexlens collections``: the collections stored in the workspace (``LEXLENS_HOME``), the
names ``--index NAME`` finds, with their items, encoder, the queries and judgements kept
and their size on disk."""

from __future__ import annotations

import argparse

from lexlens.analysis.collections.workspace import stored_collections
from lexlens.app.cli import common

COMMAND = common.Command("list the stored collections of LEXLENS_HOME (the names --index takes)")


def add_flags(parser: argparse.ArgumentParser) -> None:
    """None of its own: the list takes no input."""


def _kept(value: object) -> str:
    return "—" if value is None else str(value)


def run(args: argparse.Namespace) -> None:
    """The table (or ``--json``) of the stored collections."""
    result = stored_collections()
    if not result.collections:
        table = (
            f"no stored collection in {result.home}: build one with `lexlens index --source … "
            f"--out {result.home}/NAME` or on the Collections page (lexlens app)"
        )
    else:
        problems = any("error" in c for c in result.collections)
        rows = [
            [
                c["name"],
                _kept(c["items"]),
                c["encoder"] or "—",
                _kept(c["queries"]),
                _kept(c["judgements"]),
                "—" if c["disk_bytes"] is None else f"{c['disk_bytes'] / 1e6:.2f}",
            ]
            + ([c.get("error", "")] if problems else [])
            for c in result.collections
        ]
        header = ["name", "items", "encoder", "queries", "judgements", "MB"]
        table = common.format_table(rows, header + (["problem"] if problems else []))
    common.emit(args, result, table)
