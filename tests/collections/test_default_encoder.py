"""``lexlens index`` without ``--encoder``: a text source takes the default text encoder and
an image source the default image encoder, and the output says which; the README's own
example runs as written.

Each test is named by the kind of failure it guards against."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np

from tests.helpers import ROOT, one_line_error, skimage_path


def test_silent_wrong_the_readme_index_example_runs_as_written(cli, tmp_path, monkeypatch):
    """The README's ``lexlens index --source sample:imagenet_beir --out ix`` ended in
    "the following arguments are required: --encoder"."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    example = re.search(r"^lexlens (index --source sample:imagenet_beir --out ix) ", readme, re.M)
    assert example, "the README's example is gone"
    monkeypatch.chdir(tmp_path)
    run = cli(*example.group(1).split())
    assert run.returncode == 0, run.stderr
    assert "encoder: splade-tiny (the default text encoder" in run.stdout, run.stdout
    manifest = json.loads((tmp_path / "ix" / "manifest.json").read_text())
    assert manifest["encoder"]["spec"] == "splade-tiny" and manifest["counts"]["items"] == 223


def test_silent_wrong_an_image_source_takes_the_default_image_encoder(cli, tmp_path):
    photos = tmp_path / "photos"
    photos.mkdir()
    shutil.copy(skimage_path("chelsea.png"), photos / "chelsea.png")
    run = cli("index", "--source", photos, "--out", tmp_path / "ix")
    assert run.returncode == 0, run.stderr
    assert "encoder: efficientnet-lite0-lexical (the default image encoder" in run.stdout
    manifest = json.loads((tmp_path / "ix" / "manifest.json").read_text())
    assert manifest["encoder"]["spec"] == "efficientnet-lite0-lexical"
    assert manifest["modality"] == "image"


def test_a_dense_features_source_still_names_its_head(cli, tmp_path):
    features = tmp_path / "features.npy"
    np.save(features, np.zeros((2, 8), dtype=np.float32))
    run = cli("index", "--source", features, "--out", tmp_path / "ix")
    one_line_error(run, "dense features source needs --encoder", "D2S head")
    assert not (tmp_path / "ix").exists()


def test_the_help_says_what_the_default_encoder_is(cli):
    run = cli("index", "--help")
    text = " ".join(run.stdout.split())
    assert "splade-tiny for texts" in text and "efficientnet-lite0-lexical for images" in text
