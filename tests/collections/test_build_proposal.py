"""A typed server path proposes its collection: the name of its folder or file and an
encoder that reads what it holds (a text benchmark → a text encoder, images → an image
encoder); a path outside the data roots proposes nothing (the build says why)."""

from __future__ import annotations

import json

from PIL import Image

from lexlens.analysis.collections.workspace_build import propose_build
from lexlens.models import encoder_card


def _reads(proposal, capability: str) -> bool:
    return capability in {str(c) for c in encoder_card(proposal.encoder).capabilities}


def test_silent_wrong_a_text_benchmark_proposes_a_text_encoder_and_its_folder_name(tmp_path):
    folder = tmp_path / "my foldoc"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(json.dumps({"_id": "d0", "text": "a term"}) + "\n")
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "q0", "text": "term"}) + "\n")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq0\td0\t1\n")
    proposal = propose_build(str(folder) + "/", roots=[tmp_path])
    assert (proposal.name, proposal.reads) == ("my-foldoc", "text")
    assert _reads(proposal, "text-lexical")
    assert propose_build("sample:imagenet_beir").name == "imagenet_beir"


def test_silent_wrong_a_folder_of_images_proposes_an_image_encoder(tmp_path):
    images = tmp_path / "holiday_2024"
    images.mkdir()
    Image.new("RGB", (8, 8)).save(images / "a.png")
    proposal = propose_build(str(images), roots=[tmp_path])
    assert (proposal.name, proposal.reads) == ("holiday_2024", "image")
    assert _reads(proposal, "image-lexical")
    table = tmp_path / "pets.csv"
    table.write_text("text\na dog\n")
    assert propose_build(str(table)).reads == "text"


def test_security_a_path_outside_the_roots_proposes_nothing(tmp_path):
    inside = tmp_path / "inside"
    inside.mkdir()
    assert propose_build(str(tmp_path), roots=[inside]) is None
    assert propose_build("", roots=[inside]) is None
    assert propose_build(42) is None
