"""The benchmark readers and sources are never silently wrong, unbounded, or touching the
user's data: ids a TREC file cannot hold are refused in one place, a repeated image id never
lends its captions to the first image, a bare ``\\r`` stays in its passage, Hugging Face
datasets are read in place and per row, lists in JSON documents are capped with their count,
an over-long line is skipped alone, deep JSON is one line, and the documented sources work
from the command line. Every fixture is written here."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from lexlens.analysis.datasets.items import Skipped, SourceItem
from lexlens.analysis.datasets.readers import is_benchmark_source, open_benchmark
from lexlens.analysis.datasets.sources import iter_items, open_source
from lexlens.analysis.datasets.trec import Problems, lines
from lexlens.models.base import InputError
from tests.datasets.files import beir_folder, items_of, jsonl, msmarco_files
from tests.helpers import one_line_error, skimage_path


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``folder``: its size and modification time."""
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


# --- A: ids a TREC file cannot hold, refused in one place -------------------------------


def test_silent_wrong_whitespace_ids_in_a_beir_folder_are_skipped_and_named(tmp_path, cli):
    corpus = jsonl(
        [
            {"_id": "d1", "text": "a red apple"},
            {"_id": "d 2", "text": "a space in the id"},
            {"_id": "d\t3", "text": "a tab in the id"},
            {"_id": "d4", "text": "a green pear"},
            {"_id": "d\n5", "text": "a newline in the id"},
        ]
    )
    queries = jsonl(
        [
            {"_id": "q1", "text": "apple"},
            {"_id": "q 2", "text": "pear"},
            {"_id": "q3", "text": "fruit"},
        ]
    )
    qrels = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq 2\td4\t1\nq3\td 2\t1\nq3\td4\t1\n"
    folder = beir_folder(tmp_path / "beir", corpus, queries, qrels)
    bench = open_benchmark(folder)
    items, skipped = items_of(bench)
    assert [i.id for i in items] == ["d1", "d4"]
    label = f"{folder}/corpus.jsonl"
    assert [(s.file, s.reason) for s in skipped] == [
        (f"{label}:2", "id 'd 2' holds whitespace (TREC qrels and run files split on it): skipped"),
        (
            f"{label}:3",
            "id 'd\\t3' holds whitespace (TREC qrels and run files split on it): skipped",
        ),
        (
            f"{label}:5",
            "id 'd\\n5' holds whitespace (TREC qrels and run files split on it): skipped",
        ),
    ]
    assert bench.queries == {"q1": "apple", "q3": "fruit"}
    assert bench.qrels == {"q1": {"d1": 1}, "q3": {"d4": 1}}
    problems = "\n".join(bench.problem_lines())
    assert f"{folder}/queries.jsonl:2: query id 'q 2' holds whitespace" in problems
    assert "query 'q3': judged item id 'd 2' holds whitespace" in problems

    out = tmp_path / "ix"
    run = cli("index", "--encoder", "splade-tiny", "--source", folder, "--out", out, "--json")
    assert run.returncode == 0, run.stderr
    document = run.json()
    assert document["items"] == 2 and document["manifest"]["counts"]["skipped"] == 3
    assert {s["file"] for s in document["skipped"]} == {f"{label}:{n}" for n in (2, 3, 5)}
    # What the index keeps for lexlens evaluate splits into the right fields.
    qrels_lines = (out / "qrels.tsv").read_text().splitlines()[1:]
    assert sorted(qrels_lines) == ["q1\td1\t1", "q3\td4\t1"]
    assert [json.loads(x)["_id"] for x in (out / "queries.jsonl").read_text().splitlines()] == [
        "q1",
        "q3",
    ]


