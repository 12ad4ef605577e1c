"""Shared pieces of the ``lexlens`` subcommands: options, output, progress on stderr."""

from __future__ import annotations

import argparse
import sys
from typing import TypeVar

from lexlens.analysis.core.options import Options
from lexlens.analysis.core.outputs import json_text
from lexlens.analysis.core.results import Progress

OptionsT = TypeVar("OptionsT", bound=Options)


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


def progress_printer(args: argparse.Namespace) -> Progress | None:
    """Progress on stderr: a live line on a terminal, plain lines with ``--progress``."""
    if getattr(args, "progress", False):

        def lines(fraction: float, message: str) -> None:
            print(f"{100 * fraction:5.1f}%  {message}", file=sys.stderr, flush=True)

        return lines
    if not sys.stderr.isatty():
        return None

    def live(fraction: float, message: str) -> None:
        sys.stderr.write(f"\r{100 * fraction:5.1f}%  {message[:70]:<70}")
        if fraction >= 1.0:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return live


def add_options(
    parser: argparse.ArgumentParser, options_type: type[Options], *, skip: tuple[str, ...] = ()
) -> None:
    """One flag per declared option (``--gate-k`` for ``gate_k``), help from its declaration;
    the text is checked by the declaration too (:func:`options_from_args`), so the command
    line says what the API and the page say."""
    for declared in options_type.declared():
        if not declared.spec.cli or declared.name in skip:
            continue
        shown = "none" if declared.default is None else declared.default
        text = f"{declared.spec.help} ({declared.wanted()}; default {shown})"
        if declared.kind is bool:
            parser.add_argument(
                declared.flag, dest=declared.name, action=argparse.BooleanOptionalAction,
                default=None, help=text,
            )  # fmt: skip
        else:
            parser.add_argument(
                declared.flag, dest=declared.name, default=None, help=text,
                metavar=declared.spec.metavar or declared.name.upper(),
            )  # fmt: skip


def options_from_args(options_type: type[OptionsT], args: argparse.Namespace) -> OptionsT:
    """The options a command line gave (the flags :func:`add_options` made), checked."""
    return options_type.from_texts(
        {d.name: getattr(args, d.name, None) for d in options_type.declared() if d.spec.cli}
    )
