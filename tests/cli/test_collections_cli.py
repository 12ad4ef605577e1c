"""``--index NAME`` finds a stored collection by its name under LEXLENS_HOME (a path still
works; an unknown name is one line listing the stored names), and ``lexlens collections``
lists them with their items, encoder, the queries and judgements kept and their size, each
checked against the files written here and the folder's bytes counted here."""

from __future__ import annotations

import json
import os

import pytest

from tests.helpers import one_line_error

DOCS = [
    "a red fox in the snow",
    "a violin on a chair",
    "granite cliffs by the sea",
    "a comet over the harbour",
    "maple leaves in autumn",
    "an old steam engine",
]


def _beir(folder, queries: int = 4):
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(DOCS))
    )
    (folder / "queries.jsonl").write_text(
        "".join(
            json.dumps({"_id": f"q{q}", "text": DOCS[q].split()[-1]}) + "\n" for q in range(queries)
        )
    )
    judged = [(f"q{q}", f"d{d}") for q in range(queries) for d in (q, (q + 1) % len(DOCS))]
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, d in judged)
    )
    return folder, queries, len(judged)


def _folder_bytes(folder) -> int:
    return sum(
        os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(folder) for f in files
    )


@pytest.fixture
def home(cli, tmp_path, monkeypatch):
    """A workspace with a collection built from a BEIR folder and one from a text file."""
    home = tmp_path / "home"
    monkeypatch.setenv("LEXLENS_HOME", str(home))
    bench, queries, judged = _beir(tmp_path / "bench")
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(DOCS) + "\n")
    for name, source in (("foldoc", bench), ("plain", texts)):
        out = home / "collections" / name
        built = cli("index", "--encoder", "splade-tiny", "--source", source, "--out", out)
        assert built.returncode == 0, built.stderr
    return home, queries, judged


def test_silent_wrong_collections_lists_what_each_keeps(cli, home):
    home, queries, judged = home
    listed = cli("collections", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {c["name"]: c for c in json.loads(listed.stdout)["collections"]}
    assert set(rows) == {"foldoc", "plain"}
    foldoc, plain = rows["foldoc"], rows["plain"]
    assert foldoc["items"] == plain["items"] == len(DOCS)
    assert foldoc["encoder"] == "splade-tiny"
    assert (foldoc["queries"], foldoc["judgements"]) == (queries, judged)
    assert (plain["queries"], plain["judgements"]) == (None, None)
    for name, row in rows.items():
        assert row["disk_bytes"] == _folder_bytes(home / "collections" / name)
    table = cli("collections").stdout.splitlines()
    assert table[0].split() == ["name", "items", "encoder", "queries", "judgements", "MB"]
    assert table[2].split()[:5] == ["foldoc", "6", "splade-tiny", str(queries), str(judged)]


def test_silent_wrong_index_by_name_is_the_stored_collection(cli, home):
    home, _, _ = home
    by_name = cli("search", "--index", "foldoc", "--query", "fox", "--json")
    by_path = cli("search", "--index", home / "collections" / "foldoc", "--query", "fox", "--json")
    assert by_name.returncode == 0, by_name.stderr
    hits = [(h["id"], h["score"]) for h in json.loads(by_name.stdout)["results"]]
    assert hits == [(h["id"], h["score"]) for h in json.loads(by_path.stdout)["results"]]
    assert hits[0][0] == "d0"
    evaluated = cli("evaluate", "--index", "foldoc", "--json")
    assert evaluated.returncode == 0, evaluated.stderr


def test_traceback_an_unknown_name_is_one_line_listing_the_stored_ones(cli, home):
    line = one_line_error(cli("search", "--index", "fodloc", "--query", "fox"), "--index fodloc")
    assert "stored: foldoc, plain" in line


def test_traceback_an_empty_workspace_lists_nothing_and_says_so(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("LEXLENS_HOME", str(tmp_path / "empty"))
    listed = cli("collections")
    assert listed.returncode == 0 and "no stored collection in" in listed.stdout
    assert json.loads(cli("collections", "--json").stdout)["collections"] == []
    one_line_error(cli("search", "--index", "foldoc", "--query", "x"), "none stored yet")
