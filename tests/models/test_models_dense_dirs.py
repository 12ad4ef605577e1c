"""Dense encoders from local directories: a sentence-transformers model other than the
packaged MiniLM, with a faiss index or codebooks fitted at load; bad directories.

The model here is a small random BERT (2 layers, 32 hidden) written as a
sentence-transformers directory with MiniLM's bert-base-uncased tokenizer.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from lexlens.models import Capability, EncoderLoadError, LexlensError, load_encoder
from lexlens.models.pq import faiss_single_thread
from tests.models.test_vdr import TINY_BERT

TEXTS = ["a tabby cat asleep on a sofa", "espresso in a white cup", "a rocket on the launch pad"]


def write_st_dir(path, *, pooling="mean", normalize=True, seed=0, state_edit=None):
    """A sentence-transformers directory: BertModel weights, tokenizer, pooling, normalize."""
    from safetensors.torch import save_file
    from transformers import BertConfig, BertModel

    from lexlens.models.packaged import minilm_dir

    path.mkdir(parents=True)
    torch.manual_seed(seed)
    model = BertModel(BertConfig(**TINY_BERT))
    model.config.save_pretrained(path)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    if state_edit is not None:
        state_edit(state)
    save_file(state, str(path / "model.safetensors"))
    for name in ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(minilm_dir() / name, path / name)
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {
            "idx": 1,
            "name": "1",
            "path": "1_Pooling",
            "type": "sentence_transformers.models.Pooling",
        },
    ]
    if normalize:
        modules.append(
            {
                "idx": 2,
                "name": "2",
                "path": "2_Normalize",
                "type": "sentence_transformers.models.Normalize",
            }
        )
    (path / "modules.json").write_text(json.dumps(modules))
    (path / "1_Pooling").mkdir()
    (path / "1_Pooling" / "config.json").write_text(
        json.dumps({"word_embedding_dimension": 32, "pooling_mode": pooling})
    )
    (path / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 48}))
    return path


@pytest.fixture(scope="module")
def st_dir(tmp_path_factory):
    return write_st_dir(tmp_path_factory.mktemp("dense") / "tiny-st")


@pytest.fixture(scope="module")
def tiny(st_dir):
    return load_encoder(str(st_dir), device="cpu")


def test_sentence_transformers_dir_loads_as_dense(tiny, st_dir):
    assert tiny.capabilities == frozenset({Capability.DENSE})
    assert tiny.dim == 32 and tiny.max_length == 48 and tiny.normalize
    ours = tiny.embed_texts(TEXTS)
    theirs = tiny.sentence_transformer.encode(TEXTS, convert_to_numpy=True)
    assert np.abs(ours - theirs).max() < 1e-5
    # Independent reference: masked mean of BertModel's states, then L2 normalisation.
    from transformers import AutoTokenizer, BertModel

    model = BertModel.from_pretrained(str(st_dir), local_files_only=True).eval()
    batch = AutoTokenizer.from_pretrained(str(st_dir))(TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        h = model(**batch).last_hidden_state
    mask = batch["attention_mask"][..., None].float()
    mean = (h * mask).sum(1) / mask.sum(1)
    assert np.abs(ours - torch.nn.functional.normalize(mean, dim=1).numpy()).max() < 1e-5


@pytest.mark.parametrize("pooling", ["max", "cls"])
def test_pooling_mode_is_read(tmp_path, pooling):
    path = write_st_dir(tmp_path / pooling, pooling=pooling, normalize=False)
    enc = load_encoder(str(path), device="cpu")
    assert not enc.normalize
    batch = enc.tokenize(TEXTS[:2])
    with torch.no_grad():
        h = enc.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask)
    h = h.last_hidden_state
    if pooling == "cls":
        reference = h[:, 0]
    else:
        reference = h.masked_fill(batch.attention_mask[..., None] == 0, -1e9).amax(1)
    assert np.abs(enc.embed_texts(TEXTS[:2]) - reference.numpy()).max() < 1e-5


def _faiss_index(faiss, path, train):
    opq = faiss.OPQMatrix(32, 4)
    opq.niter = 3
    index = faiss.IndexPreTransform(opq, faiss.IndexPQ(32, 4, 8))
    with faiss_single_thread():
        index.train(train)
    faiss.write_index(index, str(path))
    return index


def _spec(folder: Path, base_model: Path, codebook: object, **extra: object) -> Path:
    """A folder holding ``lexlens_dense_pq.json``: ``base_model`` with ``codebook``."""
    folder.mkdir()
    spec = {
        "format": "lexlens-dense-pq",
        **extra,
        "base_model": str(base_model),
        "codebook": codebook,
    }
    (folder / "lexlens_dense_pq.json").write_text(json.dumps(spec))
    return folder


def test_dir_spec_with_a_faiss_index(tmp_path, st_dir, tiny):
    """``lexlens_dense_pq.json`` naming a model directory and a faiss OPQ index file."""
    import faiss

    rng = np.random.default_rng(0)
    train = rng.standard_normal((2000, 32)).astype(np.float32)
    index = _faiss_index(faiss, tmp_path / "opq4.index", train)
    spec = _spec(tmp_path / "tiny-pq", st_dir, {"faiss_index": "../opq4.index"}, name="tiny+opq")
    enc = load_encoder(str(spec), device="cpu")
    assert enc.name == "tiny+opq" and enc.m == 4 and enc.k == 256
    assert enc.capabilities == frozenset(
        {Capability.DENSE, Capability.QUANTISED, Capability.DIFFERENTIABLE}
    )
    vectors = enc.embed_texts(TEXTS)
    np.testing.assert_array_equal(enc.codes(TEXTS), index.sa_encode(vectors).astype(np.int64))
    # The differentiable path IG needs reaches the same sub-vectors.
    batch = enc.tokenize(TEXTS)
    embeds = enc.word_embeddings(batch.input_ids).requires_grad_(True)
    sub = enc.split_torch(enc.forward_embeds(embeds, batch.attention_mask))
    assert np.abs(sub.detach().numpy().reshape(3, 32) - vectors @ enc.rotation.T).max() < 1e-5
    sub[:, 1].pow(2).sum().backward()
    assert embeds.grad.abs().sum() > 0


def test_dir_spec_fitting_a_codebook_at_load(tmp_path, st_dir, monkeypatch):
    monkeypatch.setenv("LEXLENS_CACHE", str(tmp_path / "cache"))
    (tmp_path / "corpus.txt").write_text(
        "\n".join(f"text number {i} about cats" for i in range(40))
    )
    fit = {"fit": {"corpus": "../corpus.txt", "m": 8, "k": 16, "seed": 2}}
    spec = _spec(tmp_path / "fit", st_dir, fit)
    enc = load_encoder(str(spec), device="cpu")
    assert enc.name == "fit" and (enc.m, enc.k) == (8, 16)
    assert list((tmp_path / "cache" / "dense_pq").iterdir())  # cached
    bad = _spec(tmp_path / "bad", st_dir, [1])
    with pytest.raises(EncoderLoadError, match="'codebook' must be"):
        load_encoder(str(bad), device="cpu")


# --- bad dense directories: refused before allocating, one line naming the file ---------


def test_nan_weight_is_refused_naming_file_and_key(tmp_path):
    def poison(state):
        state["encoder.layer.0.attention.self.key.weight"][1, 2] = float("nan")

    path = write_st_dir(tmp_path / "nan", state_edit=poison)
    with pytest.raises(EncoderLoadError) as info:
        load_encoder(str(path), device="cpu")
    message = str(info.value)
    assert "model.safetensors" in message and "encoder.layer.0.attention.self.key.weight" in message
    assert "NaN or Inf" in message


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"hidden_size": 1_000_000}, "hidden_size = 1000000 is not a plausible size"),
        (
            {"hidden_size": 1024, "intermediate_size": 4096, "num_attention_heads": 16},
            r"'embeddings\.word_embeddings\.weight' has shape \(30522, 32\), the config "
            r"expects \(30522, 1024\)",
        ),
    ],
)
def test_config_sizes_are_checked_before_allocating(tmp_path, change, match):
    path = write_st_dir(tmp_path / "big")
    config = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps(config | change))
    with pytest.raises(EncoderLoadError, match=match):
        load_encoder(str(path), device="cpu")


def test_faiss_index_of_another_dimension_in_a_spec(tmp_path, st_dir):
    import faiss

    rng = np.random.default_rng(1)
    index = faiss.IndexPQ(64, 4, 8)
    with faiss_single_thread():
        index.train(rng.standard_normal((1200, 64)).astype(np.float32))
    faiss.write_index(index, str(tmp_path / "pq64.index"))
    spec = _spec(tmp_path / "wrong", st_dir, {"faiss_index": str(tmp_path / "pq64.index")})
    with pytest.raises(LexlensError, match="64-d embeddings but the encoder outputs 32-d"):
        load_encoder(str(spec), device="cpu")
