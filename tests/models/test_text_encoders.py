"""SPLADE text encoding with the real embedded model, and masked-LM directories."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
import torch

from lexlens.models import EncoderLoadError, InputError, LexlensError, load_encoder


def test_default_encoder_terms(splade):
    enc = splade.encode_texts(["a cat sleeping on a book"])[0]
    from lexlens.analysis.core.words import top_terms

    top = [t.token for t in top_terms(enc.weights, splade.vocab, 10)]
    assert {"cat", "sleeping", "book"} <= set(top)
    assert len(splade.vocab) == enc.weights.shape[0] == 30522


def test_pooled_weights_are_the_max_of_unit_rows(splade):
    enc = splade.encode_texts(["interpretability of sparse retrieval models"])[0]
    assert enc.unit_weights.shape == (len(enc.units), 30522)
    np.testing.assert_array_equal(enc.unit_weights.max(axis=0), enc.weights)
    assert enc.units[0] == "[CLS]" and enc.units[-1] == "[SEP]"


def test_splade_matches_independent_forward(splade):
    """Reference: the masked LM's logits computed here, then log(1+relu) and a max."""
    from transformers import AutoTokenizer, BertForMaskedLM

    from lexlens.models.packaged import splade_tiny_dir

    mlm = BertForMaskedLM.from_pretrained(splade_tiny_dir(), local_files_only=True).eval()
    tok = AutoTokenizer.from_pretrained(str(splade_tiny_dir()), local_files_only=True)
    text = "how do learned sparse retrievers expand queries"
    with torch.no_grad():
        logits = mlm(**tok([text], return_tensors="pt")).logits[0]
    reference = np.log1p(np.maximum(logits.numpy(), 0)).max(axis=0)
    ours = splade.encode_texts([text])[0].weights
    assert np.abs(ours - reference).max() < 1e-5


def test_batching_and_padding_do_not_change_results(splade):
    texts = ["a dog", "a very long sentence about a dog running in a green park at noon"]
    batched = splade.encode_texts(texts)
    single = [splade.encode_texts([t])[0] for t in texts]
    for b, s in zip(batched, single, strict=True):
        assert np.abs(b.weights - s.weights).max() < 1e-4
        assert b.units == s.units


def test_truncation_is_noted(splade):
    long_text = "retrieval " * 25_000  # 250,000 characters
    enc = splade.encode_texts([long_text])[0]
    assert enc.truncated
    assert len(enc.units) == splade.max_length
    assert not splade.encode_texts(["short text"])[0].truncated


@pytest.mark.parametrize("bad", ["", "   \n"])
def test_empty_text_is_a_clear_error(splade, bad):
    with pytest.raises(InputError, match="empty"):
        splade.encode_texts([bad])


def test_images_on_text_encoder_is_a_clear_error(splade):
    from PIL import Image

    with pytest.raises(LexlensError, match="does not encode images"):
        splade.encode_images([Image.new("RGB", (8, 8))])


def test_unknown_encoder_name():
    with pytest.raises(LexlensError, match="unknown encoder 'nope'"):
        load_encoder("nope")


def test_directory_without_config(tmp_path):
    with pytest.raises(EncoderLoadError, match="no config.json"):
        load_encoder(str(tmp_path))


def _save_mlm_dir(tmp_path, state_dict, *, as_bin=True):
    """A masked-LM directory: the splade-tiny config and tokenizer, given weights."""
    from lexlens.models.packaged import splade_tiny_dir

    src = splade_tiny_dir()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        if (src / name).exists():
            (tmp_path / name).write_bytes((src / name).read_bytes())
    if as_bin:
        torch.save(state_dict, tmp_path / "pytorch_model.bin")
    return tmp_path


def test_masked_lm_directory_loads_as_splade(tmp_path, splade):
    """A user's own MLM directory (here: the same weights as a .bin) gives the same vector."""
    sd = {k: v.clone() for k, v in splade.model.state_dict().items()}
    path = _save_mlm_dir(tmp_path, sd)
    enc = load_encoder(str(path), device="cpu")
    text = "a cat sleeping on a book"
    assert enc.name == path.name
    assert (
        np.abs(enc.encode_texts([text])[0].weights - splade.encode_texts([text])[0].weights).max()
        < 1e-5
    )


