"""The ``lexlens`` command line: in-process through ``main(argv)``, and one subprocess smoke test."""

from __future__ import annotations

import json

from tests.helpers import one_line_error


def test_console_script_smoke(lexlens_cli):
    """The installed console script runs and fails as a user sees it (one line, exit 2)."""
    proc = lexlens_cli("terms", "--encoder", "splade-tiny", "--text", "a cat on a book", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["encoder"] == "splade-tiny"
    bad = lexlens_cli("terms", "--encoder", "nope", "--text", "x")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr


def test_terms_json_acceptance(cli):
    proc = cli("terms", "--encoder", "splade-tiny", "--text", "a cat sleeping on a book", "--json")
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    assert payload["encoder"] == "splade-tiny"
    tokens = [t["token"] for t in payload["terms"]]
    assert {"cat", "sleeping", "book"} <= set(tokens[:10])
    assert all({"token", "weight"} <= set(t) for t in payload["terms"])
    weights = [t["weight"] for t in payload["terms"]]
    assert weights == sorted(weights, reverse=True)


def test_terms_table_and_long_text_notice(cli):
    proc = cli("terms", "--encoder", "splade-tiny", "--text", "word " * 10_000, "--top", "3")
    assert proc.returncode == 0, proc.stderr
    assert "note: input truncated" in proc.stdout
    assert proc.stdout.count("\n") >= 5


def test_encoders_lists_the_registry(cli):
    proc = cli("encoders", "--json")
    names = {e["name"] for e in json.loads(proc.stdout)["encoders"]}
    assert {"splade-tiny", "efficientnet-lite0-lexical", "minilm-pq"} <= names


def test_user_errors_exit_2_with_one_line(cli, tmp_path):
    one_line_error(cli("terms", "--encoder", "nope", "--text", "x"), "unknown encoder")
    one_line_error(cli("terms", "--encoder", "splade-tiny", "--text", ""), "empty")
    one_line_error(cli("terms", "--encoder", "splade-tiny"), "--text")
    one_line_error(cli("terms", "--encoder", "splade-tiny", "--text", "x", "--top", "0"), "--top")
    one_line_error(cli("terms", "--encoder", str(tmp_path), "--text", "x"), "no config.json")
    one_line_error(cli("frobnicate"), "invalid choice")


def test_written_files_get_the_ordinary_mode_not_the_temporary_files_0600(tmp_path):
    import os
    import stat

    from lexlens.analysis.core.outputs import write_files

    old = os.umask(0o022)
    try:
        written = write_files(tmp_path / "out", {"a.csv": b"x\r\n", "b.json": b"{}"})
    finally:
        os.umask(old)
    assert {stat.S_IMODE(p.stat().st_mode) for p in written.values()} == {0o644}
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a.csv", "b.json"]


def test_traceback_every_command_gets_the_flags_its_declaration_asks_for():
    """Each command module declares its ``COMMAND``; the parser built from it has the
    module's own flags, one per declared option, ``--out``/``--progress`` when declared, and
    ``--json``/``--device`` unless declared off, and calls the module's ``run``."""
    import importlib

    from lexlens.app.cli import COMMANDS, build_parser
    from lexlens.app.cli.common import Command

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert sorted(sub.choices) == sorted(name.replace("_", "-") for name in COMMANDS)
    for name in COMMANDS:
        module = importlib.import_module(f"lexlens.app.cli.{name}")
        command = module.COMMAND
        assert isinstance(command, Command), name
        parser = sub.choices[name.replace("_", "-")]
        flags = {s for action in parser._actions for s in action.option_strings}
        assert parser.get_default("func") is module.run, name
        if command.options is not None:
            wanted = {d.flag for d in command.options.declared() if d.spec.cli}
            assert wanted <= flags, (name, wanted - flags)
        assert ("--progress" in flags) == command.progress, name
        shared = {"--json", "--device"} & flags
        assert shared == ({"--json", "--device"} if command.json_and_device else set()), name
        if command.out is not None:
            out = next(a for a in parser._actions if "--out" in a.option_strings)
            assert out.help == command.out and not out.required, name


def test_silent_wrong_an_empty_out_is_the_current_folder_not_ignored(cli, tmp_path, monkeypatch):
    """``--out ""`` names the current folder, as an empty path does everywhere: the files are
    written there (they were silently not written by the commands whose --out is optional)."""
    from tests.helpers import ROOT

    captions = ROOT / "data" / "captions.txt"
    monkeypatch.chdir(tmp_path)
    run = cli(
        "deviation", "--encoder", "splade-tiny", "--captions", captions, "--out", "", "--json"
    )
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "deviation.json").read_text(encoding="utf-8") == run.stdout


def test_silent_wrong_each_flag_help_states_its_declaration():
    """A flag's help says what its declaration says — what it is, what a valid value is
    and its default — written by one function, also for the flags a command adds itself
    (index's --ray and --text-columns, compare's --top for both kinds of input), so no
    help can state a default or a range the declaration no longer has."""
    import importlib

    from lexlens.analysis.collections.options import IndexOptions
    from lexlens.analysis.compare.options import CompareIndexOptions, CompareOptions
    from lexlens.app.cli import COMMANDS, build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")

    def help_of(command: str, flag: str) -> str:
        parser = sub.choices[command]
        return next(a.help for a in parser._actions if flag in a.option_strings)

    own = {("compare", "--gate-k")}  # its defaults differ by input: stated in words
    for name in COMMANDS:
        options = importlib.import_module(f"lexlens.app.cli.{name}").COMMAND.options
        command = name.replace("_", "-")
        for declared in options.declared() if options is not None else []:
            if declared.spec.cli and (command, declared.flag) not in own:
                assert declared.help_line() in help_of(command, declared.flag), declared.flag
    for name in ("ray", "text_columns"):
        declared = IndexOptions.option(name)
        assert help_of("index", declared.flag).startswith(declared.help_line())
    top = help_of("compare", "--top")
    assert CompareOptions.option("top").help_line() in top
    assert CompareIndexOptions.option("top").help_line() in top