def test_silent_wrong_whitespace_ids_in_ms_marco_csv_jsonl_and_folders(tmp_path):
    collection = msmarco_files(
        tmp_path,
        "0\tfirst passage\n1 1\tsecond passage\n2\tthird\n",
        "10\twhat\n1 1\twho\n",
        "10 0 0 1\n",
    )
    bench = open_benchmark(collection)
    items, skipped = items_of(bench)
    assert [i.id for i in items] == ["0", "2"]
    assert [s.file for s in skipped] == [f"{tmp_path}/collection.tsv:2"]
    assert bench.queries == {"10": "what"}
    assert f"{tmp_path}/queries.dev.tsv:2: query id '1 1' holds whitespace" in "\n".join(
        bench.problem_lines()
    )

    csv_source = tmp_path / "items.csv"
    csv_source.write_text("id,text\na b,spaced\nc,plain\nc,again\n")
    got = list(iter_items(open_source(csv_source)))
    assert [(type(x).__name__, getattr(x, "id", None) or x.file) for x in got] == [
        ("Skipped", f"{csv_source}:2"),
        ("SourceItem", "c"),
        ("Skipped", f"{csv_source}:4"),
    ]
    assert "appears again" in got[2].reason

    jsonl_source = tmp_path / "items.jsonl"
    jsonl_source.write_text(
        json.dumps({"id": "x\ty", "text": "tab"}) + "\n" + json.dumps({"id": 0, "text": "zero"})
    )
    got = list(iter_items(open_source(jsonl_source)))
    assert isinstance(got[0], Skipped) and got[0].file == f"{jsonl_source}:1"
    assert isinstance(got[1], SourceItem) and got[1].id == "0"  # an id 0 is an id

    photos = tmp_path / "photos"
    photos.mkdir()
    data = skimage_path("chelsea.png").read_bytes()
    for name in ("my photo.png", "100%.png", "plain.png"):
        (photos / name).write_bytes(data)
    got = list(iter_items(open_source(photos)))
    assert [(i.id, i.image) for i in got] == [
        ("100%25.png", "100%.png"),
        ("my%20photo.png", "my photo.png"),  # a path made into an id: kept, TREC-safe
        ("plain.png", "plain.png"),
    ]


def test_silent_wrong_whitespace_ids_in_karpathy_and_hugging_face_name_their_row(tmp_path):
    photo = skimage_path("chelsea.png")
    entries = [
        {
            "filename": "chelsea.png",
            "split": "test",
            "cocoid": "7 7",
            "sentences": [{"raw": "a cat"}],
        },
        {
            "filename": "chelsea.png",
            "split": "test",
            "cocoid": 8,
            "sentences": [{"raw": "a tabby"}],
        },
    ]
    path = tmp_path / "dataset_coco.json"
    path.write_text(json.dumps({"images": entries}))
    bench = open_benchmark(path, images=photo.parent)
    items, skipped = items_of(bench)
    assert [i.id for i in items] == ["8"] and skipped[0].file == f"{path}:images[0]"
    assert bench.queries == {"8_0": "a tabby"}
    assert f"{path}:images[0].sentences[0]: query id '7 7_0' holds whitespace" in "\n".join(
        bench.problem_lines()
    )

    datasets = pytest.importorskip("datasets")
    saved = tmp_path / "hf"
    datasets.Dataset.from_dict(
        {"id": ["a b", "c"], "caption": ["first", "second"], "image": ["chelsea.png"] * 2}
    ).save_to_disk(str(saved))
    (saved / "chelsea.png").write_bytes(photo.read_bytes())
    bench = open_benchmark(saved)
    items, skipped = items_of(bench)
    assert [i.id for i in items] == ["c"] and skipped[0].file == f"{saved}[train][0]"
    assert bench.queries == {"c_0": "second"}
    assert f"{saved}[train][0]: query id 'a b_0' holds whitespace" in "\n".join(
        bench.problem_lines()
    )


# --- B: a repeated image id never lends its captions to the first image ----------------


def test_silent_wrong_a_repeated_karpathy_image_id_is_named_and_the_later_skipped(tmp_path):
    photo = skimage_path("chelsea.png")
    entries = [
        {
            "filename": "chelsea.png",
            "split": "test",
            "cocoid": 5,
            "sentences": [{"raw": "a cat on a rug"}, {"raw": "a tabby cat"}],
        },
        {"filename": "coffee.png", "split": "test", "cocoid": 6, "sentences": [{"raw": "coffee"}]},
        {
            "filename": "astronaut.png",
            "split": "test",
            "cocoid": 5,
            "sentences": [{"raw": "an astronaut"}, {"raw": "a flag"}, {"raw": "a space suit"}],
        },
    ]
    path = tmp_path / "dataset_coco.json"
    path.write_text(json.dumps({"images": entries}))
    bench = open_benchmark(path, images=photo.parent)
    # The first image keeps exactly its own two captions as queries; the later image's
    # three captions become nobody's queries (before: 5_0, 5_1 overwritten, 5_2 added).
    assert bench.queries == {"5_0": "a cat on a rug", "5_1": "a tabby cat", "6_0": "coffee"}
    assert bench.qrels == {"5_0": {"5": 1}, "5_1": {"5": 1}, "6_0": {"6": 1}}
    items, skipped = items_of(bench)
    assert [(i.id, i.image, i.captions) for i in items] == [
        ("5", "chelsea.png", ("a cat on a rug", "a tabby cat")),
        ("6", "coffee.png", ("coffee",)),
    ]
    assert [(s.file, s.reason) for s in skipped] == [
        (f"{path}:images[2]", "id '5' appears again (first at images[0]): skipped")
    ]
    assert (
        f"{path}:images[2]: id '5' appears again (first at images[0]): skipped with its captions"
        in bench.problem_lines()
    )


