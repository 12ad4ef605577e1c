"""The plain-torch BERT masked LM against transformers' ``BertForMaskedLM`` loaded here.

References are computed independently: transformers' own model and tokenizer give the
logits ``[B, T, |V|]``, and ``max over real tokens of log(1 + relu(logits))`` is taken here
(SPLADE's max pooling, Formal et al., 2021).
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from lexlens.models import EncoderLoadError, load_encoder
from tests.helpers import model_tolerance

SHORT = ["a cat sleeping on a book", "dog", "the river bank at night, with a train"]
LONG = [
    " ".join(f"word{i % 97} retrieval sparse lexical encoder" for i in range(200)),  # > 512
    "Interpretability of learned sparse retrieval: " + "which terms matter and why? " * 30,
]
#: One batch with texts of very different lengths: padding inside the batch.
MIXED = [SHORT[1], LONG[0], SHORT[0], LONG[1][:300], "x"]


def _reference(path, texts: list[str]) -> tuple[np.ndarray, list[np.ndarray]]:
    """transformers' BertForMaskedLM and tokenizer from ``path``: pooled vectors and the
    per-token rows of each text's real tokens (the whole batch padded at once)."""
    from transformers import AutoTokenizer, BertForMaskedLM

    model = BertForMaskedLM.from_pretrained(str(path), local_files_only=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    batch = tokenizer(texts, padding=True, truncation=True, max_length=512, return_tensors="pt")
    with torch.inference_mode():
        rows = torch.log1p(torch.relu(model(**batch).logits.double()))
    mask = batch["attention_mask"].bool()
    pooled = rows.masked_fill(~mask[..., None], 0.0).amax(dim=1).numpy()
    return pooled, [rows[b][mask[b]].numpy() for b in range(len(texts))]


def _assert_equal_to_reference(encoder, path) -> None:
    for texts in (SHORT, LONG, MIXED):
        pooled, rows = _reference(path, texts)
        for keep in (False, True):
            got = encoder.encode_texts(texts, keep_units=keep)
            for i, enc in enumerate(got):
                assert np.abs(enc.weights - pooled[i]).max() <= model_tolerance(
                    np.abs(pooled[i]).max()
                ), (texts[i][:30], keep)
                if keep:
                    assert enc.unit_weights.shape == rows[i].shape
                    assert np.abs(enc.unit_weights - rows[i]).max() <= model_tolerance(
                        np.abs(rows[i]).max()
                    )
    assert encoder.encode_texts([LONG[0]])[0].truncated
    assert len(encoder.encode_texts([LONG[0]])[0].units) == 512


def test_silent_wrong_splade_tiny_equals_transformers_bert(splade):
    """The default encoder runs the plain module and equals transformers' forward."""
    from lexlens.models.bert import BertMaskedLM
    from lexlens.models.packaged import splade_tiny_dir

    assert isinstance(splade.model, BertMaskedLM)
    _assert_equal_to_reference(splade, splade_tiny_dir())


def _minilm_masked_lm(tmp_path, *, tied: bool, act: str):
    """all-MiniLM-L6-v2's BERT body (6 layers, 12 heads of 32) under a seeded MLM head,
    saved as a BertForMaskedLM checkpoint with MiniLM's tokenizer."""
    from safetensors.torch import load_file, save_file

    from lexlens.models.packaged import minilm_dir

    src = minilm_dir()
    config = json.loads((src / "config.json").read_text())
    config |= {"architectures": ["BertForMaskedLM"], "hidden_act": act}
    config["tie_word_embeddings"] = tied
    body = load_file(str(src / "model.safetensors"))
    state = {"bert." + k: v for k, v in body.items() if not k.startswith("pooler.")}
    hidden, vocab = config["hidden_size"], config["vocab_size"]
    gen = torch.Generator().manual_seed(7)
    state |= {
        "cls.predictions.transform.dense.weight": torch.randn(hidden, hidden, generator=gen) / 20,
        "cls.predictions.transform.dense.bias": torch.randn(hidden, generator=gen) / 20,
        "cls.predictions.transform.LayerNorm.weight": 1 + torch.randn(hidden, generator=gen) / 10,
        "cls.predictions.transform.LayerNorm.bias": torch.randn(hidden, generator=gen) / 10,
        "cls.predictions.bias": torch.randn(vocab, generator=gen) - 2,
    }
    if not tied:  # the decoder's own weight and bias (transformers leaves both untied)
        state["cls.predictions.decoder.weight"] = torch.randn(vocab, hidden, generator=gen) / 5
        state["cls.predictions.decoder.bias"] = torch.randn(vocab, generator=gen) - 1
    path = tmp_path / f"minilm-mlm-{act}-{'tied' if tied else 'untied'}"
    path.mkdir()
    (path / "config.json").write_text(json.dumps(config))
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        (path / name).write_bytes((src / name).read_bytes())
    save_file({k: v.contiguous() for k, v in state.items()}, str(path / "model.safetensors"))
    return path


@pytest.mark.parametrize(("tied", "act"), [(True, "gelu"), (False, "gelu_new")])
def test_silent_wrong_another_bert_checkpoint_equals_transformers(tmp_path, tied, act):
    """A deeper, wider BERT (MiniLM's body), tied or untied decoder, two activations."""
    from lexlens.models.bert import BertMaskedLM

    path = _minilm_masked_lm(tmp_path, tied=tied, act=act)
    encoder = load_encoder(str(path), device="cpu")
    assert isinstance(encoder.model, BertMaskedLM)
    _assert_equal_to_reference(encoder, path)


def test_silent_wrong_distilbert_masked_lm_still_runs_through_transformers(tmp_path):
    """Another architecture keeps transformers' model, and its outputs."""
    from transformers import AutoTokenizer, DistilBertConfig, DistilBertForMaskedLM

    from lexlens.models.packaged import splade_tiny_dir

    torch.manual_seed(3)
    config = DistilBertConfig(vocab_size=30522, dim=64, n_layers=2, n_heads=2, hidden_dim=128)
    model = DistilBertForMaskedLM(config).eval()
    model.save_pretrained(str(tmp_path))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (tmp_path / name).write_bytes((splade_tiny_dir() / name).read_bytes())
    encoder = load_encoder(str(tmp_path), device="cpu")
    assert type(encoder.model).__name__ == "DistilBertForMaskedLM"
    tokenizer = AutoTokenizer.from_pretrained(str(tmp_path), local_files_only=True)
    batch = tokenizer(MIXED, padding=True, truncation=True, max_length=512, return_tensors="pt")
    with torch.inference_mode():
        rows = torch.log1p(torch.relu(model(**batch).logits))
    pooled = rows.masked_fill(~batch["attention_mask"].bool()[..., None], 0).amax(1).numpy()
    got = np.stack([e.weights for e in encoder.encode_texts(MIXED, keep_units=False)])
    assert np.abs(got - pooled).max() <= model_tolerance(np.abs(pooled).max())


def _splade_dir(tmp_path, splade, change=None, config_change=None):
    from safetensors.torch import save_file

    from lexlens.models.packaged import splade_tiny_dir

    state = {k: v.clone() for k, v in splade.model.state_dict().items()}
    state.pop("cls.predictions.decoder.weight")  # tied to the word embeddings
    state.pop("cls.predictions.decoder.bias")  # the same tensor as cls.predictions.bias
    if change:
        change(state)
    config = json.loads((splade_tiny_dir() / "config.json").read_text()) | (config_change or {})
    (tmp_path / "config.json").write_text(json.dumps(config))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (tmp_path / name).write_bytes((splade_tiny_dir() / name).read_bytes())
    save_file({k: v.contiguous() for k, v in state.items()}, str(tmp_path / "model.safetensors"))
    return tmp_path


def test_traceback_missing_tensor_is_one_line_naming_it(tmp_path, splade):
    key = "bert.encoder.layer.1.output.dense.weight"
    path = _splade_dir(tmp_path, splade, change=lambda s: s.pop(key))
    with pytest.raises(EncoderLoadError, match=rf"model\.safetensors: missing tensor '{key}'$"):
        load_encoder(str(path), device="cpu")


def test_traceback_wrong_head_shape_is_one_line_naming_both(tmp_path, splade):
    key = "cls.predictions.transform.dense.weight"

    def widen(state):
        state[key] = torch.zeros(128, 64)

    path = _splade_dir(tmp_path, splade, change=widen)
    with pytest.raises(EncoderLoadError) as info:
        load_encoder(str(path), device="cpu")
    assert str(info.value).endswith(
        f"model.safetensors: tensor '{key}' has shape (128, 64), the config expects (128, 128)"
    )


def test_traceback_inf_in_bias_is_refused(tmp_path, splade):
    def spoil(state):
        state["cls.predictions.bias"][5] = float("inf")

    path = _splade_dir(tmp_path, splade, change=spoil)
    with pytest.raises(EncoderLoadError, match="'cls.predictions.bias' holds NaN or Inf"):
        load_encoder(str(path), device="cpu")


def test_traceback_heads_not_dividing_hidden_size_goes_to_transformers_message(tmp_path, splade):
    """A config the plain module does not run is left to transformers (its one-line error)."""
    path = _splade_dir(tmp_path, splade, config_change={"num_attention_heads": 3})
    with pytest.raises(EncoderLoadError) as info:
        load_encoder(str(path), device="cpu")
    assert "config.json" in str(info.value) and "\n" not in str(info.value)


def test_unbounded_terms_start_up_imports_no_transformers_modeling_code():
    """Loading the default encoder and encoding a text imports neither transformers' modeling
    code nor what it pulls in (torch._dynamo, sympy, scipy.optimize)."""
    code = (
        "import sys\n"
        "from lexlens.models import load_encoder\n"
        "load_encoder('splade-tiny', device='cpu').encode_texts(['a dog on the beach'])\n"
        "heavy = ('transformers.modeling_utils', 'transformers.models.bert.modeling_bert',\n"
        "         'torch._dynamo', 'sympy', 'scipy.optimize')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    )
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout
