"""Hub ids from the local Hugging Face cache, offline (Lexlens never downloads).

A small random VDR cross-modal checkpoint (the layout tests/models/test_vdr.py writes) is placed
in a temporary ``HF_HOME`` exactly as huggingface_hub stores downloads
(``hub/models--owner--name/{blobs/<sha256>, snapshots/<commit>/<file> → ../../blobs/…,
refs/main}``); it must load by its hub id with ``HF_HUB_OFFLINE=1`` and no network, and give
what loading the snapshot folder gives.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from lexlens.models import Capability, load_encoder
from lexlens.models.hub import cached_models, hub_cache_dir
from tests.models.test_d2s import head_state, write_head
from tests.models.test_vdr import TINY_VIT, bert_tower, text_cfg, vit_tower, write_checkpoint

COMMIT = "0123456789abcdef0123456789abcdef01234567"
TEXT = "a cat sleeping on a red book"


def place_in_cache(hub: Path, repo_id: str, folder: Path, commit: str = COMMIT) -> Path:
    """Copy ``folder``'s files into the hub cache layout; returns the snapshot folder."""
    repo = hub / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / commit
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot.mkdir(parents=True, exist_ok=True)
    (repo / "refs").mkdir(exist_ok=True)
    for file in sorted(folder.iterdir()):
        data = file.read_bytes()
        blob = hashlib.sha256(data).hexdigest()
        (repo / "blobs" / blob).write_bytes(data)
        (snapshot / file.name).symlink_to(Path("..") / ".." / "blobs" / blob)
    (repo / "refs" / "main").write_text(commit)
    return snapshot


@pytest.fixture
def hf_home(tmp_path, monkeypatch):
    """An empty cache in a temporary HF_HOME; offline; any network connection fails the test."""
    home = tmp_path / "hf-home"
    (home / "hub").mkdir(parents=True)
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def no_network(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args}")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    return home


@pytest.fixture(scope="module")
def vdr_folder(tmp_path_factory) -> Path:
    config = {
        "encoder_q": text_cfg("vdr_crossmodal_text", max_len=16),
        "encoder_p": {"type": "vdr_crossmodal_image", "topk": 768, **TINY_VIT},
        "shared_encoder": False,
        "max_len": 512,
    }
    towers = {"encoder_q": bert_tower(21), "encoder_p": vit_tower(22)}
    return write_checkpoint(
        tmp_path_factory.mktemp("vdr") / "vdr-xm", config, towers, "safetensors"
    )


def test_hub_id_loads_from_the_cache_like_its_snapshot(hf_home, vdr_folder, cli):
    assert hub_cache_dir() == hf_home / "hub"
    snapshot = place_in_cache(hf_home / "hub", "lexlens-test/vdr-xm-a", vdr_folder)
    by_id = load_encoder("lexlens-test/vdr-xm-a", device="cpu")
    by_dir = load_encoder(str(snapshot), device="cpu")
    assert by_id is not by_dir and by_id.name == "lexlens-test/vdr-xm-a"
    assert "Hugging Face cache" in by_id.source and str(snapshot) in by_id.source
    assert (
        by_id.capabilities
        == by_dir.capabilities
        == frozenset({Capability.TEXT_LEXICAL, Capability.IMAGE_LEXICAL})
    )
    assert by_id.vocab == by_dir.vocab
    a, b = by_id.encode_texts([TEXT])[0], by_dir.encode_texts([TEXT])[0]
    np.testing.assert_array_equal(a.weights, b.weights)
    picture = Image.fromarray(np.random.default_rng(0).integers(0, 256, (70, 90, 3), np.uint8))
    a, b = by_id.encode_images([picture])[0], by_dir.encode_images([picture])[0]
    np.testing.assert_array_equal(a.unit_weights, b.unit_weights)
    # The command line: same terms as the snapshot folder, under the hub id's name.
    run_id = cli("terms", "--encoder", "lexlens-test/vdr-xm-a", "--text", TEXT, "--json")
    run_dir = cli("terms", "--encoder", snapshot, "--text", TEXT, "--json")
    assert run_id.returncode == run_dir.returncode == 0, run_id.stderr
    one, two = run_id.json(), run_dir.json()
    assert one.pop("encoder") == "lexlens-test/vdr-xm-a" and two.pop("encoder") == COMMIT
    assert one == two


def test_revision_and_hf_hub_cache(tmp_path, hf_home, vdr_folder, monkeypatch):
    other = tmp_path / "elsewhere"
    monkeypatch.setenv("HF_HUB_CACHE", str(other))  # wins over HF_HOME, as in huggingface_hub
    assert hub_cache_dir() == other
    commit = "fedcba9876543210fedcba9876543210fedcba98"
    place_in_cache(other, "lexlens-test/vdr-xm-b", vdr_folder, commit=commit)
    enc = load_encoder(f"lexlens-test/vdr-xm-b@{commit}", device="cpu")
    assert enc.name == f"lexlens-test/vdr-xm-b@{commit}"
    assert enc.can(Capability.IMAGE_LEXICAL)


