"""Bad input, second round: each case names its kind (hang, traceback, unbounded option,
silent coercion, damaged stored data, data lost, silent wrong output). Every one must end
in one clear line (exit 2) or a result that says what happened — never a traceback, a
hang, memory growing with the input, or a number computed from damaged data."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import skimage_path

LEXLENS = Path(sys.executable).parent / "lexlens"


def _one_line_error(proc, needle: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-300:], proc.stderr[-600:])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert needle in lines[0], lines[0]


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> Path:
    """A small stored text collection, built once; each case damages a copy."""
    from lexlens.app.cli import main

    d = tmp_path_factory.mktemp("trust")
    source = d / "texts.csv"
    source.write_text(
        "text,labels\na dog on a beach,dog\na cat on a sofa,cat\na red train on a bridge,train\n"
    )
    assert (
        main(["index", "--encoder", "splade-tiny", "--source", str(source), "--out", str(d / "ix")])
        == 0
    )
    return d / "ix"


def _copy(index: Path, tmp_path: Path) -> Path:
    out = tmp_path / "ix"
    shutil.copytree(index, out)
    return out


# ------------------------------------------------------------------- damaged stored data
def _nan_weight(ix: Path) -> None:
    data = np.load(ix / "data.npy")
    data[0] = np.nan
    np.save(ix / "data.npy", data)


def _zero_norms(ix: Path) -> None:
    np.save(ix / "norms.npy", np.zeros_like(np.load(ix / "norms.npy")))


def _swap_tokens(ix: Path) -> None:
    lines = (ix / "vocab.txt").read_text(encoding="utf-8").split("\n")
    a, b = lines.index("dog"), lines.index("cat")
    lines[a], lines[b] = lines[b], lines[a]
    (ix / "vocab.txt").write_text("\n".join(lines), encoding="utf-8")


def _string_gate(ix: Path) -> None:
    manifest = json.loads((ix / "manifest.json").read_text())
    manifest["gate_k"] = "768"
    (ix / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize(
    ("damage", "needle"),
    [
        (_nan_weight, "data.npy"),
        (_zero_norms, "norms.npy"),
        (_swap_tokens, "vocab.txt"),
        (_string_gate, "gate_k"),
    ],
)
@pytest.mark.parametrize("command", ["search", "deviation"])
def test_a_damaged_index_is_refused_in_one_line(damage, needle, command, index, tmp_path, cli):
    """Kind: damaged stored data (a silent wrong output before)."""
    ix = _copy(index, tmp_path)
    damage(ix)
    args = ["--query", "dog"] if command == "search" else []
    _one_line_error(cli(command, "--index", ix, *args), needle)


def test_files_a_user_keeps_in_an_index_survive_a_rebuild(index, tmp_path, cli):
    """Kind: data lost. A report written into the index folder outlives a rebuild."""
    ix = _copy(index, tmp_path)
    proc = cli("deviation", "--index", ix, "--out", ix / "reports")
    assert proc.returncode == 0, proc.stderr
    (ix / "my notes.txt").write_text("keep me")
    source = tmp_path / "more.csv"
    source.write_text("text\na dog on a beach\na horse in a field\n")
    proc = cli("index", "--encoder", "splade-tiny", "--source", source, "--out", ix)
    assert proc.returncode == 0, proc.stderr
    assert (ix / "reports" / "deviation.json").is_file()
    assert (ix / "my notes.txt").read_text() == "keep me"
    assert cli("search", "--index", ix, "--query", "horse").returncode == 0


# --------------------------------------------------------------------- hangs, endless reads
@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["terms", "--encoder", "efficientnet-lite0-lexical", "--image", "{fifo}"], "regular"),
        (["terms", "--encoder", "efficientnet-lite0-lexical", "--image", "/dev/zero"], "regular"),
        (
            ["index", "--encoder", "splade-tiny", "--source", "{fifo}.txt", "--out", "{tmp}/o"],
            "regular",
        ),
    ],
)
def test_pipes_and_devices_are_refused_not_read(argv, needle, tmp_path, cli):
    """Kind: hang (a FIFO waits forever) and endless read (/dev/zero). Run in this process
    under an alarm: a read that never ends fails the test instead of hanging the suite."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    os.mkfifo(tmp_path / "pipe.txt")
    argv = [a.replace("{fifo}", str(fifo)).replace("{tmp}", str(tmp_path)) for a in argv]

    def hung(signum, frame):
        raise AssertionError(f"lexlens {' '.join(argv)} did not return in 60 s")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    try:
        proc = cli(*argv)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    _one_line_error(proc, needle)


# ---------------------------------------------------------------------------- tracebacks
def test_a_non_utf8_argument_is_one_line(cli):
    """Kind: traceback (36 lines before). Bytes that are not UTF-8 reach ``sys.argv`` as
    surrogates (Python's filesystem encoding); the same string goes in here."""
    text = b"\xff\xfe".decode("utf-8", "surrogateescape")
    _one_line_error(
        cli("terms", "--encoder", "splade-tiny", "--text", text, "--json"), "--text is not UTF-8"
    )


