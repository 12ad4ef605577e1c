"""A checkpoint folder's family: its configuration decides first, its file names second.

Each folder here is built from the files a family's tools write (config.json of a
transformers model, a VDR bi-encoder or a D2S head; sentence-transformers' modules.json;
Lexlens's lexlens_dense_pq.json; lsr-multimodal's model.pt); the expected family is what
the module docstring of ``models/detect.py`` says for that combination. The loads at the
end compare the encoder's output with the model read directly.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from lexlens.models import EncoderLoadError, load_encoder
from lexlens.models.detect import detect_directory
from tests.helpers import one_line_error
from tests.models.test_d2s import DENSE, head_state, reference, write_head

MASKED_LM = {"model_type": "bert", "architectures": ["BertForMaskedLM"], "vocab_size": 30522}
ENCODER = {"model_type": "bert", "architectures": ["BertModel"]}
BARE_BERT = {"model_type": "bert"}
VDR = {"encoder_q": {"type": "vdr"}, "encoder_p": {"type": "vdr"}}
D2S = {"model_type": "d2s", "architectures": ["D2SModel"], "dense_size": DENSE}
DENSE_MODULES = ["sentence_transformers.models.Transformer", "sentence_transformers.models.Pooling"]
SPLADE_MODULES = [
    "sentence_transformers.sparse_encoder.models.MLMTransformer",
    "sentence_transformers.sparse_encoder.models.SpladePooling",
]
DENSE_PQ = {"format": "lexlens-dense-pq", "base_model": "."}


def folder(
    path: Path,
    *,
    config: dict | None = None,
    modules: list[str] | None = None,
    dense_pq: dict | None = None,
    legacy_d2s: bool = False,
) -> Path:
    """A folder holding the given configuration files (and a D2S ``model.pt``)."""
    path.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (path / "config.json").write_text(json.dumps(config))
    if modules is not None:
        entries = [{"idx": i, "name": str(i), "path": "", "type": t} for i, t in enumerate(modules)]
        (path / "modules.json").write_text(json.dumps(entries))
    if dense_pq is not None:
        (path / "lexlens_dense_pq.json").write_text(json.dumps(dense_pq))
    if legacy_d2s:
        torch.save(head_state(), path / "model.pt")
    return path


# --- the order: configuration first, file names second ------------------------------------


@pytest.mark.parametrize(
    ("files", "family", "decided_by", "description"),
    [
        # model.pt names a D2S head, but a configuration says otherwise: the configuration wins.
        (
            {"config": MASKED_LM, "legacy_d2s": True},
            "splade",
            "config.json",
            "masked LM read as SPLADE",
        ),
        ({"config": VDR, "legacy_d2s": True}, "vdr", "config.json", "VDR checkpoint"),
        ({"config": ENCODER, "legacy_d2s": True}, "dense", "config.json", "transformers"),
        ({"config": BARE_BERT, "legacy_d2s": True}, "splade", "config.json (a BERT", "masked LM"),
        # no configuration, or one that names no family: the file names decide.
        ({"legacy_d2s": True}, "d2s", "model.pt", "D2S head"),
        ({"config": {"dense_size": DENSE}, "legacy_d2s": True}, "d2s", "model.pt", "D2S head"),
        # configurations that agree.
        ({"config": D2S}, "d2s", "config.json", "D2S head (dense features"),
        (
            {"config": ENCODER, "modules": DENSE_MODULES},
            "dense",
            "config.json + modules.json",
            "sentence-transformers model",
        ),
        (
            {"config": MASKED_LM, "modules": SPLADE_MODULES},
            "splade",
            "config.json + modules.json",
            "masked LM read as SPLADE",
        ),
        # modules.json names the family a bare BERT config leaves open.
        ({"config": BARE_BERT, "modules": DENSE_MODULES}, "dense", "modules.json", "sentence-"),
        (
            {"config": ENCODER, "modules": DENSE_MODULES, "dense_pq": DENSE_PQ},
            "dense-pq",
            "config.json + lexlens_dense_pq.json + modules.json",
            "dense model + product quantiser",
        ),
        ({"dense_pq": DENSE_PQ}, "dense-pq", "lexlens_dense_pq.json", "dense model + product"),
    ],
)
def test_silent_wrong_family_configuration_first_file_names_second(
    tmp_path, files, family, decided_by, description
):
    kind = detect_directory(folder(tmp_path / "ckpt", **files))
    assert kind.family == family
    assert kind.decided_by.startswith(decided_by)
    assert kind.description.startswith(description)


@pytest.mark.parametrize(
    ("files", "says"),
    [
        (
            {"config": MASKED_LM, "modules": DENSE_MODULES},
            [
                "config.json says a masked LM (SPLADE) (architectures BertForMaskedLM)",
                "modules.json says a dense encoder (modules Transformer → Pooling)",
            ],
        ),
        (
            {"config": VDR, "dense_pq": DENSE_PQ},
            [
                "config.json says a VDR checkpoint (encoder_q/encoder_p)",
                "lexlens_dense_pq.json says a dense model + product quantiser",
            ],
        ),
        (
            {"config": D2S, "modules": DENSE_MODULES},
            ["config.json says a D2S head (model_type 'd2s')", "modules.json says a dense"],
        ),
        (
            {"config": ENCODER, "modules": SPLADE_MODULES, "legacy_d2s": True},
            ["config.json says a dense encoder", "modules.json says a masked LM (SPLADE)"],
        ),
    ],
)
def test_silent_wrong_family_configurations_that_disagree_are_one_line(cli, tmp_path, files, says):
    path = folder(tmp_path / "mixed", **files)
    with pytest.raises(EncoderLoadError) as info:
        detect_directory(path)
    message = str(info.value)
    assert "\n" not in message and "disagree" in message
    for needle in says:
        assert needle in message
    run = cli("terms", "--encoder", path, "--text", "a cat")
    one_line_error(run, str(path), *says)


@pytest.mark.parametrize(
    ("files", "needle"),
    [
        ({}, "has no config.json: not a VDR, SPLADE, D2S or dense+PQ checkpoint"),
        ({"config": {"model_type": "t5"}}, "cannot tell the model family"),
        ({"config": {"architectures": "BertModel"}}, "'architectures' must be a list"),
        ({"config": ENCODER, "modules": [1]}, "modules.json must hold a list of modules"),
    ],
)
def test_traceback_a_family_nothing_tells_is_one_line(cli, tmp_path, files, needle):
    path = folder(tmp_path / "unknown", **files)
    with pytest.raises(EncoderLoadError, match=re.escape(needle)):
        detect_directory(path)
    one_line_error(cli("terms", "--encoder", path, "--text", "a cat"), needle)


def test_traceback_invalid_modules_json_names_the_file(tmp_path):
    path = folder(tmp_path / "st", config=ENCODER)
    (path / "modules.json").write_text("[{")
    with pytest.raises(EncoderLoadError, match=r"modules\.json is not valid JSON"):
        detect_directory(path)


def test_unbounded_detecting_a_family_imports_no_modeling_library(tmp_path):
    """Listing cached hub models detects every snapshot on each app rerun: reading the
    configuration files must not import torch, transformers, sentence-transformers or faiss."""
    path = folder(tmp_path / "st", config=ENCODER, modules=DENSE_MODULES, dense_pq=DENSE_PQ)
    code = (
        "import sys\n"
        "from lexlens.models.detect import detect_directory\n"
        "import lexlens.models.dense_config, lexlens.models.vdr_config, lexlens.models.d2s_config\n"
        f"print(detect_directory({str(path)!r}).family)\n"
        "heavy = ('torch', 'transformers', 'sentence_transformers', 'faiss')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["dense-pq", "[]"]


# --- loaded as detected --------------------------------------------------------------------


def _splade_tiny_copy(path: Path) -> Path:
    """The packaged splade-tiny's files, linked into ``path``."""
    from lexlens.models.packaged import splade_tiny_dir

    path.mkdir(parents=True)
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        (path / name).symlink_to(splade_tiny_dir() / name)
    return path


