"""Stored collections: sources, the CSR + Parquet store, incremental and atomic builds,
bad input. Real encoders, tiny sources."""

from __future__ import annotations

import csv
import errno
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from lexlens.analysis.collections.indexing import build_index
from lexlens.analysis.collections.npy_files import NpyAppender
from lexlens.analysis.collections.store import FORMAT_VERSION, MANIFEST, open_index, vocab_hash
from lexlens.analysis.collections.workspace import (
    delete_collection,
    list_collections,
    load_sample_photos,
)
from lexlens.analysis.collections.workspace_build import build_collection
from lexlens.analysis.core.gating import gate
from lexlens.models import InputError
from tests.helpers import skimage_path

PHOTOS = ["chelsea.png", "coffee.png", "rocket.jpg", "astronaut.png", "camera.png", "coins.png"]


def _thumbs(folder: Path, names: list[str], size: int = 96) -> Path:
    """Small copies of real photos (fast to encode)."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        image = Image.open(skimage_path(name)).convert("RGB")
        image.thumbnail((size, size))
        image.save(folder / (Path(name).stem + ".png"))
    return folder


def _texts_csv(path: Path, rows: list[tuple[str, str, str]]) -> Path:
    lines = ["id,text,labels"] + [f"{i},{t},{lab}" for i, t, lab in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


TEXTS = [
    ("a", "a dog running on the beach", "dog|beach"),
    ("b", "a dog sleeping in the park", "dog|park"),
    ("c", "a cat on the beach", "cat|beach"),
    ("d", "a cat in the snow", "cat|snow"),
]


def test_text_index_stores_the_gated_vectors_and_metadata(splade, tmp_path):
    src = _texts_csv(tmp_path / "texts.csv", TEXTS)
    result = build_index(splade, src, tmp_path / "ix", gate_k=768)
    assert (result.items, result.encoded, result.reused, result.skipped) == (4, 4, 0, [])
    index = open_index(tmp_path / "ix")
    m = index.manifest
    assert m.format == "lexlens-index" and m.format_version == FORMAT_VERSION == 2
    assert m.encoder.name == "splade-tiny" and len(m.encoder.fingerprint) == 32
    assert m.vocab.to_dict() == {"size": 30522, "hash": vocab_hash(splade.vocab)}
    assert m.gate_k == 768 and m.counts.labelled == 4 and m.modality == "text"
    # The stored rows are the gated document vectors, computed here independently.
    encodings = splade.encode_texts([t for _, t, _ in TEXTS], side="document")
    for i, enc in enumerate(encodings):
        assert np.array_equal(index.vector(i), gate(enc, splade.vocab, 768))
    assert index.indices.dtype == np.uint16 and index.data.dtype == np.float32  # |V| ≤ 65,536
    assert isinstance(index.data, np.memmap)
    meta = index.meta([2])[0]
    assert meta["id"] == "c" and meta["text"] == "a cat on the beach"
    assert meta["labels"] == ["beach", "cat"]
    batches = list(index.iter_batches(3))
    assert [b.ids for b in batches] == [["a", "b", "c"], ["d"]]
    assert np.array_equal(batches[1].vectors.toarray()[0], index.vector(3))


def test_reindexing_encodes_only_what_changed(splade, tmp_path):
    src = _texts_csv(tmp_path / "texts.csv", TEXTS)
    build_index(splade, src, tmp_path / "ix")
    again = build_index(splade, src, tmp_path / "ix")
    assert again.up_to_date and again.encoded == 0
    more = [
        *TEXTS,
        ("e", "a horse in a field", "horse"),
        ("f", "a red bus", "bus"),
        ("g", "a bowl of soup", "food"),
    ]
    _texts_csv(src, more)
    grown = build_index(splade, src, tmp_path / "ix")
    assert (grown.items, grown.encoded, grown.reused) == (7, 3, 4)
    assert open_index(tmp_path / "ix").meta([6])[0]["id"] == "g"
    # A different gate k changes every vector: everything is encoded again.
    regated = build_index(splade, src, tmp_path / "ix", gate_k=5)
    assert regated.encoded == 7 and regated.reused == 0


def test_image_folder_adds_three_files_encodes_three(effnet, tmp_path):
    folder = _thumbs(tmp_path / "photos", PHOTOS[:3])
    (folder / "sub").mkdir()
    first = build_index(effnet, folder, tmp_path / "ix")
    assert (first.items, first.encoded) == (3, 3) and first.manifest["modality"] == "image"
    _thumbs(folder / "sub", PHOTOS[3:6])
    second = build_index(effnet, folder, tmp_path / "ix")
    assert (second.items, second.encoded, second.reused) == (6, 3, 3)
    ids = open_index(tmp_path / "ix").column("id")
    assert ids == [
        "chelsea.png",
        "coffee.png",
        "rocket.png",
        "sub/astronaut.png",
        "sub/camera.png",
        "sub/coins.png",
    ]


def test_unreadable_images_are_listed_and_the_rest_indexed(effnet, tmp_path):
    folder = _thumbs(tmp_path / "photos", PHOTOS[:2])
    (folder / "broken.png").write_bytes(b"not a png at all")
    (folder / "half.png").write_bytes((folder / "chelsea.png").read_bytes()[:300])
    (folder / "notes.txt").write_text("ignored: not an image")
    result = build_index(effnet, folder, tmp_path / "ix")
    assert result.items == 2
    reasons = {Path(s.file).name: s.reason for s in result.skipped}
    assert set(reasons) == {"broken.png", "half.png"}
    assert "not an image" in reasons["broken.png"] and "truncated" in reasons["half.png"].lower()
    assert open_index(tmp_path / "ix").manifest.counts.skipped == 2


def test_empty_folder_and_csv_without_columns(effnet, splade, tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no images found"):
        build_index(effnet, tmp_path / "empty", tmp_path / "ix")
    bad = tmp_path / "bad.csv"
    bad.write_text("name,score\nx,1\n")
    with pytest.raises(InputError, match="needs an 'image' or a 'text' column"):
        build_index(splade, bad, tmp_path / "ix")
    assert not (tmp_path / "ix").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".ix.")]


def test_image_paths_may_not_leave_the_source_folder(effnet, tmp_path):
    inside = _thumbs(tmp_path / "set" / "img", PHOTOS[:1])
    outside = _thumbs(tmp_path / "elsewhere", PHOTOS[1:2])
    table = tmp_path / "set" / "items.csv"
    table.write_text(
        "id,image,caption,caption_2,labels\n"
        "cat,img/chelsea.png,a cat,a tabby cat looking up,animal|cat\n"
        "up,../elsewhere/coffee.png,coffee,,drink\n"
        f"abs,{outside / 'coffee.png'},coffee,,drink\n"
        f"absin,{inside / 'chelsea.png'},same cat,,cat\n"
    )
    result = build_index(effnet, table, tmp_path / "ix")
    assert result.items == 2
    refused = [s for s in result.skipped if "leaves the source's folder" in s.reason]
    assert len(refused) == 2
    index = open_index(tmp_path / "ix")
    meta = index.meta([0])[0]
    assert meta["captions"] == ["a cat", "a tabby cat looking up"]
    assert index.image_path(meta) == (inside / "chelsea.png").resolve()


def test_corrupted_or_truncated_index_is_one_clear_error(splade, tmp_path, cli):
    src = _texts_csv(tmp_path / "texts.csv", TEXTS)
    build_index(splade, src, tmp_path / "ix")
    broken = tmp_path / "broken"
    shutil.copytree(tmp_path / "ix", broken)
    data = broken / "data.npy"
    data.write_bytes(data.read_bytes()[:-8])
    with pytest.raises(InputError, match="data.npy has"):
        open_index(broken)
    proc = cli("search", "--index", broken, "--query", "dog")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "not a valid" in proc.stderr
    (broken / MANIFEST).write_text("[1, 2]")
    with pytest.raises(InputError, match="not a valid manifest"):
        open_index(broken)
    (broken / MANIFEST).unlink()
    with pytest.raises(InputError, match="no manifest.json"):
        open_index(broken)
    shutil.rmtree(broken)
    shutil.copytree(tmp_path / "ix", broken)
    indptr = np.load(broken / "indptr.npy")
    indptr[2] = 10**6
    np.save(broken / "indptr.npy", indptr)  # same size, wrong content
    with pytest.raises(InputError, match="row pointers|changed after the index was built"):
        open_index(broken)


def test_a_full_disk_leaves_no_index_that_looks_valid(splade, tmp_path, monkeypatch):
    src = _texts_csv(tmp_path / "texts.csv", TEXTS)
    build_index(splade, src, tmp_path / "ix")
    before = {p.name: p.read_bytes() for p in (tmp_path / "ix").iterdir()}
    _texts_csv(src, [*TEXTS, ("e", "a horse in a field", "horse")])
    calls = {"n": 0}
    original = NpyAppender.append

    def fill_up(self, values):
        calls["n"] += 1
        if calls["n"] > 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        original(self, values)

    monkeypatch.setattr(NpyAppender, "append", fill_up)
    with pytest.raises(InputError, match="disk is full.*previous index is unchanged"):
        build_index(splade, src, tmp_path / "ix")
    after = {p.name: p.read_bytes() for p in (tmp_path / "ix").iterdir()}
    assert after == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    with pytest.raises(InputError, match="disk is full.*nothing was written"):
        build_index(splade, src, tmp_path / "new")
    assert not (tmp_path / "new").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_a_real_full_tmpfs(splade, tmp_path):
    mount = tmp_path / "small"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)]).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        src = _texts_csv(tmp_path / "texts.csv", TEXTS * 1)
        with pytest.raises(InputError, match="disk is full"):
            build_index(splade, src, mount / "ix")  # vocab.txt alone is 230 kB
        assert list(mount.iterdir()) == []
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_postings_search_equals_exact_ranking(splade, tmp_path):
    """The float16 inverted index + exact rescoring gives the exact top items."""
    from lexlens.analysis.retrieval.scorer import scorer_for

    rng = np.random.default_rng(0)
    texts = [
        " ".join(
            rng.choice(
                ["dog", "cat", "beach", "park", "snow", "red", "car", "tree", "blue", "house"], 4
            )
        )
        for _ in range(60)
    ]
    src = tmp_path / "t.txt"
    src.write_text("\n".join(texts))
    build_index(splade, src, tmp_path / "ix", postings=True)
    index = open_index(tmp_path / "ix")
    assert index.postings is not None
    dense = np.stack([index.vector(i) for i in range(len(index))]).astype(np.float64)
    norms = np.asarray(index.norms, dtype=np.float64)  # as stored (float32)
    assert np.allclose(norms, np.linalg.norm(dense, axis=1), rtol=1e-6)
    for trial in range(6):
        q = np.zeros(index.vocab_size, np.float32)
        q[rng.choice(np.flatnonzero(dense.any(0)), 5, replace=False)] = rng.normal(size=5)
        normalize, square = bool(trial % 2), trial >= 3
        if square:
            q = np.abs(q)
        f = dense**2 if square else dense
        reference = f @ q.astype(np.float64)
        if normalize:
            reference = reference / (norms**2 if square else norms)
        touched = np.flatnonzero((dense[:, q != 0] != 0).any(1))
        expected = touched[np.lexsort((touched, -reference[touched]))][:7]
        rows, scores = scorer_for(index).top(q, 7, normalize=normalize, square=square)
        assert list(rows) == list(expected)
        assert np.allclose(scores, reference[expected], rtol=1e-9)


def test_workspace_list_and_delete(splade, tmp_path, monkeypatch):
    monkeypatch.setenv("LEXLENS_HOME", str(tmp_path / "home"))
    src = _texts_csv(tmp_path / "texts.csv", TEXTS)
    build_index(splade, src, tmp_path / "home" / "collections" / "pets")
    (tmp_path / "home" / "collections" / "junk").mkdir()
    cards = {c["name"]: c for c in list_collections()}
    assert cards["pets"]["items"] == 4 and "error" in cards["junk"]
    delete_collection("pets")
    assert "pets" not in {c["name"] for c in list_collections()}
    with pytest.raises(InputError, match="no stored collection"):
        delete_collection("pets")


def test_index_cli(cli, tmp_path):
    src = _texts_csv(tmp_path / "texts.csv", TEXTS)
    proc = cli(
        "index", "--encoder", "splade-tiny", "--source", src, "--out", tmp_path / "ix", "--json"
    )
    assert proc.returncode == 0, proc.stderr
    payload = proc.json()
    assert payload["items"] == 4 and payload["encoded"] == 4
    assert list(payload) == [
        "out",
        "encoder",
        "items",
        "encoded",
        "reused",
        "skipped",
        "up_to_date",
        "manifest",
        "notes",
    ]
    assert json.loads((tmp_path / "ix" / MANIFEST).read_text()) == payload["manifest"]
    proc = cli("index", "--encoder", "splade-tiny", "--source", src, "--out", tmp_path / "ix")
    assert proc.returncode == 0 and "encoded 0, reused 4" in proc.stdout  # every item reused
    assert "nothing to encode" in proc.stdout
    proc = cli("index", "--encoder", "splade-tiny", "--source", src, "--out", src)
    assert proc.returncode == 2 and "is a file" in proc.stderr
    proc = cli("index", "--encoder", "splade-tiny", "--source", tmp_path / "nope", "--out", "x")
    assert proc.returncode == 2 and "not found" in proc.stderr
    proc = cli(
        "index",
        "--encoder",
        "splade-tiny",
        "--source",
        src,
        "--out",
        tmp_path / "iy",
        "--gate-k",
        "-2",
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    proc = cli(
        "index",
        "--encoder",
        "splade-tiny",
        "--source",
        src,
        "--out",
        tmp_path / "iy",
        "--topk",
        "5",
    )
    assert proc.returncode == 2 and "--topk is now --gate-k" in proc.stderr
    assert not (tmp_path / "iy").exists()


def test_progress_is_a_fraction_of_the_whole_build(splade, tmp_path):
    seen: list[tuple[float, str]] = []
    build_index(
        splade,
        _texts_csv(tmp_path / "texts.csv", TEXTS),
        tmp_path / "ix",
        batch_size=2,
        progress=lambda f, message: seen.append((f, message)),
    )
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0 and fractions[0] > 0
    assert seen[-1][1] == "4/4: 4 items indexed"


def test_build_collection_of_the_workspace(splade, tmp_path, monkeypatch):
    """The Collections page's build: a named collection from a path on this server."""
    monkeypatch.setenv("LEXLENS_HOME", str(tmp_path / "home"))
    with pytest.raises(InputError, match="type the path"):
        build_collection(splade, "pets", "path", path="  ")
    with pytest.raises(InputError, match="source kind 'ftp'"):
        build_collection(splade, "pets", "ftp")
    with pytest.raises(InputError, match="collection name"):
        build_collection(splade, "../pets", "path", path="texts.csv")
    src = _texts_csv(tmp_path / "texts.csv", TEXTS)
    result = build_collection(splade, "pets", "path", path=f" {src} ", gate_k=5)
    assert result.items == 4 and Path(result.out) == tmp_path / "home" / "collections" / "pets"
    index = open_index(result.out)
    terms = index.strongest_terms(3)
    mean = index.mean_weights()
    assert [t.token for t in terms] == [index.vocab[i] for i in np.argsort(-mean)[:3]]
    assert terms[0].weight >= terms[1].weight >= terms[2].weight > 0
    # Pieces of a word the items spell are read as that word (weighing as its strongest).
    rows = [("g1", "a giraffe", ""), ("g2", "a giraffe eating", ""), ("g3", "two giraffe", "")]
    src = _texts_csv(tmp_path / "giraffes.csv", rows)
    index = open_index(build_collection(splade, "giraffes", "path", path=str(src)).out)
    words = {t.token: t for t in index.strongest_terms(30)}
    assert "giraffe" in words and not any(w.startswith("##") for w in words)
    pieces = words["giraffe"].pieces
    assert [index.vocab[i] for i in pieces] == ["gi", "##raf", "##fe"]
    assert words["giraffe"].weight == pytest.approx(float(index.mean_weights()[list(pieces)].max()))


def test_sample_photos_are_copied_beside_their_table(tmp_path):
    """``make sample-collections`` and the page's "Sample photos" read this folder."""
    pytest.importorskip("skimage")
    table = load_sample_photos(tmp_path / "photos")
    assert table == tmp_path / "photos" / "photos.csv" and table.is_file()
    with open(table, encoding="utf-8", newline="") as handle:
        images = [row["image"] for row in csv.DictReader(handle)]
    assert len(images) == 19 and all((tmp_path / "photos" / name).is_file() for name in images)