def test_traceback_a_reader_that_leaves_ends_lexlens_quietly():
    """Kind: traceback (``| head -c0``): lexlens itself exits 2 (its output was cut short)
    with nothing on stderr."""
    proc = subprocess.run(
        [
            "bash",
            "-c",
            f"'{LEXLENS}' terms --encoder splade-tiny --text 'a dog' --json "
            "| head -c0; exit ${PIPESTATUS[0]}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stderr == ""


@pytest.mark.parametrize("template", ["images of {a} without {c}", "{} and {b}"])
def test_an_exclusion_template_with_an_unknown_field(template, index, cli):
    """Kind: traceback."""
    proc = cli(
        "search",
        "--index",
        index,
        "--query",
        "dog",
        "--exclude",
        "beach",
        "--slq-template",
        template,
    )
    _one_line_error(proc, "may name {a} and {b} only")


def test_a_tokenizer_larger_than_the_model(tmp_path, cli):
    """Kind: traceback (an embedding index out of range)."""
    from lexlens.models.packaged import splade_tiny_dir

    folder = tmp_path / "mixed"
    shutil.copytree(splade_tiny_dir(), folder)
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    tokenizer["model"]["vocab"]["zzzword"] = len(tokenizer["model"]["vocab"])
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    _one_line_error(cli("terms", "--encoder", folder, "--text", "zzzword"), "another checkpoint")


def test_api_type_errors_name_the_argument(splade, index):
    """Kind: traceback (AttributeError / TypeError before)."""
    import lexlens
    from lexlens import LexlensError

    cases = [
        (lambda: lexlens.load_encoder("splade-tiny", device=0), "device"),
        (lambda: lexlens.terms(splade, text=["a", "dog"]), "text must be text"),
        (lambda: lexlens.terms(42, text="a dog"), "encoder must be an encoder, a registry name"),
        (lambda: splade.encode_texts(None), "list of texts"),
        (lambda: splade.encode_texts([1]), "not a string"),
        (lambda: lexlens.search_index(index, query=["dog"]), "query must be text"),
        (lambda: lexlens.deviation(splade, None), "captions"),
        (lambda: lexlens.deviation(splade, ["a dog", None]), "item 1"),
        (lambda: lexlens.deviation(42, ["a dog"]), "encoder"),
        (lambda: lexlens.open_index(5), "path must be a stored index or its folder"),
    ]
    for call, needle in cases:
        with pytest.raises(LexlensError, match=needle):
            call()


# ----------------------------------------------------- unbounded options, silent coercion
def _indexed(cli, source: Path, out: Path, encoder: str) -> dict:
    """``lexlens index --json`` of ``source``: it must succeed (bad items are skipped)."""
    proc = cli("index", "--encoder", encoder, "--source", source, "--out", out, "--json")
    assert proc.returncode == 0, proc.stderr
    return proc.json()


def test_a_huge_batch_size_is_refused(tmp_path, cli):
    """Kind: unbounded option (memory grew with the corpus)."""
    source = tmp_path / "t.txt"
    source.write_text("a dog\n")
    proc = cli(
        "index",
        "--encoder",
        "splade-tiny",
        "--source",
        source,
        "--out",
        tmp_path / "o",
        "--batch-size",
        "1000000000",
    )
    _one_line_error(proc, "--batch-size must be an integer from 1 to 4,096")


def test_jsonl_text_that_is_not_a_string_is_skipped_with_its_line(tmp_path, cli):
    """Kind: silent coercion (stored as "['a', 'dog']" and "True" before)."""
    source = tmp_path / "t.jsonl"
    source.write_text('{"text": ["a", "dog"]}\n{"text": true}\n{"text": 7}\n{"text": "a cat"}\n')
    doc = _indexed(cli, source, tmp_path / "o", "splade-tiny")
    assert doc["items"] == 1
    reasons = {Path(s["file"]).name: s["reason"] for s in doc["manifest"]["skipped"]}
    assert "list, not a string" in reasons["t.jsonl:1"]
    assert "bool, not a string" in reasons["t.jsonl:2"]
    assert "int, not a string" in reasons["t.jsonl:3"]


def test_a_text_of_special_tokens_only_says_so(cli):
    """Kind: silent wrong output (terms from [CLS]/[MASK] alone, no note)."""
    for text in ("🙂🙂🙂", "\u200b\u200b", "[CLS] [MASK]"):
        proc = cli("terms", "--encoder", "splade-tiny", "--text", text, "--json")
        assert proc.returncode == 0, proc.stderr
        notes = proc.json()["notes"]
        assert any("no token of the encoder's vocabulary" in n for n in notes), (text, notes)
    proc = cli("terms", "--encoder", "splade-tiny", "--text", "a dog", "--json")
    assert proc.json()["notes"] == []


def test_an_image_folder_link_leaving_it_is_skipped(tmp_path, cli):
    """Kind: escaping a source folder."""
    folder = tmp_path / "photos"
    folder.mkdir()
    shutil.copy(skimage_path("chelsea.png"), folder / "cat.png")
    outside = tmp_path / "secret.png"
    shutil.copy(skimage_path("coffee.png"), outside)
    (folder / "link.png").symlink_to(outside)
    doc = _indexed(cli, folder, tmp_path / "o", "efficientnet-lite0-lexical")
    assert doc["items"] == 1
    assert any("outside the folder" in s["reason"] for s in doc["manifest"]["skipped"])


def test_a_csv_image_through_a_linked_folder_is_refused(tmp_path, cli):
    """Kind: escaping a source folder (the ``../`` and absolute-path checks passed it)."""
    folder, outside = tmp_path / "data", tmp_path / "elsewhere"
    folder.mkdir()
    outside.mkdir()
    shutil.copy(skimage_path("coffee.png"), outside / "secret.png")
    shutil.copy(skimage_path("chelsea.png"), folder / "cat.png")
    (folder / "linked").symlink_to(outside, target_is_directory=True)
    table = folder / "items.csv"
    table.write_text("image,caption\ncat.png,a cat\nlinked/secret.png,a cup\n")
    doc = _indexed(cli, table, tmp_path / "o", "efficientnet-lite0-lexical")
    assert doc["items"] == 1
    assert any("leaves the source's folder" in s["reason"] for s in doc["manifest"]["skipped"])
