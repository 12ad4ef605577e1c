"""Write docs/commands.md, the reference of every ``lexlens`` command, from its argparse parser.

The page is made from the parser the command line runs (``lexlens.app.cli.build_parser``), so
a flag, its default, its choices and its help cannot drift from the code:
``python docs/make_reference.py`` rewrites it, ``--check`` exits 1 when the committed file
differs from what the parser gives.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / "commands.md"

HEADER = """# Command reference

Every `lexlens` command and its flags, written by `docs/make_reference.py` from the parsers
the command line runs (do not edit by hand: run `python docs/make_reference.py`; a test checks
this file equals what it writes). `lexlens COMMAND --help` prints the same. A user error exits
2 with one line on stderr; flags are taken as spelled (no abbreviations). What each page of the
app shows is in [pages.md](pages.md); the files the commands read and write in
[formats.md](formats.md).
"""


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The parser's subcommands by name, in the order they were added."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _help_of(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """An action's help with argparse's ``%(default)s``-style fields filled, on one line."""
    if not action.help or action.help == argparse.SUPPRESS:
        return ""
    fields = dict(vars(action), prog=parser.prog)
    for name, value in list(fields.items()):
        if hasattr(value, "__name__"):
            fields[name] = value.__name__
    if fields.get("choices") is not None:
        fields["choices"] = ", ".join(map(str, fields["choices"]))
    text = action.help % fields if "%" in action.help else action.help
    return " ".join(text.split())


def _flag(action: argparse.Action) -> str:
    """The spellings of a flag with its argument, as ``--help`` shows them."""
    if not action.option_strings:
        return action.metavar or action.dest
    if action.nargs == 0:
        return ", ".join(action.option_strings)
    if action.metavar is not None:
        arg = action.metavar if isinstance(action.metavar, str) else " ".join(action.metavar)
    elif action.choices is not None:
        arg = "{" + ",".join(map(str, action.choices)) + "}"
    else:
        arg = action.dest.upper()
    if action.nargs == "?":
        arg = f"[{arg}]"
    elif action.nargs in ("*", "+"):
        arg = f"{arg} …"
    return ", ".join(f"{option} {arg}" for option in action.option_strings)


def _default(action: argparse.Action) -> str:
    """The default a flag takes when it is not given, or '' when there is none to show."""
    if action.required or action.nargs == 0 or action.default in (None, argparse.SUPPRESS):
        return ""
    return f"`{action.default}`"


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("|", "\\|")


def _groups(parser: argparse.ArgumentParser) -> dict[int, str]:
    """Each action's mutually exclusive group, as 'one of …' / 'at most one of …'."""
    named = {}
    for group in parser._mutually_exclusive_groups:
        flags = ", ".join(f"`{a.option_strings[0]}`" for a in group._group_actions)
        rule = "one of" if group.required else "at most one of"
        for action in group._group_actions:
            named[id(action)] = f"{rule} {flags}"
    return named


def command_section(name: str, parser: argparse.ArgumentParser, summary: str) -> str:
    """The Markdown section of one command: its summary, description and flag table."""
    lines = [f"## `lexlens {name}`", "", summary, ""]
    if parser.description and parser.description != summary:
        lines += [" ".join(parser.description.split()), ""]
    groups = _groups(parser)
    lines += ["| flag | default | required | help |", "|---|---|---|---|"]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
            continue
        if action.dest == "func":
            continue
        required = "yes" if action.required else groups.get(id(action), "")
        lines.append(
            f"| `{_cell(_flag(action))}` | {_cell(_default(action))} | {_cell(required)} "
            f"| {_cell(_help_of(parser, action))} |"
        )
    return "\n".join(lines) + "\n"


def reference() -> str:
    """The whole command reference as Markdown."""
    from lexlens.app.cli import build_parser

    parser = build_parser()
    summaries = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            summaries = {a.dest: a.help or "" for a in action._choices_actions}
    commands = _subparsers(parser)
    index = [f"- [`{name}`](#lexlens-{name}) — {summaries.get(name, '')}" for name in commands]
    sections = [command_section(n, p, summaries.get(n, "")) for n, p in commands.items()]
    return "\n".join([HEADER, *index, "", *sections]).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write the reference, or with ``--check`` say whether the committed one is current."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the file differs")
    args = parser.parse_args(argv)
    text = reference()
    if args.check:
        current = OUT.read_text(encoding="utf-8") if OUT.exists() else ""
        if current != text:
            print(f"{OUT} is out of date: run python docs/make_reference.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
