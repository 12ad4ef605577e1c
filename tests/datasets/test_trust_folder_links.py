"""A file a benchmark reader opens inside the folder it was given stays inside that folder
once links are followed — the rule an image folder's files and a table's image paths
follow: a link to a file elsewhere (outside the app's data roots, say) is refused in one
line, never read, indexed or shown.

Each test is named by the kind of failure it guards against."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lexlens.analysis.datasets.readers import open_benchmark
from lexlens.models.base import InputError
from tests.datasets.files import beir_of_tables, items_of, jsonl, msmarco_files
from tests.helpers import app_page, click_and_wait

SECRET = "the private passage nobody may index"


def _outside(tmp_path: Path) -> Path:
    """A folder beside the benchmark (outside any root the test gives) with private files."""
    outside = tmp_path / "outside"
    outside.mkdir()
    return outside


def _linked(path: Path, outside: Path, name: str) -> None:
    """``path`` replaced by a link to a file of the same content outside."""
    target = outside / name
    target.write_bytes(path.read_bytes().replace(b"a cat", SECRET.encode()))
    path.unlink()
    path.symlink_to(target)


def _beir(folder: Path) -> Path:
    return beir_of_tables(folder, {"d1": "a cat", "d2": "a dog"}, {"q1": "cat"}, {"q1": {"d1": 1}})


def _msmarco(folder: Path) -> Path:
    folder.mkdir()
    msmarco_files(folder, "d1\ta cat\nd2\ta dog\n", "q1\ta cat\n", "q1 0 d1 1\n")
    return folder


def _karpathy(folder: Path) -> Path:
    folder.mkdir()
    entries = [{"filename": "a.png", "split": "test", "sentences": [{"raw": "a cat"}]}]
    (folder / "dataset_x.json").write_text(json.dumps({"images": entries}))
    return folder


def _parquet(folder: Path) -> Path:
    datasets = pytest.importorskip("datasets")
    (folder / "data").mkdir(parents=True)
    datasets.Dataset.from_dict({"text": ["a cat", "a dog"]}).to_parquet(
        str(folder / "data" / "train.parquet")
    )
    return folder


def _saved(folder: Path) -> Path:
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_dict({"text": ["a cat", "a dog"]}).save_to_disk(str(folder))
    return folder


#: (a benchmark folder, the file in it that becomes a link to a file outside)
VARIANTS = [
    (_beir, "corpus.jsonl"),
    (_beir, "queries.jsonl"),
    (_beir, "qrels/test.tsv"),
    (_msmarco, "collection.tsv"),
    (_msmarco, "queries.dev.tsv"),
    (_msmarco, "qrels.dev.tsv"),
    (_karpathy, "dataset_x.json"),
    (_parquet, "data/train.parquet"),
    (_saved, "data-00000-of-00001.arrow"),
]


@pytest.mark.parametrize(("make", "name"), VARIANTS, ids=[f"{m.__name__}-{n}" for m, n in VARIANTS])
def test_security_a_benchmark_file_linked_outside_its_folder_is_never_read(tmp_path, make, name):
    folder = make(tmp_path / "bench")
    outside = _outside(tmp_path)
    _linked(folder / name, outside, Path(name).name)
    with pytest.raises(InputError) as caught:
        bench = open_benchmark(folder, images=str(folder) if make is _karpathy else None)
        items_of(bench)
    message = str(caught.value)
    assert "\n" not in message and "outside the folder" in message, message
    assert SECRET not in message


def test_security_a_linked_qrels_folder_leaves_the_benchmark_too(tmp_path):
    folder = _beir(tmp_path / "bench")
    outside = _outside(tmp_path)
    os.rename(folder / "qrels", outside / "qrels")
    (folder / "qrels").symlink_to(outside / "qrels")
    with pytest.raises(InputError, match="outside the folder"):
        open_benchmark(folder)


def test_links_that_stay_inside_the_folder_are_read(tmp_path):
    """The rule refuses only what leaves the folder: a link to a file inside it reads."""
    folder = _beir(tmp_path / "bench")
    (folder / "kept").mkdir()
    os.rename(folder / "corpus.jsonl", folder / "kept" / "corpus.jsonl")
    (folder / "corpus.jsonl").symlink_to(Path("kept") / "corpus.jsonl")
    items, _ = items_of(open_benchmark(folder))
    assert [i.text for i in items] == ["a cat", "a dog"]


def test_security_the_collections_page_never_indexes_a_linked_corpus(tmp_path, monkeypatch):
    """The reported case: a BEIR folder inside the data roots whose corpus.jsonl links to a
    file outside them was read, indexed and its text shown on the page."""
    root = tmp_path / "root"
    root.mkdir()
    folder = _beir(root / "beir")
    outside = _outside(tmp_path)
    corpus = outside / "corpus.jsonl"
    corpus.write_text(jsonl({"_id": d, "title": "", "text": SECRET} for d in ("d1", "d2")))
    (folder / "corpus.jsonl").unlink()
    (folder / "corpus.jsonl").symlink_to(corpus)
    home = tmp_path / "home"
    monkeypatch.setenv("LEXLENS_HOME", str(home))
    monkeypatch.setenv("LEXLENS_DATA_ROOTS", str(root))
    at = app_page("app_pages/collections.py")
    at.radio(key="collections_source").set_value("Path on this server")
    at.run()
    at.text_input(key="collections_path").set_value(str(folder))
    at.text_input(key="collections_name").set_value("leak")
    at.selectbox(key="collections_encoder").set_value("splade-tiny")
    at.run()
    click_and_wait(at, at.button[0].click)
    assert not at.exception
    assert any("outside the folder" in e.value for e in at.error), [e.value for e in at.error]
    assert not (home / "collections" / "leak" / "manifest.json").exists()
    shown = [str(getattr(e, "value", "")) for e in at.main]
    assert not any(SECRET in text for text in shown)