def test_silent_wrong_family_a_d2s_file_beside_a_masked_lm_config_loads_as_splade(tmp_path, splade):
    path = _splade_tiny_copy(tmp_path / "splade-with-model-pt")
    torch.save(head_state(), path / "model.pt")  # what a D2S head's older code wrote
    encoder = load_encoder(str(path), device="cpu")
    assert type(encoder).__name__ == "SpladeEncoder"
    text = "a cat sleeping on a book"
    ours = encoder.encode_texts([text])[0].weights
    np.testing.assert_array_equal(ours, splade.encode_texts([text])[0].weights)


def test_silent_wrong_family_a_sparse_sentence_transformers_folder_loads_as_splade(
    tmp_path, splade
):
    """naver/splade-v3's layout: a masked LM with sentence-transformers' SPLADE modules."""
    path = _splade_tiny_copy(tmp_path / "splade-st")
    folder(path, modules=SPLADE_MODULES)
    encoder = load_encoder(str(path), device="cpu")
    text = "how do learned sparse retrievers expand queries"
    ours = encoder.encode_texts([text])[0].weights
    np.testing.assert_array_equal(ours, splade.encode_texts([text])[0].weights)


def test_silent_wrong_family_a_legacy_d2s_head_under_a_silent_config_loads_as_d2s(tmp_path):
    """A model.pt head whose config.json names no family (only its dense_size)."""
    path = write_head(tmp_path / "d2s-old", fmt="pt")
    (path / "config.json").write_text(json.dumps({"dense_size": DENSE}))
    encoder = load_encoder(str(path), device="cpu")
    z = np.random.default_rng(0).standard_normal((3, DENSE)).astype(np.float32)
    ours = np.stack([e.weights for e in encoder.encode_features(z)])
    assert np.abs(ours - reference(head_state(), z)).max() < 1e-5
    other = write_head(tmp_path / "d2s-old-other-size", fmt="pt")
    (other / "config.json").write_text(json.dumps({"dense_size": DENSE + 1}))
    with pytest.raises(EncoderLoadError, match=f"says dense_size = {DENSE + 1}"):
        load_encoder(str(other), device="cpu")