def test_silent_wrong_a_repeated_hugging_face_id_is_named_and_the_later_skipped(tmp_path):
    datasets = pytest.importorskip("datasets")
    photo = skimage_path("chelsea.png").read_bytes()
    saved = tmp_path / "hf"
    datasets.Dataset.from_dict(
        {
            "image_id": ["x", "y", "x"],
            "captions": [["a cat", "a tabby"], ["a cup"], ["a dog"]],
            "image": [{"bytes": photo, "path": None}] * 3,
        },
        features=datasets.Features(
            {
                "image_id": datasets.Value("string"),
                "captions": datasets.Sequence(datasets.Value("string")),
                "image": datasets.Image(),
            }
        ),
    ).save_to_disk(str(saved))
    bench = open_benchmark(saved)
    assert bench.queries == {"x_0": "a cat", "x_1": "a tabby", "y_0": "a cup"}
    items, skipped = items_of(bench)
    assert [(i.id, i.captions) for i in items] == [("x", ("a cat", "a tabby")), ("y", ("a cup",))]
    assert [(s.file, s.reason) for s in skipped] == [
        (f"{saved}[train][2]", "id 'x' appears again (first at row 0): skipped")
    ]


# --- C: a bare \r stays in its passage; line numbers stay true --------------------------


def test_data_lost_a_bare_cr_stays_in_the_ms_marco_passage(tmp_path):
    msmarco_files(
        tmp_path,
        b"0\tthe first half\rthe second half\r\n"  # CRLF line end: dropped; the bare \r kept
        b"1\tnext passage\n"
        b"no tab on line three\n"
        b"3\tlast\n",
        b"10\twhat is\rthis\n",
        "10 0 0 1\n",
    )
    bench = open_benchmark(tmp_path)
    items, skipped = items_of(bench)
    assert [(i.id, i.text, i.where.rsplit(":", 1)[1]) for i in items] == [
        ("0", "the first half\rthe second half", "1"),
        ("1", "next passage", "2"),
        ("3", "last", "4"),
    ]
    assert [s.file for s in skipped] == [f"{tmp_path}/collection.tsv:3"]  # its true line
    assert bench.queries == {"10": "what is\rthis"}
    assert [n for n, _ in lines(tmp_path / "collection.tsv")] == [1, 2, 3, 4]


# --- D: Hugging Face images per row, nothing written into the dataset ------------------


def test_security_a_mixed_image_column_is_read_per_row_and_the_dataset_never_written(
    tmp_path, monkeypatch, effnet
):
    datasets = pytest.importorskip("datasets")
    monkeypatch.setenv("LEXLENS_CACHE", str(tmp_path / "cache"))
    coffee = skimage_path("coffee.png").read_bytes()
    saved = tmp_path / "hf"
    (saved / "photos").mkdir(parents=True)  # a photo inside the dataset's folder
    (saved / "photos" / "chelsea.png").write_bytes(skimage_path("chelsea.png").read_bytes())
    (tmp_path / "elsewhere.png").write_bytes(coffee)  # one outside it
    rows = {
        "id": ["embedded", "by-path", "escaping", "embedded-2"],
        "caption": ["a cup of coffee", "a cat", "outside", "coffee again"],
        "image": [
            {"bytes": coffee, "path": None},
            {"bytes": None, "path": str(saved / "photos" / "chelsea.png")},
            {"bytes": None, "path": str(tmp_path / "elsewhere.png")},
            {"bytes": coffee, "path": "coffee.png"},
        ],
    }
    # An Image feature's storage (struct of bytes and path) as a plain struct: datasets
    # would embed an Image feature's files on save, other writers (and older datasets) do not.
    features = datasets.Features(
        {
            "id": datasets.Value("string"),
            "caption": datasets.Value("string"),
            "image": {"bytes": datasets.Value("binary"), "path": datasets.Value("string")},
        }
    )
    datasets.Dataset.from_dict(rows, features=features).save_to_disk(str(saved))
    before = _snapshot(saved)

    bench = open_benchmark(saved)
    items, skipped = items_of(bench)
    assert bench.root == saved
    by_id = {i.id: i for i in items}
    assert by_id["by-path"].image == "photos/chelsea.png"  # relative to the dataset's folder
    for name in ("embedded", "embedded-2"):
        written = Path(by_id[name].image)
        assert written.is_absolute() and written.is_relative_to(tmp_path / "cache" / "hf-images")
        assert written.read_bytes() == coffee
    assert [(s.file, s.reason) for s in skipped] == [
        (
            f"{saved}[train][2]",
            f"image path '{tmp_path}/elsewhere.png' leaves the dataset's folder: refused",
        )
    ]

    from lexlens.analysis.collections.indexing import index_collection
    from lexlens.analysis.collections.store import open_index

    result = index_collection(effnet, saved, tmp_path / "ix")
    assert (result.items, result.skipped_count) == (3, 1)
    ix = open_index(tmp_path / "ix")
    paths = {m["id"]: ix.image_path(m) for m in ix.meta(list(range(len(ix))))}
    assert paths["by-path"] == saved / "photos" / "chelsea.png"
    assert paths["embedded"].read_bytes() == coffee
    assert _snapshot(saved) == before  # nothing written into the user's dataset folder


