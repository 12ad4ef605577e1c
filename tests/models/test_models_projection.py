"""The packed max-projection fast path: equal to the per-token rows it replaces.

References are computed here from the models' own full logits (``[B, T, |V|]``), then
``log(1 + relu(·))`` and a max over each text's real tokens.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lexlens.models.projection import project_rows, segment_max_projection
from tests.helpers import model_tolerance

TEXTS = [
    "a dog",
    "learned sparse retrieval expands queries with related terms",
    "tiny",
    "retrieval " * 700,  # longer than the 512-token window: truncated
    "two cats sleeping on a pile of old books near the window",
]


@pytest.mark.parametrize("chunk", [1, 3, 7, 64])
def test_segment_max_projection_equals_brute_force(chunk):
    gen = torch.Generator().manual_seed(0)
    lengths = [1, 5, 2, 9, 1, 4]
    rows = torch.randn(sum(lengths), 6, generator=gen)
    weight = torch.randn(11, 6, generator=gen)
    ours = segment_max_projection(rows, weight, lengths, chunk=chunk)
    logits = rows @ weight.T
    reference = torch.stack([part.amax(0) for part in logits.split(lengths)])
    # each logit within the tolerance of its terms x_j W_ij (a max: of its segment's largest)
    sums = torch.as_tensor(model_tolerance(rows.abs().double() @ weight.abs().double().T, axis=()))
    tolerance = torch.stack([part.amax(0) for part in sums.split(lengths)])
    assert ((ours - reference).abs() <= tolerance).all()
    bias = torch.randn(11, generator=gen)
    projected = project_rows(rows, weight, bias, chunk=chunk)
    assert (
        (projected - logits - bias).abs()
        <= sums + torch.as_tensor(model_tolerance(bias.abs(), axis=()))
    ).all()
    with pytest.raises(ValueError):
        segment_max_projection(rows, weight, [*lengths, 0], chunk=chunk)


def _reference(mlm, tokenizer, texts, max_length=512):
    """Per text, alone (no padding): log(1 + relu(full MLM logits)) max-pooled."""
    out = []
    for text in texts:
        batch = tokenizer([text], truncation=True, max_length=max_length, return_tensors="pt")
        with torch.no_grad():
            logits = mlm(**batch).logits[0]
        out.append(torch.log1p(torch.relu(logits)).amax(0).numpy())
    return np.stack(out)


def test_splade_pooled_path_equals_the_full_logits(splade):
    from transformers import AutoTokenizer, BertForMaskedLM

    from lexlens.models.packaged import splade_tiny_dir

    mlm = BertForMaskedLM.from_pretrained(splade_tiny_dir(), local_files_only=True).eval()
    tok = AutoTokenizer.from_pretrained(str(splade_tiny_dir()), local_files_only=True)
    reference = _reference(mlm, tok, TEXTS)
    pooled = splade.encode_texts(TEXTS, keep_units=False)
    kept = splade.encode_texts(TEXTS, keep_units=True)
    for i, (p, k) in enumerate(zip(pooled, kept, strict=True)):
        assert p.unit_weights is None and k.unit_weights.shape == (len(k.units), 30522)
        assert np.abs(p.weights - reference[i]).max() < 1e-5, TEXTS[i][:30]
        assert np.abs(k.weights - reference[i]).max() < 1e-5
        np.testing.assert_array_equal(k.unit_weights.max(axis=0), k.weights)
        assert p.units == k.units and p.input_ids == k.input_ids
    assert [p.truncated for p in pooled] == [False, False, False, True, False]
    assert len(pooled[3].units) == 512


def _tiny_mlm(kind: str):
    """A small random masked LM of another family, on the bert-base-uncased vocabulary."""
    from transformers import (
        DistilBertConfig,
        DistilBertForMaskedLM,
        RobertaConfig,
        RobertaForMaskedLM,
    )

    torch.manual_seed(0)
    if kind == "distilbert":
        config = DistilBertConfig(
            vocab_size=30522,
            dim=32,
            n_layers=2,
            n_heads=2,
            hidden_dim=64,
            max_position_embeddings=64,
        )
        return DistilBertForMaskedLM(config).eval()
    config = RobertaConfig(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=80,
        pad_token_id=0,
    )
    return RobertaForMaskedLM(config).eval()


@pytest.mark.parametrize("kind", ["distilbert", "roberta"])
def test_other_masked_lm_heads(kind):
    """DistilBERT's head runs packed; an unknown head (RoBERTa) through its full logits."""
    from lexlens.models.splade import SpladeEncoder, mlm_head
    from lexlens.models.text_io import load_bert_tokenizer

    mlm = _tiny_mlm(kind)
    tok = load_bert_tokenizer()
    enc = SpladeEncoder(mlm, tok, device="cpu", name=kind)
    assert (mlm_head(mlm) is None) == (kind == "roberta")
    texts = [t[:200] for t in TEXTS]
    reference = _reference(mlm, tok, texts, max_length=enc.max_length)
    for keep in (False, True):
        for i, e in enumerate(enc.encode_texts(texts, keep_units=keep)):
            assert np.abs(e.weights - reference[i]).max() < 1e-5, (kind, keep, i)


def test_batches_respect_the_limits(splade):
    """Length-sorted batches stay within the text and token limits, order is kept."""
    texts = [("word " * n).strip() for n in (3, 300, 12, 500, 7, 40, 1, 200)]
    batches = list(splade._batches(texts, keep_units=False))
    assert sorted(i for index, *_ in batches for i in index) == list(range(len(texts)))
    for index, ids, mask, _ in batches:
        assert len(index) <= splade.pooled_batch_size
        assert ids.numel() <= splade.max_batch_tokens or len(index) == 1
        assert int(mask[:, -1].max()) == 1  # trimmed to the longest text in the batch
    kept = list(splade._batches(texts, keep_units=True))
    for _, _, mask, _ in kept:
        assert int(mask.sum()) <= splade.max_kept_rows or mask.shape[0] == 1
    encodings = splade.encode_texts(texts, keep_units=False)
    assert [len(e.units) for e in encodings] == [
        min(n + 2, 512) for n in (3, 300, 12, 500, 7, 40, 1, 200)
    ]
