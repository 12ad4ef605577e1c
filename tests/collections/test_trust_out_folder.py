"""``lexlens index --out DIR`` replaces only a Lexlens index: a folder whose ``manifest.json``
is another tool's (any JSON, or not JSON at all), or that holds index-like names
(``data.npy``, ``vocab.txt``) without a Lexlens manifest, is the user's and is refused in one
line, untouched byte for byte.

Each test is named by the kind of failure it guards against."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import one_line_error

#: What a user's folder holds besides its own notes: (manifest.json's bytes or None, extra
#: files), each a variant that a build once overwrote.
VARIANTS = {
    "another-json-object": (b'{"name": "my experiment", "runs": 3}\n', {}),
    "another-tools-format": (b'{"format": "mlflow-run", "format_version": 1}\n', {}),
    "not-json": (b"these are my notes, not JSON\n", {}),
    "a-json-list": (b"[]\n", {}),
    "almost-lexlens": (b'{"format": "lexlens-index"', {}),  # cut short: not JSON
    "data-npy-and-manifest": (b'{"kind": "weights"}\n', {"data.npy": "npy"}),
}


def _hashes(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (links as links) → the SHA-256 of its bytes."""
    out = {}
    for top, _, files in os.walk(folder):
        for name in files:
            path = Path(top) / name
            key = path.relative_to(folder).as_posix()
            out[key] = (
                f"link:{os.readlink(path)}"
                if path.is_symlink()
                else hashlib.sha256(path.read_bytes()).hexdigest()
            )
    return out


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_data_lost_index_out_never_replaces_a_folder_that_is_not_a_lexlens_index(
    cli, tmp_path, variant
):
    _refused_untouched(cli, tmp_path, *VARIANTS[variant])


def test_index_like_files_without_a_manifest_stay_refused(cli, tmp_path):
    """``data.npy`` and ``vocab.txt`` with no manifest were refused already: still so."""
    _refused_untouched(cli, tmp_path, None, {"data.npy": "npy"})


def _refused_untouched(cli, tmp_path: Path, manifest: bytes | None, extra: dict) -> None:
    """A build into a user's folder holding ``manifest`` and ``extra`` besides notes and a
    vocab.txt: refused in one line, every file the same bytes, nothing left beside it."""
    out = tmp_path / "mine"
    (out / "notes").mkdir(parents=True)
    (out / "vocab.txt").write_text("my own word list\n")
    (out / "notes" / "todo.txt").write_text("keep this\n")
    if manifest is not None:
        (out / "manifest.json").write_bytes(manifest)
    for name in extra:
        np.save(out / name, np.arange(5, dtype=np.float32))
    before = _hashes(out)
    source = tmp_path / "texts.txt"
    source.write_text("a cat on a mat\na dog in the fog\n")
    run = cli("index", "--encoder", "splade-tiny", "--source", source, "--out", out)
    one_line_error(run, str(out), "not a Lexlens index", "nothing there is overwritten")
    assert _hashes(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine", "texts.txt"]  # no temp left


def test_a_lexlens_index_is_still_rebuilt_in_place(cli, tmp_path):
    """The rule keeps what it should: an index Lexlens wrote is replaced by a rebuild, and
    the user's own files in it stay (a notes folder)."""
    source = tmp_path / "texts.txt"
    source.write_text("a cat on a mat\n")
    out = tmp_path / "ix"
    assert (
        cli("index", "--encoder", "splade-tiny", "--source", source, "--out", out).returncode == 0
    )
    (out / "notes.txt").write_text("mine\n")
    source.write_text("a cat on a mat\na dog in the fog\n")
    run = cli("index", "--encoder", "splade-tiny", "--source", source, "--out", out)
    assert run.returncode == 0, run.stderr
    assert json.loads((out / "manifest.json").read_text())["counts"]["items"] == 2
    assert (out / "notes.txt").read_text() == "mine\n"
