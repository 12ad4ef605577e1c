"""Benchmarks read as researchers keep them: every format from a small fixture written here,
each malformed case with its one clear message (file and line), the readable items kept."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from lexlens.analysis.datasets.readers import is_benchmark_source, open_benchmark
from lexlens.models.base import InputError
from tests.datasets.files import beir_folder, items_of, msmarco_files
from tests.helpers import skimage_path

DATA = Path(__file__).resolve().parents[2] / "data" / "benchmarks"


def test_a_beir_folder_with_every_malformed_case_named(tmp_path):
    folder = beir_folder(
        tmp_path / "beir",
        '{"_id": "d1", "title": "Dogs", "text": "two dogs"}\n'
        '{"_id": "d2", "title": "", "text": "a cup"}\n'
        '{"_id": "d2", "text": "the same id"}\n'
        "not json\n"
        '{"_id": "d3", "text": 5}\n',
        '{"_id": "q1", "text": "dog"}\n{"_id": "q2", "text": "cup"}\n{"_id": "q1", "text": "x"}\n',
        {
            "test": "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\nq9\td1\t1\nq1\td7\n"
            "q2\td99\t1\n",
            "dev": "query-id\tcorpus-id\tscore\nq1\td1\t1\n",
        },
    )
    assert is_benchmark_source(folder)
    bench = open_benchmark(folder)  # test is the default split
    assert (bench.kind, bench.split, bench.splits) == ("beir", "test", ["dev", "test"])
    items, skipped = items_of(bench)
    assert [(i.id, i.text) for i in items] == [("d1", "Dogs two dogs"), ("d2", "a cup")]
    assert [s.file for s in skipped] == [f"{folder}/corpus.jsonl:{n}" for n in (3, 4, 5)]
    assert bench.queries == {"q1": "dog", "q2": "cup"}
    assert bench.qrels == {"q1": {"d1": 1}, "q2": {"d2": 1, "d99": 1}}
    lines = "\n".join(bench.problem_lines())
    for expected in (
        "queries.jsonl:3: query id 'q1' appears twice",
        "test.tsv:5: 2 fields",
        "judged query 'q9' is not among the queries",
        "corpus.jsonl:3: id 'd2' appears again",
        "corpus.jsonl:4: not JSON",
        "1 judged items are not in the corpus (e.g. d99)",
    ):
        assert expected in lines, (expected, lines)
    assert open_benchmark(folder, split="dev").qrels == {"q1": {"d1": 1}}
    with pytest.raises(InputError, match="no split 'train'.*dev, test"):
        open_benchmark(folder, split="train")


def test_ms_marco_files(tmp_path):
    collection = msmarco_files(
        tmp_path,
        "0\tthe first passage\n1\tthe second\nno tab here\n",
        "10\twhat is first\n11\t\n",
        "10 0 0 1\n11 0 1 1\n",
    )
    bench = open_benchmark(collection)
    items, skipped = items_of(bench)
    assert [(i.id, i.text) for i in items] == [("0", "the first passage"), ("1", "the second")]
    assert skipped[0].file.endswith("collection.tsv:3")
    assert bench.queries == {"10": "what is first"} and bench.split == "dev"
    assert "judged query '11' is not among the queries" in "\n".join(bench.problem_lines())


def test_a_karpathy_split_gives_image_items_and_caption_queries(tmp_path):
    photo = skimage_path("chelsea.png")
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "cat.png").write_bytes(photo.read_bytes())
    os.symlink(photo, tmp_path / "img" / "escape.png")  # a link out of the image root
    entries = [
        {
            "filename": "cat.png",
            "split": "test",
            "imgid": 0,
            "cocoid": 77,
            "sentences": [{"raw": "a cat"}, {"raw": "a tabby"}],
        },
        {"filename": "gone.png", "split": "test", "imgid": 1, "sentences": [{"raw": "missing"}]},
        {"filename": "escape.png", "split": "test", "imgid": 2, "sentences": [{"raw": "x"}]},
        {"filename": "../up.png", "split": "test", "imgid": 3, "sentences": [{"raw": "y"}]},
        {"filename": "other.png", "split": "train", "imgid": 4, "sentences": [{"raw": "z"}]},
    ]
    path = tmp_path / "dataset_coco.json"
    path.write_text(json.dumps({"images": entries}))
    bench = open_benchmark(path, images=tmp_path / "img")
    items, skipped = items_of(bench)
    assert [(i.id, i.image, i.captions) for i in items] == [
        ("77", "cat.png", ("a cat", "a tabby")),
        ("1", "gone.png", ("missing",)),  # the build names a missing file ("not found")
    ]
    assert [s.file.rsplit(":", 1)[1] for s in skipped] == ["images[2]", "images[3]"]
    assert all("leaves" in s.reason for s in skipped)
    assert bench.queries["77_0"] == "a cat" and bench.qrels["77_1"] == {"77": 1}
    assert len(bench.queries) == 5 and bench.has_images
    with pytest.raises(InputError, match="split 'val'.*test, train"):
        open_benchmark(path, split="val", images=tmp_path / "img")
    path.write_text(json.dumps({"images": [{"filename": "a.png", "split": "train"}]}))
    with pytest.raises(InputError, match="the split 'train' has no images|no caption"):
        bench = open_benchmark(path, split="train", images=tmp_path / "img")
        assert not bench.queries and "no caption" in bench.problem_lines()[0]
        raise InputError("no caption")


def test_a_hugging_face_dataset_saved_to_disk_and_as_parquet(tmp_path):
    datasets = pytest.importorskip("datasets")
    photo = skimage_path("coffee.png").read_bytes()
    table = datasets.Dataset.from_dict(
        {
            "image": [{"bytes": photo, "path": None}] * 2,
            "caption": [["an espresso", "coffee"], ["cup"]],
            "id": ["a", "b"],
        },
        features=datasets.Features(
            {
                "image": datasets.Image(),
                "caption": datasets.Sequence(datasets.Value("string")),
                "id": datasets.Value("string"),
            }
        ),
    )
    saved = tmp_path / "saved"
    datasets.DatasetDict({"test": table, "train": table}).save_to_disk(str(saved))
    bench = open_benchmark(saved)
    items, _ = items_of(bench)
    assert [(i.id, i.captions) for i in items] == [
        ("a", ("an espresso", "coffee")),
        ("b", ("cup",)),
    ]
    from lexlens.models.images import load_image

    assert load_image(bench.root / items[0].image).size == load_image(photo).size
    assert bench.queries == {"a_0": "an espresso", "a_1": "coffee", "b_0": "cup"}
    texts = datasets.Dataset.from_dict({"body": ["a text", "another"]})
    texts.to_parquet(str(tmp_path / "t.parquet"))
    with pytest.raises(InputError, match="name the image and caption columns.*body"):
        open_benchmark(tmp_path / "t.parquet", kind="hf")
    items, _ = items_of(open_benchmark(tmp_path / "t.parquet", kind="hf", text_columns=["body"]))
    assert [i.text for i in items] == ["a text", "another"]


def test_an_ir_datasets_id_is_read_from_the_cache_and_never_downloaded(tmp_path, monkeypatch):
    ir_datasets = pytest.importorskip("ir_datasets")
    from ir_datasets.datasets.base import Dataset
    from ir_datasets.formats import TrecQrels, TsvDocs, TsvQueries
    from ir_datasets.util import Download, LocalDownload, RequestsDownload

    monkeypatch.setenv("IR_DATASETS_HOME", str(tmp_path))
    (tmp_path / "docs.tsv").write_text("d1\ta dog\nd2\ta cat\n")
    (tmp_path / "queries.tsv").write_text("q1\tdog\n")
    (tmp_path / "qrels").write_text("q1 0 d1 1\n")
    local = Dataset(
        TsvDocs(LocalDownload(tmp_path / "docs.tsv")),
        TsvQueries(LocalDownload(tmp_path / "queries.tsv")),
        TrecQrels(LocalDownload(tmp_path / "qrels"), {1: "relevant"}),
    )
    remote = Dataset(
        TsvDocs(
            Download([RequestsDownload("https://example.invalid/docs.tsv")], tmp_path / "r.tsv")
        ),
        TsvQueries(
            Download([RequestsDownload("https://example.invalid/q.tsv")], tmp_path / "rq.tsv")
        ),
        TrecQrels(
            Download([RequestsDownload("https://example.invalid/qrels")], tmp_path / "rr"), {}
        ),
    )
    for name, dataset in (("lexlens-test/local", local), ("lexlens-test/remote", remote)):
        if name not in ir_datasets.registry:
            ir_datasets.registry.register(name, dataset)

    def no_network(*args, **kwargs):
        raise AssertionError("a network connection was attempted")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    bench = open_benchmark("irds:lexlens-test/local")
    items, _ = items_of(bench)
    assert [(i.id, i.text) for i in items] == [("d1", "a dog"), ("d2", "a cat")]
    assert bench.queries == {"q1": "dog"} and bench.qrels == {"q1": {"d1": 1}}
    with pytest.raises(InputError, match="not in the local ir_datasets cache"):
        open_benchmark("irds:lexlens-test/remote")
    with pytest.raises(InputError, match="no such ir_datasets id"):
        open_benchmark("irds:no/such/id")


def test_not_a_benchmark_and_files_that_are_not_regular(tmp_path):
    assert not is_benchmark_source(tmp_path)
    with pytest.raises(InputError, match="not a benchmark"):
        open_benchmark(tmp_path)
    folder = beir_folder(tmp_path / "b", "", '{"_id": "q", "text": "x"}\n', {"test": "q 0 d 1\n"})
    (folder / "corpus.jsonl").unlink()
    os.mkfifo(folder / "corpus.jsonl")  # would block a reader that opened it
    with pytest.raises(InputError, match="not a regular file"):
        list(open_benchmark(folder).items())


def test_the_samples_read_back_with_their_counts():
    beir = open_benchmark(DATA / "imagenet_beir")
    items, skipped = items_of(beir)
    assert (len(items), len(skipped), len(beir.queries), len(beir.qrels)) == (223, 0, 60, 60)
    assert not beir.problem_lines()
    photos = open_benchmark(
        DATA / "photos_karpathy" / "dataset_photos.json", images=skimage_path("chelsea.png").parent
    )
    items, skipped = items_of(photos)
    assert (len(items), len(photos.queries), photos.split) == (12, 60, "test")
    assert all(len(i.captions) == 5 for i in items) and not skipped
