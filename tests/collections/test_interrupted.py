"""A rebuild interrupted by Ctrl-C or killed outright leaves the previous index whole (and
the next build clears what the dead one left beside it)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lexlens.analysis.collections.indexing import build_index
from lexlens.analysis.collections.store import open_index

LEXLENS = Path(sys.executable).parent / "lexlens"


def _texts(path: Path, n: int) -> Path:
    words = ["dog", "cat", "beach", "train", "bridge", "sofa", "river", "mountain"]
    lines = [f"a {words[i % 8]} near a {words[(i * 3 + 1) % 8]} number {i}" for i in range(n)]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "kill-9"])
def test_an_interrupted_rebuild_leaves_the_old_index_whole(how, tmp_path, splade):
    out = tmp_path / "ix"
    small = _texts(tmp_path / "small.txt", 20)
    index = ["index", "--encoder", "splade-tiny", "--out", str(out)]
    build_index(splade, small, out)
    before = open_index(out)
    old = (len(before), before.manifest.updated, (out / "data.npy").read_bytes())
    big = _texts(tmp_path / "big.txt", 20_000)
    proc = subprocess.Popen(
        [str(LEXLENS), *index, "--source", str(big), "--batch-size", "8"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob(".ix.building-*")):  # it is writing the new index
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(how)
    _, err = proc.communicate(timeout=120)
    if how == signal.SIGINT:
        assert proc.returncode == 130 and err.strip().splitlines() == [
            "lexlens index: error: interrupted"
        ], err
    else:
        assert proc.returncode == -signal.SIGKILL
    after = open_index(out)
    assert (len(after), after.manifest.updated, (out / "data.npy").read_bytes()) == old
    # The next build clears a dead build's leftovers beside the index.
    build_index(splade, _texts(tmp_path / "other.txt", 5), out)
    assert not list(tmp_path.glob(".ix.building-*")) and len(open_index(out)) == 5
