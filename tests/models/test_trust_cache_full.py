"""``LEXLENS_CACHE`` on a full disk runs uncached, as the README promises: a cache write that
fails — safetensors raises its own ``SafetensorError``, not an ``OSError`` — leaves no
partial file, is said once, and the work goes on with what was just fitted.

The disk is a real one: a 64 KiB tmpfs mounted for the test (root only) and filled.

Each test is named by the kind of failure it guards against."""

from __future__ import annotations

import errno
import logging
import os
import subprocess
from pathlib import Path

import pytest

from lexlens.models.packaged import default_corpus
from tests.models.test_models_dense_dirs import write_st_dir


@pytest.fixture
def full_disk(tmp_path):
    """A 64 KiB tmpfs, filled to the last byte, unmounted afterwards."""
    mount = tmp_path / "full"
    mount.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True
    )
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({made.stderr.decode().strip()})")
    try:
        with open(mount / "filler", "wb", buffering=0) as handle:
            try:
                while handle.write(b"\0" * 4096):
                    pass
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.fixture(scope="module")
def dense_dir(tmp_path_factory):
    return write_st_dir(tmp_path_factory.mktemp("dense") / "tiny", pooling="cls", seed=5)


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text("\n".join(" ".join(t.split()[:6]) for t in default_corpus()[:64]) + "\n")
    return path


def _files(folder: Path) -> list[str]:
    """Every file under ``folder`` but the filler and lock files, relative."""
    return sorted(
        (Path(top) / f).relative_to(folder).as_posix()
        for top, _, files in os.walk(folder)
        for f in files
        if f != "filler" and not f.endswith(".lock")
    )


def test_traceback_a_full_cache_disk_runs_the_command_uncached(
    cli, full_disk, dense_dir, corpus_file, monkeypatch
):
    """``lexlens attribute --encoder …+pq:…`` with the cache on a full disk ended in
    ``SafetensorError: No space left on device`` (exit 1): it runs, says the codebooks were
    not cached, and leaves no partial file in the cache."""
    monkeypatch.setenv("LEXLENS_CACHE", str(full_disk))
    spec = f"{dense_dir}+pq:4:{corpus_file}"
    run = cli("attribute", "--encoder", spec, "--text", "a tabby cat asleep on a sofa")
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr and "Error" not in run.stderr, run.stderr
    assert "sub-vector" in run.stdout
    notes = [line for line in run.stdout.splitlines() if "codebooks not cached" in line]
    assert len(notes) == 1 and "No space left on device" in notes[0], run.stdout
    assert _files(full_disk) == []


def test_traceback_a_full_cache_disk_is_said_once_in_the_api(
    full_disk, dense_dir, corpus_file, monkeypatch, caplog
):
    """Two fits on a full cache disk: both run uncached, one warning for the two."""
    from lexlens.models.dense import DensePQEncoder
    from lexlens.models.dense_load import read_corpus

    monkeypatch.setenv("LEXLENS_CACHE", str(full_disk))
    base = DensePQEncoder.from_base_dir(dense_dir, device="cpu")
    texts = read_corpus(corpus_file)
    with caplog.at_level(logging.WARNING):
        fitted = [base.fit_codebooks(texts, m, 16) for m in (4, 8)]
    assert [f.m for f in fitted] == [4, 8]
    warnings = [r.getMessage() for r in caplog.records if "disk cache" in r.getMessage()]
    assert len(warnings) == 1 and "No space left on device" in warnings[0], warnings
    assert _files(full_disk) == []