# --- E: bounded ---------------------------------------------------------------------------


def _cache_files(folder: Path) -> list[str]:
    return sorted(str(p) for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def _written() -> int:
    """Bytes this process has written through write calls so far (Linux /proc)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    raise AssertionError("no wchar in /proc/self/io")


def test_unbounded_a_saved_dataset_and_parquet_files_are_read_in_place(tmp_path, monkeypatch):
    datasets = pytest.importorskip("datasets")
    if not Path("/proc/self/io").exists():
        pytest.skip("needs Linux /proc/self/io")
    monkeypatch.setenv("LEXLENS_CACHE", str(tmp_path / "cache"))
    n = 3000
    table = datasets.Dataset.from_dict(
        {
            "id": [f"p{i}" for i in range(n)],
            "text": [f"passage {i} " + "about retrieval and sparse terms " * 20 for i in range(n)],
        }
    )
    saved, parquet = tmp_path / "saved", tmp_path / "parquet"
    table.save_to_disk(str(saved))
    parquet.mkdir()
    table.select(range(n // 2)).to_parquet(str(parquet / "train-00000-of-00002.parquet"))
    table.select(range(n // 2, n)).to_parquet(str(parquet / "train-00001-of-00002.parquet"))
    hf_cache = Path(datasets.config.HF_DATASETS_CACHE)
    hf_before = _cache_files(hf_cache)
    for folder in (saved, parquet):
        size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
        before, written = _snapshot(folder), _written()
        bench = open_benchmark(folder)
        items, skipped = items_of(bench)
        assert (len(items), skipped, bench.size_hint) == (n, [], n)
        assert items[0].id == "p0" and items[-1].id == f"p{n - 1}"
        assert _written() - written < size // 20, folder  # no copy of the data was written
        assert _snapshot(folder) == before
    assert _cache_files(tmp_path / "cache") == []
    assert _cache_files(hf_cache) == hf_before


def test_unbounded_the_skipped_list_of_a_build_is_capped_with_its_count(tmp_path, cli):
    rows = 100_000
    source = tmp_path / "items.csv"
    with open(source, "w") as handle:
        handle.write("id,text\nkept,a text to index\n")
        handle.writelines(f"e{i},\n" for i in range(rows))  # an id, no text: skipped
    run = cli(
        "index", "--encoder", "splade-tiny", "--source", source, "--out", tmp_path / "ix", "--json"
    )
    assert run.returncode == 0, run.stderr
    document = run.json()
    assert document["items"] == 1
    assert len(document["skipped"]) == 100 and document["skipped"][0]["file"] == f"{source}:3"
    assert document["manifest"]["counts"]["skipped"] == rows
    assert len(run.stdout) < 300_000  # one entry per row would be about 9 MB
    text = cli("index", "--encoder", "splade-tiny", "--source", source, "--out", tmp_path / "ix")
    assert f"skipped {rows}" in text.stdout and f"… and {rows - 20} more" in text.stdout


def test_unbounded_an_over_long_line_is_read_past_in_chunks_and_its_neighbours_kept(tmp_path):
    from lexlens.analysis.core.inputs import MAX_LINE_BYTES

    long_line = 40 * 1024 * 1024
    path = tmp_path / "collection.tsv"
    with open(path, "wb") as handle:
        handle.write(b"0\tbefore\n1\t")
        handle.write(b"x" * long_line)
        handle.write(b"\n2\tafter\n")
    (tmp_path / "queries.dev.tsv").write_text("10\tq\n")
    (tmp_path / "qrels.dev.tsv").write_text("10 0 0 1\n")
    bench = open_benchmark(path)
    tracemalloc.start()
    try:
        items, skipped = items_of(bench)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [(i.id, i.text) for i in items] == [("0", "before"), ("2", "after")]
    assert [(s.file, s.reason) for s in skipped] == [
        (f"{path}:2", f"a line longer than {MAX_LINE_BYTES:,} bytes")
    ]
    assert f"{path}:2: a line longer than" in bench.problem_lines()[0]
    # Gathered up to the limit (a bytearray grows by about 1/8), then read past chunk by
    # chunk: the 40 MB line is never held whole.
    assert peak < 1.5 * MAX_LINE_BYTES < long_line, peak
    problems = Problems()
    assert [n for n, _ in lines(path, problems=problems)] == [1, 3]
    assert problems.count == 1
    with pytest.raises(InputError, match=r"collection.tsv:2: a line longer than"):
        list(lines(path))  # without a problems list: refused in one line


def test_data_lost_a_line_that_is_not_utf8_is_skipped_alone(tmp_path):
    folder = beir_folder(
        tmp_path / "beir",
        '{"_id": "d1", "text": "one"}\n{"_id": "d2", "text": "caf\xe9"}\n',
        '{"_id": "q1", "text": "one"}\n',
        "q1 0 d1 1\n",
    )
    latin1 = b'{"_id": "d3", "text": "latin-1 \xe9"}'
    with open(folder / "corpus.jsonl", "ab") as handle:
        handle.write(latin1 + b'\n{"_id": "d4", "text": "four"}\n')
    items, skipped = items_of(open_benchmark(folder))
    assert [i.id for i in items] == ["d1", "d2", "d4"]
    assert [(s.file, s.reason) for s in skipped] == [
        (f"{folder}/corpus.jsonl:3", f"not UTF-8 text (byte {latin1.index(0xE9)} of the line)")
    ]


def test_traceback_deeply_nested_json_is_one_line_naming_file_and_line(tmp_path, cli):
    deep = "[" * 100_000
    folder = beir_folder(
        tmp_path / "beir",
        '{"_id": "d1", "text": "one"}\n' + deep + '\n{"_id": "d2", "text": "two"}\n',
        '{"_id": "q1", "text": "one"}\n',
        "q1 0 d1 1\n",
    )
    items, skipped = items_of(open_benchmark(folder))
    assert [i.id for i in items] == ["d1", "d2"]
    assert [(s.file, s.reason) for s in skipped] == [
        (f"{folder}/corpus.jsonl:2", "JSON nested 100,000 levels deep (over 400): refused")
    ]
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "one"}\n' + deep + "\n")
    bench = open_benchmark(folder)  # the deep query line is one problem, q1 is kept
    assert bench.queries == {"q1": "one"}
    assert bench.problem_lines() == [
        f"{folder}/queries.jsonl:2: JSON nested 100,000 levels deep (over 400): refused"
    ]

    karpathy = tmp_path / "dataset_coco.json"
    karpathy.write_text('{"images": [\n{"filename": "a.png",\n"sentences": ' + deep + "\n")
    run = cli("index", "--encoder", "splade-tiny", "--source", karpathy, "--out", tmp_path / "k")
    one_line_error(run, f"{karpathy}:3: JSON nested 100,003 levels deep")  # {, [, { and 100,000

    jsonl_file = tmp_path / "items.jsonl"
    jsonl_file.write_text('{"text": "kept"}\n{"text": ' + deep + "\n")
    got = list(iter_items(open_source(jsonl_file)))
    assert isinstance(got[0], SourceItem) and got[0].text == "kept"
    assert (got[1].file, got[1].reason) == (
        f"{jsonl_file}:2",
        "JSON nested 100,001 levels deep (over 400): refused",
    )
    assert not (tmp_path / "k").exists()


# --- F: the documented paths work from the command line --------------------------------


def test_silent_wrong_parquet_sources_index_from_the_command_line(tmp_path, cli):
    datasets = pytest.importorskip("datasets")
    captions = ["a cat on a mat", "a dog in a park", "a cup of coffee"]
    datasets.Dataset.from_dict({"caption": captions}).to_parquet(str(tmp_path / "x.parquet"))
    run = cli(
        "index",
        "--encoder",
        "splade-tiny",
        "--source",
        tmp_path / "x.parquet",
        "--text-columns",
        "caption",
        "--out",
        tmp_path / "ix1",
        "--json",
    )
    assert run.returncode == 0, run.stderr
    assert run.json()["items"] == 3

    folder = tmp_path / "hub" / "data"
    folder.mkdir(parents=True)
    datasets.Dataset.from_dict({"text": captions[:2]}).to_parquet(str(folder / "train.parquet"))
    datasets.Dataset.from_dict({"text": captions[2:]}).to_parquet(str(folder / "test.parquet"))
    run = cli(
        "index",
        "--encoder",
        "splade-tiny",
        "--source",
        tmp_path / "hub",
        "--split",
        "test",
        "--out",
        tmp_path / "ix2",
        "--json",
    )
    assert run.returncode == 0, run.stderr
    from lexlens.analysis.collections.store import open_index

    assert open_index(tmp_path / "ix2").column("text") == ["a cup of coffee"]
    run = cli(
        "index",
        "--encoder",
        "splade-tiny",
        "--source",
        tmp_path / "hub",
        "--split",
        "dev",
        "--out",
        tmp_path / "ix3",
    )
    one_line_error(run, "no split 'dev'", "test, train")

    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    features = tmp_path / "features.parquet"  # D2S's published layout: not a dataset
    emb = np.zeros((2, 4), np.float32).tolist()
    pq.write_table(pa.table({"id": ["a", "b"], "emb": emb}), features)
    assert not is_benchmark_source(features) and is_benchmark_source(tmp_path / "x.parquet")


def test_security_an_irds_id_not_in_the_cache_leaves_no_folder_and_says_one_line(
    tmp_path, monkeypatch, lexlens_cli
):
    pytest.importorskip("ir_datasets")
    home, scratch = tmp_path / "irds" / "home", tmp_path / "irds-tmp"
    monkeypatch.setenv("IR_DATASETS_HOME", str(home))
    monkeypatch.setenv("IR_DATASETS_TMP", str(scratch))
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # a connection would fail, not leave
    out = tmp_path / "new" / "deeper" / "ix"
    run = lexlens_cli(
        "index",
        "--encoder",
        "splade-tiny",
        "--source",
        "irds:beir/nfcorpus/test",
        "--out",
        str(out),
    )
    one_line_error(run, "irds:beir/nfcorpus/test: not in the local ir_datasets cache")
    assert not (tmp_path / "irds").exists() and not scratch.exists()
    assert not (tmp_path / "new").exists()


def test_security_an_irds_corpus_missing_from_the_cache_is_refused_before_any_folder(
    tmp_path, monkeypatch, cli
):
    ir_datasets = pytest.importorskip("ir_datasets")
    from ir_datasets.datasets.base import Dataset
    from ir_datasets.formats import TrecQrels, TsvDocs, TsvQueries
    from ir_datasets.util import Download, LocalDownload, RequestsDownload

    (tmp_path / "queries.tsv").write_text("q1\tdog\n")
    (tmp_path / "qrels").write_text("q1 0 d1 1\n")
    remote = tmp_path / "remote" / "docs.tsv"  # its folder is made by ir_datasets
    dataset = Dataset(
        TsvDocs(Download([RequestsDownload("https://example.invalid/docs.tsv")], remote)),
        TsvQueries(LocalDownload(tmp_path / "queries.tsv")),
        TrecQrels(LocalDownload(tmp_path / "qrels"), {1: "relevant"}),
    )
    if "lexlens-test/docs-remote" not in ir_datasets.registry:
        ir_datasets.registry.register("lexlens-test/docs-remote", dataset)
    monkeypatch.setenv("IR_DATASETS_HOME", str(tmp_path))
    if remote.parent.exists():
        remote.parent.rmdir()
    out = tmp_path / "made" / "ix"
    run = cli(
        "index",
        "--encoder",
        "splade-tiny",
        "--source",
        "irds:lexlens-test/docs-remote",
        "--out",
        out,
    )
    one_line_error(run, "irds:lexlens-test/docs-remote: not in the local ir_datasets cache")
    assert not (tmp_path / "made").exists() and not remote.parent.exists()