def test_masked_lm_with_wrong_shape_is_a_clear_error(tmp_path, splade):
    sd = {k: v.clone() for k, v in splade.model.state_dict().items()}
    sd["bert.embeddings.word_embeddings.weight"] = torch.zeros(100, 128)
    path = _save_mlm_dir(tmp_path, sd)
    with pytest.raises(EncoderLoadError) as info:
        load_encoder(str(path), device="cpu")
    message = str(info.value)
    assert (
        "pytorch_model.bin" in message and "word_embeddings" in message and "(100, 128)" in message
    )
    assert "\n" not in message


def test_pickle_that_is_not_a_state_dict(tmp_path):
    path = _save_mlm_dir(tmp_path, {}, as_bin=False)
    (path / "pytorch_model.bin").write_bytes(pickle.dumps(object()))
    with pytest.raises(EncoderLoadError, match="pytorch_model.bin: refused") as info:
        load_encoder(str(path), device="cpu")
    assert "\n" not in str(info.value)


def test_list_pickle_is_not_a_state_dict(tmp_path):
    path = _save_mlm_dir(tmp_path, [torch.zeros(2)])
    with pytest.raises(EncoderLoadError, match="holds a list, not a state dict"):
        load_encoder(str(path), device="cpu")


def test_unrecognised_config(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "t5"}))
    with pytest.raises(EncoderLoadError, match="cannot tell the model family"):
        load_encoder(str(tmp_path))


def test_invalid_json_config(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(EncoderLoadError, match="not valid JSON"):
        load_encoder(str(tmp_path))


def test_device_selection():
    from lexlens.models import pick_device

    assert pick_device(None) == ("cuda" if torch.cuda.is_available() else "cpu")
    assert pick_device("cpu") == "cpu"
    with pytest.raises(LexlensError):
        pick_device("tpu")


def test_packaged_tokenizer_is_bert_base_uncased_vocabulary(splade):
    """The stand-in tokenizer for VDR checkpoints must match MiniLM's bert-base-uncased vocab."""
    from lexlens.models.packaged import minilm_dir

    vocab_txt = (minilm_dir() / "vocab.txt").read_text(encoding="utf-8").splitlines()
    assert splade.vocab == vocab_txt[: len(splade.vocab)]


def test_bag_of_words_terms_are_matched_by_token_not_index(splade):
    """A vocabulary that is a slice of the tokenizer's (as VDR's) still marks own tokens."""
    from lexlens.analysis.lexical.terms import term_rows

    enc = splade.encode_texts(["a cat sleeping on a book"])[0]
    shift = 999
    from dataclasses import replace

    shifted = replace(enc, weights=enc.weights[shift:], unit_weights=enc.unit_weights[:, shift:])
    rows = term_rows(shifted, splade.vocab[shift:], 10)
    marked = {r["token"]: r["in_input"] for r in rows}
    assert marked["cat"] and marked["book"] and not marked["cats"]


def test_word_pieces_merge_only_with_evidence(splade):
    from lexlens.analysis.core.words import Term, input_words, merge_word_pieces
    from lexlens.analysis.lexical.terms import term_rows

    enc = splade.encode_texts(["a giraffe eating leaves"])[0]
    assert "giraffe" in input_words(enc.units)
    merged = [r["token"] for r in term_rows(enc, splade.vocab, 10, merge_pieces=True)]
    assert "giraffe" in merged and "##raf" not in merged and "gi" not in merged
    # Pieces that spell a valid split but were never one word stay apart.
    terms = [Term("domestic", 2.0, 1), Term("##lis", 1.5, 2), Term("fe", 1.0, 3)]
    assert [t.token for t in merge_word_pieces(terms, splade.vocab, set())] == [
        "domestic",
        "##lis",
        "fe",
    ]
    assert [t.token for t in merge_word_pieces(terms, splade.vocab, {"felis"})] == [
        "domestic",
        "felis",
    ]


# --- bad checkpoints: refused before allocating, one line naming file and key -----------


def _splade_state(splade) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in splade.model.state_dict().items()}


