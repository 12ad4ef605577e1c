"""The ``lexlens`` command line: one module per subcommand, errors as one line + exit 2."""

from __future__ import annotations

import argparse
import importlib
import sys

from models.base import LexlensError

#: Subcommand modules; each defines ``register(subparsers)`` and sets ``func``.
COMMANDS = ["encoders", "terms", "contrib", "deviation", "search", "report", "attribute", "mot_eval"]


class _OneLineParser(argparse.ArgumentParser):
    """argparse that reports a usage error as one stderr line and exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(
        prog="lexlens", description="Interpretability workbench for retrieval encoders."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        importlib.import_module(f"analysis.cli.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``lexlens`` console script."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed its one-line usage error
        return int(exc.code or 0)
    try:
        args.func(args)
    except LexlensError as exc:
        print(f"lexlens {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `lexlens … | head`: the reader left, nothing to report
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("lexlens: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
