"""Exports, second round: each case names its kind. An export is all or nothing (a full
disk, an interrupt or a failed rename leaves the previous export whole, never a mix of two);
the user's files are never removed; ``--out`` through a link into the index is refused before
anything is created; the scale's effect is what a hand computation says; the query files do
not grow with the scale; bad options are one line naming the option."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lexlens.analysis.collections.store_writer import write_index
from lexlens.analysis.core import outputs
from lexlens.analysis.core.gating import DEFAULT_GATE_K
from lexlens.analysis.core.results import Cancelled
from lexlens.analysis.export import export as export_module
from lexlens.analysis.export.export import MANIFEST, export_index
from lexlens.analysis.retrieval.queries import QuerySpec
from lexlens.models.base import InputError
from tests.helpers import one_line_error

LEXLENS = Path(sys.executable).parent / "lexlens"
ITEMS = 2000
QUERIES = {"q1": "dog on the beach", "q2": "a cup of espresso", "q3": "rocket in space"}


def _store(folder: Path, vocab: list[str], rows) -> object:
    return write_index(folder, vocab, rows, encoder={"name": "splade-tiny"})


@pytest.fixture(scope="module")
def collection(tmp_path_factory, splade):
    """2,000 items in splade-tiny's vocabulary with SPLADE-like weights: 20–120 terms each,
    log-normal from 1e-4 to 5 (some round to 0 at the default scale)."""
    rng = np.random.default_rng(7)
    vocab = splade.vocab
    words = np.arange(1996, len(vocab))

    def rows():
        for i in range(ITEMS):
            n = int(rng.integers(20, 120))
            cols = rng.choice(words, n, replace=False)
            vals = np.exp(rng.normal(-1.5, 1.5, n)).clip(1e-4, 5.0)
            yield {"id": f"d{i}", "text": " ".join(vocab[c] for c in cols[:5])}, cols, vals

    return _store(tmp_path_factory.mktemp("export-trust") / "ix", vocab, rows())


def _export(ix, out: Path, splade, fmt: str = "anserini", **kwargs):
    kwargs.setdefault("queries", QUERIES)
    return export_index(ix, out, format=fmt, query_encoder=splade, **kwargs)


def _snapshot(folder: Path) -> dict[str, bytes | str]:
    """Every entry under ``folder`` (hidden ones too): a file's bytes, a link's target."""
    found: dict[str, bytes | str] = {}
    for path in sorted(folder.rglob("*")):
        name = str(path.relative_to(folder))
        if path.is_symlink():
            found[name] = "-> " + os.readlink(path)
        elif path.is_file():
            found[name] = path.read_bytes()
        else:
            found[name] = "folder"
    return found


def _staging(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.startswith(outputs.STAGING_PREFIX)]


def _previous(collection, tmp_path, splade) -> tuple[Path, dict]:
    """An export at scale 100 beside a file of the user's, and its snapshot."""
    out = tmp_path / "out"
    _export(collection, out, splade, scale=100)
    (out / "notes.txt").write_text("mine\n")
    return out, _snapshot(out)


class _FillingFile:
    """A file whose disk fills up after ``room`` more characters (a partial write, then
    ENOSPC), as a real write(2) on a full file system does."""

    def __init__(self, handle, room: int) -> None:
        self.handle, self.room = handle, room

    def write(self, data):
        if len(data) > self.room:
            self.handle.write(data[: self.room])
            self.room = 0
            raise OSError(errno.ENOSPC, "No space left on device")
        self.room -= len(data)
        return self.handle.write(data)

    def __getattr__(self, name):
        return getattr(self.handle, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.handle.close()


def _disk_fills(monkeypatch, name: str, room: int) -> None:
    """The file ``name`` of the next export hits a full disk after ``room`` characters."""
    real_open = open

    def opening(path, mode="r", *args, **kwargs):
        handle = real_open(path, mode, *args, **kwargs)
        return _FillingFile(handle, room) if Path(path).name == name else handle

    monkeypatch.setattr(outputs, "open", opening, raising=False)


# ----------------------------------------------------------------------------- data lost
@pytest.mark.parametrize(
    ("name", "room"),
    [("docs.jsonl", 200_000), ("queries.jsonl", 10), (MANIFEST, 0)],
    ids=["in-the-items", "in-the-queries", "in-the-list"],
)
def test_data_lost_a_full_disk_leaves_the_previous_export_whole(
    name, room, collection, tmp_path, splade, monkeypatch
):
    """Kind: data lost (before: docs.jsonl at scale 1000 already in place beside queries at
    scale 100 when the disk filled up in the queries)."""
    out, before = _previous(collection, tmp_path, splade)
    _disk_fills(monkeypatch, name, room)
    with pytest.raises(InputError, match=f"could not write {name} .*disk is full.*unchanged"):
        _export(collection, out, splade, scale=1000)
    assert _snapshot(out) == before
    assert _staging(out) == []


def test_data_lost_a_first_export_that_fails_leaves_no_folder(
    collection, tmp_path, splade, monkeypatch
):
    """Kind: data lost (an empty folder that looks like an export's would be left)."""
    _disk_fills(monkeypatch, "docs.jsonl", 50_000)
    with pytest.raises(InputError, match="disk is full"):
        _export(collection, tmp_path / "new" / "deeper", splade)
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("stop", [KeyboardInterrupt, Cancelled], ids=["ctrl-c", "cancelled"])
def test_data_lost_an_interrupt_mid_export_leaves_the_previous_export_whole(
    stop, collection, tmp_path, splade
):
    """Kind: data lost (an interrupted export replaced some files and not others)."""
    out, before = _previous(collection, tmp_path, splade)

    def progress(fraction: float, message: str) -> None:
        if "items" in message and fraction > 0.6:
            raise stop("stop")

    with pytest.raises(stop):
        _export(collection, out, splade, scale=1000, progress=progress)
    assert _snapshot(out) == before
    assert _staging(out) == []


def test_data_lost_an_interrupt_during_the_renames_waits_for_the_whole_set(
    collection, tmp_path, splade, monkeypatch
):
    """Kind: data lost (Ctrl-C between two renames left a mix). The signal arrives during
    the first rename; the set lands whole, then the interrupt is delivered."""
    out, before = _previous(collection, tmp_path, splade)
    real_replace = os.replace
    sent = []

    def replace(src, dst, *args, **kwargs):
        if not sent:
            sent.append(True)
            os.kill(os.getpid(), signal.SIGINT)
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(KeyboardInterrupt):
        _export(collection, out, splade, scale=1000)
    monkeypatch.undo()
    listed = json.loads((out / MANIFEST).read_text())
    assert listed["scale"] == 1000.0
    assert sorted(listed["written"]) == ["docs.jsonl", "queries.jsonl", "queries.tsv"]
    first = json.loads((out / "docs.jsonl").read_text().splitlines()[0])
    cols, vals = collection.row(0)
    assert first["vector"] == {
        collection.vocab[c]: round(float(v) * 1000)
        for c, v in zip(cols, vals, strict=True)
        if round(float(v) * 1000) > 0
    }
    assert (out / "notes.txt").read_bytes() == before["notes.txt"]
    assert (out / "queries.tsv").read_bytes() == before["queries.tsv"]  # never scaled
    assert (out / "queries.jsonl").read_bytes() != before["queries.jsonl"]
    assert _staging(out) == []


def test_data_lost_a_failed_rename_puts_every_replaced_file_back(
    collection, tmp_path, splade, monkeypatch
):
    """Kind: data lost (a rename that failed after the first one left a mix)."""
    out, before = _previous(collection, tmp_path, splade)
    real_replace = os.replace
    calls = []

    def replace(src, dst, *args, **kwargs):
        calls.append(dst)
        if len(calls) == 2:
            raise OSError(errno.EIO, "Input/output error")
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(InputError, match="could not put the files in place.*unchanged"):
        _export(collection, out, splade, scale=1000)
    assert _snapshot(out) == before
    assert _staging(out) == []


def test_data_lost_files_the_user_keeps_are_never_removed(collection, tmp_path, splade):
    """Kind: data lost. A narrower export removes the files of the previous one it does not
    write again (or they would pass for its own), and nothing else."""
    out, _ = _previous(collection, tmp_path, splade)
    (out / "sub").mkdir()
    (out / "sub" / "kept.txt").write_text("kept\n")
    (out / ".hidden").write_text("hidden\n")
    result = _export(collection, out, splade, queries={})
    assert result.written == {"docs.jsonl": ITEMS}
    assert not (out / "queries.tsv").exists() and not (out / "queries.jsonl").exists()
    run = _export(collection, out, splade, fmt="trec-run", top=5)
    assert run.written == {"run.trec": 5 * len(QUERIES)}
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted([".hidden", MANIFEST, "notes.txt", "run.trec", "sub"])
    assert (out / "notes.txt").read_text() == "mine\n"
    assert (out / "sub" / "kept.txt").read_text() == "kept\n"
    assert json.loads((out / MANIFEST).read_text())["written"] == {"run.trec": 15}


def test_data_lost_a_users_file_named_like_an_export_file_is_not_overwritten(
    collection, tmp_path, splade
):
    """Kind: data lost (a docs.jsonl of the user's was overwritten)."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "docs.jsonl").write_text("my own documents\n")
    with pytest.raises(InputError, match="docs.jsonl is there and no lexlens-export.json"):
        _export(collection, out, splade)
    assert (out / "docs.jsonl").read_text() == "my own documents\n"
    (out / "docs.jsonl").unlink()
    (out / MANIFEST).write_text('{"mine": true}')
    with pytest.raises(InputError, match="is not the list of a Lexlens export"):
        _export(collection, out, splade)
    (out / MANIFEST).unlink()
    _export(collection, out, splade)
    (out / "queries.tsv").unlink()
    (out / "queries.tsv").mkdir()
    with pytest.raises(InputError, match="queries.tsv is a folder"):
        _export(collection, out, splade)
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["docs.jsonl", "queries.jsonl", "queries.tsv", MANIFEST]
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_data_lost_a_real_full_tmpfs_keeps_the_previous_export(collection, tmp_path, splade):
    """Kind: data lost, on a real full file system: room for the previous export and half
    of the next one."""
    sizes = {}
    for scale in (1, 1_000_000):
        _export(collection, tmp_path / f"s{scale}", splade, scale=scale)
        sizes[scale] = sum(p.stat().st_size for p in (tmp_path / f"s{scale}").iterdir())
    assert sizes[1_000_000] > sizes[1]
    mount = tmp_path / "small"
    mount.mkdir()
    room = sizes[1] + sizes[1_000_000] // 2
    if subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={room}", "tmpfs", str(mount)]
    ).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        _export(collection, mount / "out", splade, scale=1)
        before = _snapshot(mount / "out")
        with pytest.raises(InputError, match="disk is full.*previous export there is unchanged"):
            _export(collection, mount / "out", splade, scale=1_000_000)
        assert _snapshot(mount / "out") == before
        assert _staging(mount / "out") == []
    finally:
        subprocess.run(["umount", str(mount)], check=False)


# ------------------------------------------------------------------------------ security
def test_security_out_through_a_link_into_the_index_is_refused_before_anything_is_created(
    collection, tmp_path, splade, cli
):
    """Kind: security (files written into the index through a link; the folder was created
    before the check)."""
    index_before = _snapshot(collection.path)
    link = tmp_path / "link"
    link.symlink_to(collection.path, target_is_directory=True)
    chain = tmp_path / "chain"
    chain.symlink_to(link, target_is_directory=True)
    (tmp_path / "elsewhere").mkdir()
    sideways = tmp_path / "elsewhere" / ".." / "link" / "x"
    for out in (link, link / "sub" / "deeper", chain / "sub", sideways):
        with pytest.raises(InputError, match="inside the index folder"):
            _export(collection, out, splade)
        one_line_error(
            cli("export", "--index", collection.path, "--format", "seismic", "--out", out),
            "inside the index folder",
        )
    assert _snapshot(collection.path) == index_before


def test_security_a_forged_export_list_removes_export_files_only(collection, tmp_path, splade):
    """Kind: security (the list of a previous export names the files an export removes: a
    forged one must not reach other files)."""
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "victim.txt").write_text("outside\n")
    (out / "notes.txt").write_text("mine\n")
    (out / "queries.tsv").write_text("old\n")
    forged = {"../victim.txt": 1, "notes.txt": 1, "/etc/hostname": 1, "queries.tsv": 1}
    (out / MANIFEST).write_text(json.dumps({"format": "seismic", "written": forged}))
    _export(collection, out, splade, fmt="seismic", queries={})
    assert (tmp_path / "victim.txt").read_text() == "outside\n"
    assert (out / "notes.txt").read_text() == "mine\n"
    assert not (out / "queries.tsv").exists()  # an export file the list names: replaced
    assert sorted(p.name for p in out.iterdir()) == ["docs.jsonl", MANIFEST, "notes.txt"]


def test_security_a_link_named_like_an_export_file_is_replaced_not_written_through(
    collection, tmp_path, splade
):
    """Kind: security (writing through ``docs.jsonl`` → the index's vocab.txt)."""
    out = tmp_path / "out"
    _export(collection, out, splade, fmt="seismic")
    vocab = (collection.path / "vocab.txt").read_bytes()
    (out / "docs.jsonl").unlink()
    (out / "docs.jsonl").symlink_to(collection.path / "vocab.txt")
    _export(collection, out, splade, fmt="seismic")
    assert (collection.path / "vocab.txt").read_bytes() == vocab
    assert not (out / "docs.jsonl").is_symlink()
    assert len((out / "docs.jsonl").read_text().splitlines()) == ITEMS


# -------------------------------------------------------------------------- silent wrong
@pytest.mark.parametrize("scale", [10, 100, 12345.5])
def test_silent_wrong_impacts_and_dropped_postings_match_a_hand_count(
    scale, collection, tmp_path, splade
):
    """Kind: silent wrong (the smallest weights vanished without a word). Impacts are
    Python's round(weight × scale), computed here row by row."""
    result = _export(collection, tmp_path / "out", splade, scale=scale)
    docs = (tmp_path / "out" / "docs.jsonl").read_text().splitlines()
    dropped = 0
    smallest = min(float(v) for i in range(ITEMS) for v in collection.row(i)[1])
    for i, line in enumerate(docs):
        cols, vals = collection.row(i)
        impacts = {
            collection.vocab[c]: round(float(v) * scale) for c, v in zip(cols, vals, strict=True)
        }
        dropped += sum(1 for n in impacts.values() if n == 0)
        assert json.loads(line)["vector"] == {t: n for t, n in impacts.items() if n > 0}
    assert dropped < collection.nnz and (dropped > 0) == (scale <= 100)  # 1e-4 × 12345.5 > 0.5
    assert result.postings == collection.nnz and result.dropped_postings == dropped
    note = result.notes[0]
    assert f"{dropped:,} of {collection.nnz:,} postings dropped" in note, note
    assert f"weights of {0.5 / scale:.3g} or less round to 0 at scale {scale:g}" in note, note
    assert f"the smallest stored weight is {smallest:.3g}" in note, note
    # The queries at the same scale (their vectors from the encoder, rounded here).
    vectors = QuerySpec(splade, "parametric", DEFAULT_GATE_K).vectors(list(QUERIES.values()))
    lines = (tmp_path / "out" / "queries.jsonl").read_text().splitlines()
    for qid, vector, line in zip(QUERIES, vectors, lines, strict=True):
        expected = {
            splade.vocab[c]: round(float(vector[c]) * scale) for c in np.flatnonzero(vector)
        }
        assert json.loads(line) == {
            "qid": qid,
            "vector": {t: n for t, n in expected.items() if n > 0},
        }


def test_silent_wrong_a_scale_that_rounds_every_weight_to_0_is_refused(tmp_path, splade):
    """Kind: silent wrong (an export of empty vectors that Anserini indexes as nothing)."""
    rng = np.random.default_rng(3)
    rows = (
        (
            {"id": f"d{i}", "text": "x"},
            rng.choice(np.arange(2000, 3000), 30, replace=False),
            rng.uniform(0.01, 0.3, 30),
        )
        for i in range(500)
    )
    faint = _store(tmp_path / "faint", splade.vocab, rows)
    largest = float(np.max(np.asarray(faint.data)))
    with pytest.raises(
        InputError,
        match=f"every stored weight rounds to 0 .the largest is {largest:.3g}.: give a scale above {0.5 / largest:.3g}",
    ):
        _export(faint, tmp_path / "out", splade, scale=1)
    assert not (tmp_path / "out").exists()
    result = _export(faint, tmp_path / "out", splade, scale=2)
    expected = sum(1 for v in np.asarray(faint.data) if round(float(v) * 2) == 0)
    assert result.dropped_postings == expected and 0 < expected < faint.nnz


def test_silent_wrong_an_item_too_long_for_anserini_is_refused_with_its_id(tmp_path, splade):
    """Kind: silent wrong (Anserini would fail on, or wrap, a pseudo-document of more than
    2^31 − 1 characters: each term written ``impact`` times)."""
    heavy = _store(
        tmp_path / "heavy",
        splade.vocab,
        [
            ({"id": "light", "text": "x"}, np.array([2000, 2001]), np.array([0.5, 1.0])),
            ({"id": "heavy", "text": "y"}, np.arange(2000, 4000), np.full(2000, 3.0)),
        ],
    )
    # "heavy" at 1e6: 2,000 terms × 3,000,000 repeats × (length + 1) characters ≥ 2^31.
    with pytest.raises(InputError, match="item heavy: at scale 1e.06 Anserini would index"):
        _export(heavy, tmp_path / "out", splade, scale=1_000_000)
    assert not (tmp_path / "out").exists()
    assert _export(heavy, tmp_path / "out", splade, scale=100).written["docs.jsonl"] == 2


# ----------------------------------------------------------------------------- unbounded
def test_unbounded_queries_tsv_does_not_grow_with_the_scale(collection, tmp_path, splade):
    """Kind: unbounded (each term was repeated as often as its impact: gigabytes at 1e6)."""
    sizes = {}
    for scale in (100, 1_000_000):
        _export(collection, tmp_path / str(scale), splade, scale=scale)
        sizes[scale] = {p.name: p.stat().st_size for p in (tmp_path / str(scale)).iterdir()}
    small, large = tmp_path / "100", tmp_path / "1000000"
    assert (small / "queries.tsv").read_bytes() == (large / "queries.tsv").read_bytes()
    for name in ("docs.jsonl", "queries.jsonl"):  # more digits, never more repeats
        assert sizes[1_000_000][name] < 1.5 * sizes[100][name], (name, sizes)


def test_unbounded_a_long_query_is_scaled_down_in_the_tsv(collection, tmp_path, splade):
    """Kind: unbounded (a long query's line grew with its weights). Its repeats are scaled
    down as a whole: proportional to the weights, so its ranking is unchanged."""
    words = [w for w in splade.vocab[2000:30000:60] if w.isalpha()][:400]
    queries = {"long": " ".join(words), "short": "dog on the beach"}
    result = _export(collection, tmp_path / "out", splade, queries=queries)
    assert any(
        "1 queries would repeat their terms more than 10,000 times" in n for n in result.notes
    )
    lines = dict(
        line.split("\t") for line in (tmp_path / "out" / "queries.tsv").read_text().splitlines()
    )
    vectors = QuerySpec(splade, "parametric", DEFAULT_GATE_K).vectors(list(queries.values()))
    long_vector = vectors[0]
    terms = np.flatnonzero(long_vector)
    tokens = lines["long"].split()
    assert len(tokens) <= export_module.MAX_TSV_QUERY_TOKENS + len(terms) / 2
    counts = {}
    for token in tokens:
        counts[token] = counts.get(token, 0) + 1
    factor = export_module.MAX_TSV_QUERY_TOKENS / float(long_vector[long_vector > 0].sum())
    for c in terms:
        assert counts.get(splade.vocab[c], 0) == round(float(long_vector[c]) * factor)
    short = {}
    for token in lines["short"].split():
        short[token] = short.get(token, 0) + 1
    assert short == {
        splade.vocab[c]: round(float(vectors[1][c]) * 100)
        for c in np.flatnonzero(vectors[1])
        if round(float(vectors[1][c]) * 100) > 0
    }


# ----------------------------------------------------------------------------- tracebacks
def test_traceback_bad_scale_and_top_name_the_argument_in_the_api(collection, tmp_path, splade):
    """Kind: traceback (nan reached int(round(nan)); a string scale, a float top…)."""
    out = tmp_path / "out"
    for scale in (float("nan"), float("inf"), -5, 0, 0.5, 2e6, True, "100", None, np.nan):
        with pytest.raises(InputError, match="^scale must be a finite number from 1 to 1,000,000"):
            _export(collection, out, splade, scale=scale)
    for top in (0, -3, 2.5, True, "10", None, np.float64(3)):
        with pytest.raises(InputError, match="^top must be an integer from 1 to 16,777,216"):
            _export(collection, out, splade, fmt="trec-run", top=top)
    with pytest.raises(InputError, match="^out must be a folder path"):
        _export(collection, 5, splade)
    with pytest.raises(InputError, match="^format must be given: one of trec-run, anserini"):
        _export(collection, out, splade, fmt=None)
    with pytest.raises(InputError, match="^format must be one of trec-run, anserini, seismic"):
        _export(collection, out, splade, fmt="csv")
    assert not out.exists()
    assert _export(collection, out, splade, fmt="trec-run", top=np.int64(2)).written == {
        "run.trec": 2 * len(QUERIES)
    }


@pytest.mark.parametrize(
    ("option", "value", "shown"),
    [
        ("--scale", "nan", "nan"),
        ("--scale", "inf", "inf"),
        ("--scale", "-1", "-1.0"),
        ("--scale", "0", "0.0"),
        ("--scale", "abc", "'abc'"),
        ("--scale", "1e7", "10000000.0"),
        ("--top", "0", "0"),
        ("--top", "1.5", "'1.5'"),
        ("--top", "x", "'x'"),
        ("--format", "csv", "'csv'"),
    ],
)
def test_traceback_bad_scale_and_top_on_the_command_line_are_one_line(
    option, value, shown, collection, tmp_path, cli
):
    """Kind: traceback (``--scale nan`` ended in a ValueError). The message is the option's
    declaration's, named as the flag, with the value as read."""
    out = tmp_path / "out"
    args = {"--format": "anserini", option: value}
    proc = cli(
        "export",
        "--index",
        collection.path,
        "--out",
        out,
        *(x for pair in args.items() for x in pair),
    )
    line = one_line_error(proc, f"{option} must be ", f"not {shown}")
    assert line.endswith(f"not {shown}")
    assert not out.exists()


def test_traceback_export_without_a_format_names_the_flag(collection, tmp_path, cli):
    """Kind: traceback (the one option without a default)."""
    proc = cli("export", "--index", collection.path, "--out", tmp_path / "out")
    one_line_error(proc, "--format must be given: one of trec-run, anserini, seismic")


def test_traceback_a_closed_stdout_exits_2_quietly():
    """Kind: traceback (``>&-``: AttributeError on None; a reader that left: the status said
    all was well)."""
    closed = subprocess.run(
        f"'{LEXLENS}' encoders --json >&-",
        shell=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert closed.returncode == 2, closed.stderr
    assert closed.stderr.count("\n") == 1 and "standard output is closed" in closed.stderr
    read, write = os.pipe()
    os.close(read)  # the reader left before anything was written
    try:
        gone = subprocess.run(
            [str(LEXLENS), "encoders", "--json"],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write)
    assert gone.returncode == 2
    assert gone.stderr.count("\n") <= 1, gone.stderr
    assert "Traceback" not in gone.stderr and "Exception ignored" not in gone.stderr