@pytest.mark.parametrize("fmt", ["bin", "safetensors"])
def test_nan_weight_is_refused_naming_file_and_key(tmp_path, splade, fmt):
    from safetensors.torch import save_file

    sd = _splade_state(splade)
    key = "bert.encoder.layer.1.output.dense.weight"
    sd[key][0, 0] = float("nan")
    path = _save_mlm_dir(tmp_path, sd, as_bin=fmt == "bin")
    if fmt == "safetensors":
        sd.pop("cls.predictions.decoder.weight")  # tied to the word embeddings
        save_file({k: v.contiguous() for k, v in sd.items()}, str(path / "model.safetensors"))
    name = "pytorch_model.bin" if fmt == "bin" else "model.safetensors"
    with pytest.raises(EncoderLoadError, match=rf"{name}: tensor '{key}' holds NaN or Inf"):
        load_encoder(str(path), device="cpu")


@pytest.mark.parametrize(
    ("architectures", "model_type", "match"),
    [
        ([1, 2], "bert", r"'architectures' must be a list of class names, got \[1, 2\]"),
        ("BertForMaskedLM", "bert", "'architectures' must be a list of class names"),
        (None, "t5", "cannot tell the model family"),
    ],
)
def test_malformed_architectures_are_a_clear_error(tmp_path, architectures, model_type, match):
    (tmp_path / "config.json").write_text(
        json.dumps({"model_type": model_type, "architectures": architectures})
    )
    with pytest.raises(EncoderLoadError, match=match) as info:
        load_encoder(str(tmp_path))
    assert "config.json" in str(info.value) and "\n" not in str(info.value)


def test_null_architectures_of_a_bert_masked_lm_still_loads(tmp_path, splade):
    path = _save_mlm_dir(tmp_path, _splade_state(splade))
    config = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps(config | {"architectures": None}))
    enc = load_encoder(str(path), device="cpu")
    assert enc.vocab == splade.vocab


def _unreadable(path, monkeypatch):
    """Make ``path`` unreadable: chmod, or (as root, who reads anything) refuse its open."""
    import builtins
    import os
    import pathlib

    path.chmod(0)
    if os.access(path, os.R_OK):  # root: the OS would let us read it anyway
        real_open = builtins.open

        def refusing_open(file, *args, **kwargs):
            if os.fspath(file) == os.fspath(path):
                raise PermissionError(13, "Permission denied", os.fspath(file))
            return real_open(file, *args, **kwargs)

        monkeypatch.setattr(builtins, "open", refusing_open)
        monkeypatch.setattr(
            pathlib.Path, "read_text", lambda self, *a, **k: refusing_open(self).read()
        )
    return path


@pytest.mark.parametrize("which", ["config.json", "pytorch_model.bin"])
def test_unreadable_files_are_one_line_errors(tmp_path, splade, monkeypatch, which):
    path = _save_mlm_dir(tmp_path, _splade_state(splade))
    _unreadable(path / which, monkeypatch)
    with pytest.raises(EncoderLoadError) as info:
        load_encoder(str(path), device="cpu")
    message = str(info.value)
    assert which in message and "Permission denied" in message and "\n" not in message


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"hidden_size": 1e6}, r"hidden_size = 1000000\.0 is not a plausible size"),
        ({"vocab_size": 10**9}, r"vocab_size = 1000000000 is not a plausible size"),
        ({"num_hidden_layers": 0}, r"num_hidden_layers = 0 is not a plausible size"),
    ],
)
def test_absurd_sizes_in_config_are_refused(tmp_path, splade, change, match):
    path = _save_mlm_dir(tmp_path, _splade_state(splade))
    config = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps(config | change))
    with pytest.raises(EncoderLoadError, match=match):
        load_encoder(str(path), device="cpu")


def test_large_config_is_refused_from_the_weight_header(tmp_path, splade):
    """BERT-large-sized config over splade-tiny weights (~1.3 GB if built): refused from
    the header, naming key and both shapes, before the model exists."""
    path = _save_mlm_dir(tmp_path, _splade_state(splade))
    config = json.loads((path / "config.json").read_text())
    big = {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16}
    (path / "config.json").write_text(json.dumps(config | big | {"intermediate_size": 4096}))
    with pytest.raises(EncoderLoadError) as info:
        load_encoder(str(path), device="cpu")
    message = str(info.value)
    assert "bert.embeddings.word_embeddings.weight" in message
    assert "(30522, 128)" in message and "(30522, 1024)" in message