def test_absent_id_is_one_line_naming_it_and_the_cache(hf_home, cli):
    run = cli("terms", "--encoder", "nobody/absent-model", "--text", "x")
    assert run.returncode == 2 and run.stdout == ""
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "'nobody/absent-model'" in lines[0] and str(hf_home / "hub") in lines[0]
    assert "never downloads" in lines[0]
    # A name that is neither a path nor a plausible hub id is an unknown encoder.
    run = cli("terms", "--encoder", "no such thing", "--text", "x")
    assert run.returncode == 2 and "unknown encoder" in run.stderr


def test_incomplete_snapshot_is_one_line(hf_home, vdr_folder, cli):
    snapshot = place_in_cache(hf_home / "hub", "lexlens-test/vdr-xm-c", vdr_folder)
    os.unlink(snapshot / "model.safetensors")
    run = cli("terms", "--encoder", "lexlens-test/vdr-xm-c", "--text", "x")
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1
    assert "no weights file" in run.stderr


def test_cached_models_lists_what_can_load(hf_home, vdr_folder, tmp_path):
    hub = hf_home / "hub"
    place_in_cache(hub, "lexlens-test/vdr-xm-d", vdr_folder)
    place_in_cache(hub, "lsr42/d2s-tiny", write_head(tmp_path / "head", head_state()))
    t5 = tmp_path / "t5"
    t5.mkdir()
    (t5 / "config.json").write_text(json.dumps({"model_type": "t5", "architectures": ["T5X"]}))
    (t5 / "model.safetensors").write_bytes(b"")
    place_in_cache(hub, "google/t5-like", t5)
    partial = place_in_cache(hub, "lexlens-test/no-weights", vdr_folder)
    os.unlink(partial / "model.safetensors")
    readme = tmp_path / "readme"
    readme.mkdir()
    (readme / "README.md").write_text("# nothing to load")
    place_in_cache(hub, "someone/docs-only", readme)
    cards = {c.name: c for c in cached_models()}
    assert set(cards) == {"lexlens-test/vdr-xm-d", "lsr42/d2s-tiny"}
    assert cards["lexlens-test/vdr-xm-d"].capabilities == frozenset(
        {Capability.TEXT_LEXICAL, Capability.IMAGE_LEXICAL}
    )
    assert cards["lsr42/d2s-tiny"].capabilities == frozenset({Capability.FEATURE_LEXICAL})
    assert cards["lsr42/d2s-tiny"].weights.startswith(str(hub))
    # The listed D2S head loads by its id.
    assert load_encoder("lsr42/d2s-tiny", device="cpu").feature_dim == 16
    assert cached_models(tmp_path / "no-cache-here") == []


def test_encoders_command_lists_cached_models_with_their_origin(hf_home, vdr_folder, cli):
    snapshot = place_in_cache(hf_home / "hub", "lexlens-test/vdr-xm-f", vdr_folder)
    weights = snapshot / "model.safetensors"
    os.unlink(weights)  # the listing reads config files only: garbage weights still list
    weights.write_bytes(b"not a safetensors file")
    run = cli("encoders", "--json")
    assert run.returncode == 0, run.stderr
    by_name = {c["name"]: c for c in run.json()["encoders"]}
    assert by_name["splade-tiny"]["origin"] == "embedded"
    hub = by_name["lexlens-test/vdr-xm-f"]
    assert hub["origin"] == "hub cache" and hub["weights"] == str(snapshot)
    assert set(hub["capabilities"]) == {"text-lexical", "image-lexical"}
    table = cli("encoders").stdout
    assert any(
        "lexlens-test/vdr-xm-f" in line and "hub cache" in line for line in table.splitlines()
    )


def test_app_picker_offers_cached_models(hf_home, vdr_folder, tmp_path):
    from streamlit.testing.v1 import AppTest

    place_in_cache(hf_home / "hub", "lexlens-test/vdr-xm-e", vdr_folder)
    place_in_cache(hf_home / "hub", "lsr42/d2s-tiny-e", write_head(tmp_path / "h", head_state()))

    def page():
        import streamlit as st

        from lexlens.analysis.lexical.terms import TEXT_NEEDS
        from lexlens.app.runtime.state import encoder_picker

        encoder = encoder_picker("Text encoder", TEXT_NEEDS, key="hub_pick")
        st.write(encoder.name if encoder is not None else "none")

    at = AppTest.from_function(page, default_timeout=60).run()
    options = at.sidebar.selectbox[0].options
    assert "lexlens-test/vdr-xm-e" in options and "lsr42/d2s-tiny-e" not in options
    at.sidebar.selectbox[0].select("lexlens-test/vdr-xm-e").run()
    assert not at.error and at.markdown[-1].value == "lexlens-test/vdr-xm-e"
