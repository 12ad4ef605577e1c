"""Shared pieces of the ``lexlens`` subcommands: a command's declaration and parser, options,
the encoder, the texts, ``--out``, output and progress on stderr."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TypeVar

from lexlens.analysis.core.inputs import read_texts
from lexlens.analysis.core.options import Options
from lexlens.analysis.core.outputs import check_out_dir, json_text, write_files
from lexlens.analysis.core.results import Progress, Result

OptionsT = TypeVar("OptionsT", bound=Options)
ResultT = TypeVar("ResultT", bound=Result)
#: The help of ``--encoder`` where the command says nothing more about it.
ENCODER_HELP = "registry name or checkpoint directory"


@dataclass(frozen=True)
class Command:
    """A subcommand as ``lexlens --help`` and its own ``--help`` show it (``help``,
    ``description``), and the flags it shares with other commands, after its own: one per
    declared option of ``options``, an optional ``--out`` folder (``out`` is its help),
    ``--progress`` when asked, ``--json`` and ``--device`` unless ``json_and_device`` is off."""

    help: str
    description: str | None = None
    options: type[Options] | None = None
    out: str | None = None
    progress: bool = False
    json_and_device: bool = True


def add_command(
    sub: argparse._SubParsersAction, name: str, module: ModuleType
) -> argparse.ArgumentParser:
    """The parser of ``lexlens NAME`` from its module: ``add_flags(parser)`` adds the
    command's own flags first (its inputs), then come the shared ones its ``COMMAND`` asks
    for; ``run(args)`` handles a call."""
    command = module.COMMAND
    parser = sub.add_parser(name, help=command.help, description=command.description)
    module.add_flags(parser)
    if command.options is not None:
        add_options(parser, command.options)
    if command.out is not None:
        parser.add_argument("--out", help=command.out)
    if command.progress:
        parser.add_argument("--progress", action="store_true", help="progress lines on stderr")
    if command.json_and_device:
        add_common_args(parser)
    parser.set_defaults(func=module.run)
    return parser


def add_encoder(
    parser: argparse.ArgumentParser, help: str = ENCODER_HELP, *, required: bool = True
) -> None:
    """``--encoder``: a registry name or a checkpoint folder (the analysis loads it)."""
    parser.add_argument("--encoder", required=required, help=help)


def add_texts(parser: argparse.ArgumentParser) -> None:
    """``--text`` or ``--corpus``, one of them (read by :func:`texts_of`)."""
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--text", help="one text")
    source.add_argument("--corpus", help="texts: .txt (one per line), .csv or .jsonl ('text')")


def texts_of(args: argparse.Namespace) -> tuple[list[str], str]:
    """The texts of ``--text`` or ``--corpus`` and the name of their source."""
    if getattr(args, "text", None) is not None:
        return [args.text], "--text"
    return read_texts(args.corpus).texts, Path(args.corpus).name


def run_on_texts(
    args: argparse.Namespace, use_case: Callable[..., ResultT], options: Options
) -> tuple[ResultT, dict[str, Path]]:
    """``use_case(encoder, texts, options=, source=, progress=, device=)`` on ``--encoder``
    and the texts of ``--text``/``--corpus``, progress on stderr; its ``files()`` written into
    ``--out`` (checked before any work starts). The use case gets the encoder's spec: it checks
    every input before the model loads. The result and the files written."""
    texts, source = texts_of(args)
    out = out_folder(args)
    result = use_case(
        args.encoder,
        texts,
        options=options,
        source=source,
        progress=progress_printer(args),
        device=args.device,
    )
    return result, write_out(out, result)


def out_folder(args: argparse.Namespace) -> Path | None:
    """The ``--out`` folder, created and proven writable before any work (None without
    ``--out``; an empty name is the current folder, as for every path)."""
    return None if args.out is None else check_out_dir(args.out)


def write_out(out: Path | None, result: Result) -> dict[str, Path]:
    """A result's ``files()`` written into ``out``, all or none: the paths written."""
    return write_files(out, result.files()) if out is not None else {}


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
        text = declared.help_line()
        if declared.kind is bool:
            parser.add_argument(
                declared.flag,
                dest=declared.name,
                action=argparse.BooleanOptionalAction,
                default=None,
                help=text,
            )
        else:
            parser.add_argument(
                declared.flag,
                dest=declared.name,
                default=None,
                help=text,
                metavar=declared.spec.metavar or declared.name.upper(),
            )


def options_from_args(options_type: type[OptionsT], args: argparse.Namespace) -> OptionsT:
    """The options a command line gave (the flags :func:`add_options` made), checked."""
    return options_type.from_texts(
        {d.name: getattr(args, d.name, None) for d in options_type.declared() if d.spec.cli}
    )
