"""A command line builds only the parser of the command it names: `lexlens terms` imports
no other command's analyses (pandas, the attribution reports, the benchmark readers…)."""

from __future__ import annotations

import subprocess
import sys


def test_unbounded_one_command_imports_no_other_command():
    code = (
        "import sys\n"
        "from lexlens.app.cli import build_parser\n"
        "build_parser('terms').parse_args(['terms', '--encoder', 'x', '--text', 'a'])\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    loaded = set(
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.split()
    )
    assert "lexlens.app.cli.terms" in loaded
    others = {"lexlens.app.cli.index", "lexlens.app.cli.report", "lexlens.app.cli.evaluate"}
    assert not loaded & others
    for heavy in (
        "pandas",
        "pyarrow",
        "lexlens.analysis.attribution.report",
        "lexlens.analysis.collections.indexing",
    ):
        assert heavy not in loaded, heavy


def test_silent_wrong_every_command_still_listed_and_helped():
    """`lexlens --help` and an unknown command still name every command."""
    from lexlens.app.cli import COMMANDS

    run = subprocess.run(
        [sys.executable, "-m", "lexlens.app.cli", "nosuch"], capture_output=True, text=True
    )
    assert run.returncode == 2
    for name in COMMANDS:
        assert name.replace("_", "-") in run.stderr
