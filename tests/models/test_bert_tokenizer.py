"""The ``tokenizers``-only BERT tokenizer against transformers' tokenizer of the same folder:
the same ids, mask, truncation and tokens on texts chosen to reach every part of BERT's
pipeline (normalisation, accents, CJK, control characters, special-token strings, words past
WordPiece's 100-character limit, texts past the 512-token window and past ``MAX_CHARS``)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from lexlens.models.bert_tokenizer import WordPieceTokenizer, load_wordpiece_tokenizer
from lexlens.models.text_io import MAX_CHARS, tokenize_batch

EDGE = [
    "Café Müller — naïve résumé, Ångström, façade",
    "東京タワーと北京の天安门 mixed with English",
    "emoji 🐶🏖️ and symbols ∑∫√ ½ ©®™",
    "control\x00chars\x1f and\u200bzero\u200dwidth\ufeffjoins",
    "tabs\tnew\nlines\r\nand   many    spaces",
    "[CLS] literal [SEP] and [MASK] and [PAD] [UNK] [cls] [mask]",
    "x" * 150 + " pneumonoultramicroscopicsilicovolcanoconiosis",
    "UPPER lower MiXeD Ünïcödé",
    "numbers 3.14159 1,000,000 2026-11-25 #hash @user e-mail@x.org http://a.b/c?d=e",
    "a",
    " ",
    "word " * 600,
    ("long " * 5000)[: MAX_CHARS + 50],
]


def _corpus() -> list[str]:
    import inspect
    import json as json_module
    import pathlib

    docs = [inspect.getdoc(m) or "" for m in (inspect, json_module, pathlib, subprocess, sys)]
    docs += [inspect.getdoc(getattr(str, n)) or "" for n in dir(str) if not n.startswith("_")]
    return [d for d in docs if d.strip()] + EDGE


def _folders():
    from lexlens.models.packaged import minilm_dir, splade_tiny_dir

    return [splade_tiny_dir(), minilm_dir()]


@pytest.mark.parametrize("which", [0, 1], ids=["splade-tiny", "all-MiniLM-L6-v2"])
def test_silent_wrong_ids_mask_and_truncation_equal_transformers(which):
    from transformers import AutoTokenizer

    folder = _folders()[which]
    ours = load_wordpiece_tokenizer(folder)
    assert isinstance(ours, WordPieceTokenizer)
    theirs = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    texts = _corpus()
    for max_length in (512, 16):
        got = ours.encode_padded(texts, max_length)
        want = tokenize_batch(theirs, texts, max_length)
        assert torch.equal(got.input_ids, want.input_ids)
        assert torch.equal(got.attention_mask, want.attention_mask)
        assert got.truncated == want.truncated
        assert any(got.truncated) and not all(got.truncated)
    vocab = list(range(len(theirs) + 3))
    assert len(ours) == len(theirs)
    assert ours.convert_ids_to_tokens(vocab) == theirs.convert_ids_to_tokens(vocab)
    assert ours.pad_token_id == theirs.pad_token_id


def test_silent_wrong_other_attributes_are_transformers_own():
    """What the fast tokenizer does not implement is transformers' tokenizer, loaded once."""
    from transformers import AutoTokenizer

    from lexlens.models.packaged import splade_tiny_dir

    ours = load_wordpiece_tokenizer(splade_tiny_dir())
    theirs = AutoTokenizer.from_pretrained(str(splade_tiny_dir()), local_files_only=True)
    text = EDGE[0]
    assert ours.tokenize(text) == theirs.tokenize(text)
    assert ours.cls_token_id == theirs.cls_token_id and ours.is_fast
    assert (
        ours(text, return_offsets_mapping=True)["offset_mapping"]
        == theirs(text, return_offsets_mapping=True)["offset_mapping"]
    )
    assert ours.transformers_tokenizer() is ours.transformers_tokenizer()


@pytest.mark.parametrize(
    "change",
    [
        {"do_lower_case": False},
        {"strip_accents": True},
        {"tokenizer_class": "DistilBertTokenizer"},
        {"padding_side": "left"},
    ],
)
def test_silent_wrong_a_config_that_differs_leaves_it_to_transformers(tmp_path, change):
    """A tokenizer_config.json asking for other settings than tokenizer.json holds: not ours."""
    from lexlens.models.packaged import splade_tiny_dir

    src = splade_tiny_dir()
    (tmp_path / "tokenizer.json").write_bytes((src / "tokenizer.json").read_bytes())
    config = json.loads((src / "tokenizer_config.json").read_text()) | change
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    assert load_wordpiece_tokenizer(tmp_path) is None
    (tmp_path / "tokenizer.json").unlink()
    assert load_wordpiece_tokenizer(tmp_path) is None


def test_unbounded_encoding_a_text_imports_no_transformers():
    """The default encoder loads and encodes without importing transformers at all."""
    code = (
        "import sys\n"
        "from lexlens.models import load_encoder\n"
        "enc = load_encoder('splade-tiny', device='cpu').encode_texts(['a dog on the beach'])\n"
        "print(enc[0].units, sorted(m for m in sys.modules if m.startswith('transformers')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    )
    last = out.stdout.strip().splitlines()[-1]
    assert last == "['[CLS]', 'a', 'dog', 'on', 'the', 'beach', '[SEP]'] []", out.stdout
