"""What a build guarantees beyond its arguments: memory bounded however many items a source
skips, every id an index stores passes the one id check (dense features too), a served page
reads typed paths only inside its data roots, and ``sample:NAME`` reads the benchmark shipped
in the package."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from lexlens.analysis.collections.indexing import build_index, index_collection, opened_source
from lexlens.analysis.collections.options import IndexOptions
from lexlens.analysis.collections.store import open_index
from lexlens.analysis.collections.workspace_build import (
    build_collection,
    check_collection_request,
)
from lexlens.analysis.core.samples import sample_benchmark
from lexlens.analysis.datasets.dataset import Benchmark
from lexlens.analysis.datasets.items import MAX_SKIPPED_IN_MANIFEST
from lexlens.models import LexlensError, load_encoder
from tests.helpers import model_tolerance


def test_unbounded_skipped_items_are_a_count_beside_the_first_thousand(splade, tmp_path):
    """50,000 empty rows: the build holds the first 1,000 skipped items and a count. Holding
    every one (a Skipped and its dict per row) peaked at 21 MB here, ≈380 bytes a row."""
    warm = tmp_path / "warm.csv"
    warm.write_text("id,text\na,a dog\n")
    build_index(splade, warm, tmp_path / "warm")  # every module the build imports, loaded
    rows = 50_000
    source = tmp_path / "empty.csv"
    with open(source, "w", encoding="utf-8") as handle:
        handle.write("id,text\n")
        handle.writelines(f"r{i},\n" for i in range(rows))
        handle.write("kept,a dog on the beach\n")
    tracemalloc.start()
    try:
        result = build_index(splade, source, tmp_path / "ix")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8_000_000, f"{peak / 1e6:.1f} MB"
    assert result.items == 1 and result.skipped_count == rows and len(result.skipped) == 100
    manifest = json.loads((tmp_path / "ix" / "manifest.json").read_text())
    assert manifest["counts"]["skipped"] == rows
    assert len(manifest["skipped"]) == MAX_SKIPPED_IN_MANIFEST == 1000
    assert manifest["skipped"][0] == {
        "file": f"{source}:2",
        "reason": "neither an image nor a text",
    }
    assert manifest["skipped"][-1]["file"] == f"{source}:1001"


@pytest.fixture(scope="module")
def head(tmp_path_factory):
    from tests.models.test_d2s import write_head

    return load_encoder(str(write_head(tmp_path_factory.mktemp("d2s") / "head")), device="cpu")


def test_silent_wrong_a_dense_features_id_an_index_cannot_store_is_skipped(head, tmp_path):
    """An id with whitespace would split a TREC run's line; a features source's ids pass the
    check every source's items pass, so it is skipped and named with its file and line."""
    vectors = np.random.default_rng(0).standard_normal((4, head.feature_dim)).astype(np.float32)
    np.save(tmp_path / "f.npy", vectors)
    (tmp_path / "ids.txt").write_text("a\nb c\nd\ne\tf\n")
    result = build_index(head, tmp_path / "f.npy", tmp_path / "ix", ids=tmp_path / "ids.txt")
    index = open_index(result.out)
    assert index.column("id") == ["a", "d"] and result.skipped_count == 2
    assert [s.file for s in result.skipped] == [
        f"{tmp_path / 'ids.txt'}:2",
        f"{tmp_path / 'ids.txt'}:4",
    ]
    assert all("holds whitespace" in s.reason for s in result.skipped)
    # The stored vectors are those of rows 0 and 2, as the head encodes them one by one (to
    # float32 rounding: a batch orders the network's sums differently).
    for row, stored in ((0, 0), (2, 1)):
        dense = head.encode_features(vectors[row : row + 1], keep_units=False)[0].weights
        cols, weights = index.row(stored)
        assert np.array_equal(cols, np.flatnonzero(dense))
        assert np.allclose(weights, dense[cols], rtol=0, atol=model_tolerance(dense.max()))
    assert index.manifest.counts.skipped == 2


def test_security_a_served_build_reads_only_inside_the_data_roots(splade, tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("LEXLENS_HOME", str(home))
    root, private = tmp_path / "root", tmp_path / "private"
    root.mkdir()
    private.mkdir()
    (private / "notes.csv").write_text("id,text\na,a secret\n")
    (root / "leak").symlink_to(private)
    (root / "pets.csv").write_text("id,text\na,a dog on the beach\n")
    roots = [root]
    for path in (
        private / "notes.csv",
        root / "leak" / "notes.csv",
        f"{root}/../private/notes.csv",
        "/etc/passwd",
    ):
        with pytest.raises(LexlensError, match="path .* is outside the data roots"):
            build_collection(splade, "leak", "path", path=str(path), roots=roots)
    for option in ("images", "captions", "ids"):
        with pytest.raises(LexlensError, match=f"{option} .* is outside the data roots"):
            build_collection(
                splade,
                "leak",
                "path",
                path=str(root / "pets.csv"),
                roots=roots,
                **{option: str(root / "leak")},
            )
    assert not home.exists()  # nothing read, nothing written
    result = build_collection(splade, "pets", "path", path=str(root / "pets.csv"), roots=roots)
    assert result.items == 1
    # A packaged sample and ir_datasets' cache name no file of the server's.
    checked = check_collection_request("s", "path", path="sample:imagenet_beir", roots=roots)
    assert checked == IndexOptions()
    check_collection_request("s", "path", path="irds:beir/nfcorpus/test", roots=roots)
    # Without roots (the API, the command line) any path is read.
    assert build_collection(splade, "notes", "path", path=str(private / "notes.csv")).items == 1


def test_silent_wrong_sample_names_read_the_benchmarks_shipped_in_the_package(effnet, tmp_path):
    opened = opened_source("sample:imagenet_beir", IndexOptions())
    assert isinstance(opened, Benchmark) and len(opened.queries) == 60
    assert Path(opened.root) == sample_benchmark("imagenet_beir")
    with pytest.raises(LexlensError, match="no sample benchmark 'imagenet'"):
        opened_source("sample:imagenet", IndexOptions())
    # The photos benchmark's images are scikit-image's photos unless images says otherwise.
    skimage = pytest.importorskip("skimage")
    result = index_collection(effnet, "sample:photos_karpathy", tmp_path / "ix")
    photos = Path(skimage.__file__).parent / "data"
    assert result.items == 12 and result.skipped_count == 0
    assert result.manifest["source"]["root"] == str(photos.resolve())
    assert (tmp_path / "ix" / "queries.jsonl").is_file()
    with pytest.raises(LexlensError, match="no item could be indexed"):
        index_collection(effnet, "sample:photos_karpathy", tmp_path / "iy", images=tmp_path)
