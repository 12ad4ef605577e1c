"""The ``lexlens`` command line: one module per subcommand, errors as one line + exit 2.

Each subcommand module (named as the command, ``mot_eval`` for ``mot-eval``) declares its
``COMMAND`` (:class:`~lexlens.app.cli.common.Command`: help, options, shared flags), adds its
own flags in ``add_flags(parser)`` and handles a call in ``run(args)``, which parses nothing
itself: it calls one use-case function and renders its result.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import logging
import os
import sys
import warnings

from lexlens.analysis.core.options import RENAMED_OPTIONS, OptionError
from lexlens.app.cli import common
from lexlens.models.base import LexlensError

#: Subcommand modules (``lexlens.app.cli.<name>``, the command ``<name>`` with dashes): one
#: line per command.
COMMANDS = [
    "app",
    "encoders",
    "terms",
    "contrib",
    "deviation",
    "search",
    "index",
    "collections",
    "report",
    "attribute",
    "mot_eval",
    "compare",
    "evaluate",
    "export",
    "counterfactual",
]
#: Flags renamed to one spelling per option: the old one is refused naming the new one.
RENAMED_FLAGS = {
    "--" + old.replace("_", "-"): "--" + new.replace("_", "-")
    for old, new in RENAMED_OPTIONS.items()
} | {"--subvectors": "--m (attribute, report) or --m-values (mot-eval)"}  # the API keeps
# `subvectors` (which sub-vectors to attribute); its command-line spelling was the count


class _OneLineParser(argparse.ArgumentParser):
    """argparse that reports a usage error as one stderr line and exit status 2, and takes
    each flag as it is spelled only (no abbreviations: one spelling per option)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see --help)\n")


def one_line(message: object) -> str:
    """A message on one line (embedded newlines would break the one-line-error promise)."""
    return " ".join(str(message).split())


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The ``lexlens`` parser: every command's, or only the command ``only`` (a command
    line that names one needs no other: each command module imports its analyses, so
    building every parser would import every analysis before the command starts)."""
    parser = _OneLineParser(
        prog="lexlens", description="Interpretability workbench for retrieval encoders."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        command = name.replace("_", "-")
        if only is None or command == only:
            common.add_command(sub, command, importlib.import_module(f"lexlens.app.cli.{name}"))
    return parser


def _named_command(argv: list[str]) -> str | None:
    """The command a command line names first (``None``: none, or an unknown word, whose
    refusal lists every command)."""
    known = {name.replace("_", "-") for name in COMMANDS}
    return argv[0] if argv and argv[0] in known else None


@contextlib.contextmanager
def _quiet_libraries():
    """Library warnings would put lines before the one-line error; notes travel in results.

    Scoped to one command: warning filters and logger levels are restored afterwards, so an
    in-process caller (a notebook, the tests) keeps its own settings.
    """
    if os.environ.get("LEXLENS_DEBUG"):
        yield
        return
    names = ["", "transformers", "sentence_transformers", "faiss", "urllib3", "filelock"]
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for lg in loggers:
            lg.setLevel(logging.ERROR)
        try:
            yield
        finally:
            for lg, level in zip(loggers, levels, strict=True):
                lg.setLevel(level)


def _fail(command: str, message: object) -> int:
    if sys.stderr is not None:  # closed (`2>&-`): print would fall back to stdout
        with contextlib.suppress(OSError, ValueError):
            print(f"lexlens {command}: error: {one_line(message)}", file=sys.stderr, flush=True)
    return 2


def _silence_stdout() -> None:
    """After stdout failed (its reader left, its descriptor closed): point the descriptor at
    /dev/null, so the interpreter's own flush at exit has nothing to fail on (Python would
    print "Exception ignored … BrokenPipeError"). An in-process capture has no descriptor and
    is left alone."""
    stream = sys.stdout
    if stream is None:
        return
    try:
        fd = stream.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
    except (OSError, ValueError, AttributeError):
        return
    try:
        os.dup2(devnull, fd)
    except OSError:
        pass
    finally:
        os.close(devnull)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``lexlens`` console script (also callable in-process by tests)."""
    with _quiet_libraries():
        code = _run(argv)
    if sys.stdout is not None:  # output still buffered (after an error) must not fail at exit
        try:
            sys.stdout.flush()
        except (OSError, ValueError):
            _silence_stdout()
            return code or 2
    return code


def _is_utf8(value: str) -> bool:
    """Whether an argument decoded to text (bytes that are not UTF-8 arrive as surrogates)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _renamed(argv: list[str]) -> str | None:
    """The message for an old spelling of a flag in ``argv``, if any."""
    for arg in argv:
        old = arg.split("=", 1)[0]
        if old in RENAMED_FLAGS:
            return f"{old} is now {RENAMED_FLAGS[old]} (one spelling per option)"
    return None


def _run(argv: list[str] | None) -> int:
    parser = build_parser(_named_command(sys.argv[1:] if argv is None else argv))
    renamed = _renamed(sys.argv[1:] if argv is None else argv)
    if renamed is not None:
        return _fail((argv or sys.argv[1:] or ["lexlens"])[0], renamed)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed its one-line usage error
        return int(exc.code or 0)
    command = args.command
    for key, value in vars(args).items():
        if isinstance(value, str) and not _is_utf8(value):
            option = f"--{key.replace('_', '-')}"
            return _fail(command, f"{option} is not UTF-8 text: Lexlens reads and writes UTF-8")
    if sys.stdout is None:  # started with stdout closed (`>&-`): no result could be shown
        return _fail(
            command, "standard output is closed: redirect it to a file or /dev/null instead"
        )
    try:
        args.func(args)
        sys.stdout.flush()
    except OptionError as exc:  # named as the flag the user typed
        return _fail(command, exc.as_flag())
    except LexlensError as exc:
        return _fail(command, exc)
    except BrokenPipeError:
        # `lexlens … | head`: the reader left. Nothing to tell it, but the output was cut
        # short, and the status says so (as a command killed by SIGPIPE would).
        _silence_stdout()
        return 2
    except MemoryError:
        return _fail(command, "not enough memory for this input: try a smaller one")
    except OSError as exc:  # the environment, not the input: a full disk, a closed stdout…
        if exc.errno in (errno.EBADF, errno.EPIPE):
            _silence_stdout()
        if exc.errno == errno.ENOSPC:
            return _fail(command, "no space left on the device while writing the output")
        where = f": {exc.filename}" if exc.filename else ""
        return _fail(command, f"{exc.strerror or type(exc).__name__}{where}")
    except KeyboardInterrupt:
        _fail(command, "interrupted")
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
