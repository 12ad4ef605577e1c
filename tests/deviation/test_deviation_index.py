"""Deviation on stored collections: streamed from the index == computed in memory; images
against their paired captions; D2S's caption × image FLOPs against a brute-force reference."""

from __future__ import annotations

import numpy as np
import pytest

from lexlens.analysis.collections.indexing import build_index
from lexlens.analysis.collections.store import open_index
from lexlens.analysis.core.vocabulary import is_special_token
from lexlens.analysis.deviation.deviation import deviation, deviation_of_index
from tests.helpers import skimage_path

CAPTIONS = "data/captions.txt"
PHOTOS = {
    "chelsea.png": ["a ginger cat sitting on a wooden floor", "a tabby cat looking at the camera"],
    "coffee.png": ["a cup of coffee on a saucer", "an espresso cup with a spoon"],
    "astronaut.png": ["an astronaut in a white space suit"],
    "rocket.jpg": ["a rocket on its launch pad", "a space shuttle ready to launch"],
}


@pytest.fixture(scope="module")
def text_index(tmp_path_factory, splade):
    out = tmp_path_factory.mktemp("dev") / "captions_ix"
    build_index(splade, CAPTIONS, out)
    return out


@pytest.fixture(scope="module")
def image_index(tmp_path_factory):
    import shutil

    from lexlens.models import load_encoder

    folder = tmp_path_factory.mktemp("photos")
    lines = ["image,caption,caption"]
    for name, caps in PHOTOS.items():
        shutil.copy(skimage_path(name), folder / name)
        lines.append(",".join([name, *caps, *([""] * (2 - len(caps)))]))
    (folder / "pairs.csv").write_text("\n".join(lines) + "\n")
    out = folder / "ix"
    build_index(load_encoder("efficientnet-lite0-lexical", device="cpu"), folder / "pairs.csv", out)
    return out


def test_text_index_streamed_equals_in_memory(splade, text_index):
    memory = deviation(splade, CAPTIONS).to_dict()["captions"]
    # Batches of 3 items: the collection streams through in four pieces.
    stored = deviation_of_index(text_index, splade, batch_size=3).to_dict()
    assert stored["input"]["index"] == "captions_ix" and stored["images"] is None
    streamed = stored["captions"]
    assert streamed.pop("kind") == "texts" and memory.pop("kind") == "captions"
    assert streamed == memory  # every number, row and vocabulary statistic


def test_image_index_against_paired_captions_and_d2s_flops(splade, image_index):
    result = deviation_of_index(image_index, splade, k=10)
    doc = result.to_dict()
    ix = open_index(image_index)
    images = doc["images"]
    assert images["n"] == images["n_measured"] == 4
    # Independent references: stored image rows; captions through the text encoder.
    order = [m["image"] for m in ix.meta(range(len(ix)))]
    image_rows = np.stack([ix.vector(i) for i in range(len(ix))])
    cap_texts = [c for name in order for c in PHOTOS[name]]
    cap_enc = splade.encode_texts(cap_texts, keep_units=False)
    cap_rows = np.stack([e.weights for e in cap_enc])
    assert ((cap_rows > 0).sum(axis=1) < 768).all()  # the 768 gate keeps every caption term
    # D2S FLOPs: mean over every caption × image pair of the shared active dimensions.
    pairs = [int(((c != 0) & (i != 0)).sum()) for c in cap_rows for i in image_rows]
    assert doc["flops_captions_images"] == pytest.approx(np.mean(pairs), rel=1e-12)
    assert doc["captions"]["n"] == len(cap_texts) == 7
    # Each image's Exact@10: its top-10 non-special terms that are tokens of its captions.
    special = np.array([is_special_token(t) for t in splade.vocab])
    at = 0
    for name, row, got in zip(order, image_rows, images["rows"], strict=True):
        units = [u for e in cap_enc[at : at + len(PHOTOS[name])] for u in e.units]
        at += len(PHOTOS[name])
        own = {u for u in units if not is_special_token(u)}
        scores = np.where(special | (row <= 0), -np.inf, row)
        top = [splade.vocab[j] for j in np.argsort(-scores, kind="stable")[:10]]
        assert got["text"] == name
        assert set(got["caption_tokens"]) == own
        assert got["matches"] == sum(t in own for t in top)
        assert got["exact_at_k"] == pytest.approx(got["matches"] / 10)
    assert images["vocabulary"]["n"] == 4 and doc["captions"]["vocabulary"]["n"] == 7


def test_cli_on_an_index(cli, text_index, image_index, tmp_path):
    proc = cli("deviation", "--index", text_index, "--json", "--denominator", "active")
    assert proc.returncode == 0, proc.stderr
    doc = proc.json()
    assert doc["encoder"] == "splade-tiny" and doc["captions"]["n"] == 10
    proc = cli("deviation", "--index", image_index, "--encoder", "splade-tiny")
    assert proc.returncode == 0, proc.stderr
    assert "FLOPs captions × images" in proc.stdout and "[images] 4 items" in proc.stdout
    # Left out, the text encoder is the image encoder's text partner (as search picks it).
    assert cli("deviation", "--index", image_index).stdout == proc.stdout
    # Refusals, one line each, before any model loads.
    for args, message in [
        (["--index", text_index, "--gate-k", "5"], "cannot be re-gated"),
        (["--index", tmp_path], "manifest"),
    ]:
        proc = cli("deviation", *args)
        assert proc.returncode == 2, args
        assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_a_collection_held_in_memory_measures_as_its_stored_index(splade, text_index):
    from lexlens.analysis.collections.memory import collection_from_file

    memory = collection_from_file(splade, CAPTIONS, gate_k=768)
    held = deviation_of_index(memory, splade, gate_k=768, batch_size=4).to_dict()
    stored = deviation_of_index(text_index, splade).to_dict()
    assert held.pop("input") == {
        "index": "captions.txt",
        "index_encoder": "splade-tiny",
        "modality": "text",
        "items": 10,
    }
    assert stored.pop("input")["index"] == "captions_ix"
    assert held == stored  # every number, row and vocabulary statistic
