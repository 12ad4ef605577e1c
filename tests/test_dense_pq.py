"""Dense MiniLM encoder + product quantiser: embeddings, k-means codebooks, persistence, faiss."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from lexlens.models import InputError, LexlensError, ModalityError, load_encoder


@pytest.fixture(scope="session")
def minilm_base():
    """The packaged dense model without a codebook (no fitting on the default corpus)."""
    from lexlens.models.dense_pq import DensePQEncoder

    return DensePQEncoder.packaged_base("cpu")


@pytest.fixture(scope="session")
def small_corpus():
    from lexlens.models.dense_pq import default_corpus

    return default_corpus()[:40]


def test_default_corpus_is_real_text():
    from lexlens.models.dense_pq import default_corpus

    texts = default_corpus()
    assert len(texts) >= 900
    assert texts[0].startswith("A thick-bodied freshwater fish")


def test_embeddings_match_independent_mean_pooling(minilm_base):
    """Reference: transformers BertModel here, masked mean, then L2 normalisation."""
    from transformers import AutoModel, AutoTokenizer

    from lexlens.models.packaged import minilm_dir

    texts = ["a tabby cat asleep on a sofa", "the rocket lifted off the launch pad at dawn today"]
    model = AutoModel.from_pretrained(str(minilm_dir()), local_files_only=True).eval()
    tok = AutoTokenizer.from_pretrained(str(minilm_dir()), local_files_only=True)
    batch = tok(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        h = model(**batch).last_hidden_state.numpy()
    mask = batch["attention_mask"].numpy()[..., None]
    mean = (h * mask).sum(1) / mask.sum(1)
    reference = mean / np.linalg.norm(mean, axis=1, keepdims=True)
    ours = minilm_base.embed_texts(texts)
    assert ours.shape == (2, 384)
    assert np.abs(ours - reference).max() < 1e-5
    assert minilm_base.normalize and minilm_base.max_length == 256


def test_dense_encoder_refuses_lexical_encoding(minilm_base):
    with pytest.raises(ModalityError):
        minilm_base.encode_texts(["a cat"])


def test_fit_encode_save_load_round_trip(minilm_base, small_corpus, tmp_path):
    enc = minilm_base.fit_codebooks(small_corpus, 24, 16, seed=3, cache=False)
    pq = enc.quantizer
    assert pq.centroids.shape == (24, 16, 16) and pq.rotation is None
    assert enc.notes == ()
    # Codes are the nearest centroid per sub-space (brute force here).
    vecs = minilm_base.embed_texts(small_corpus[:5])
    codes = enc.codes(small_corpus[:5])
    sub = vecs.reshape(5, 24, 16)
    brute = np.stack(
        [((sub[:, i, None, :] - pq.centroids[i][None]) ** 2).sum(-1).argmin(-1) for i in range(24)],
        axis=1,
    )
    np.testing.assert_array_equal(codes, brute)
    # Same seed, same codebook (fitted here straight from the embeddings).
    from lexlens.models.dense_pq import ProductQuantizer

    again = ProductQuantizer.fit(minilm_base.embed_texts(small_corpus), 24, 16, seed=3)
    np.testing.assert_array_equal(again.centroids, pq.centroids)

    enc.save(tmp_path)
    meta = json.loads((tmp_path / "lexlens_dense_pq.json").read_text())
    assert meta["m"] == 24 and meta["k"] == 16
    loaded = load_encoder(str(tmp_path), device="cpu")
    assert type(loaded).__name__ == "DensePQEncoder"
    np.testing.assert_array_equal(loaded.centroids, pq.centroids)
    np.testing.assert_array_equal(loaded.codes(small_corpus[:5]), codes)


def test_opq_rotation_is_orthogonal_and_used(minilm_base, small_corpus):
    from lexlens.models.dense_pq import ProductQuantizer

    vecs = minilm_base.embed_texts(small_corpus)
    pq = ProductQuantizer.fit(vecs, 12, 8, seed=0, opq_iters=2)
    r = pq.rotation
    assert r is not None and r.shape == (384, 384)
    assert np.abs(r @ r.T - np.eye(384)).max() < 1e-4
    split = pq.split(vecs[:3])
    np.testing.assert_allclose(split.reshape(3, 384), vecs[:3] @ r.T, atol=1e-6)


def test_small_corpus_reduces_k_with_a_notice(minilm_base, small_corpus):
    enc = minilm_base.fit_codebooks(small_corpus[:20], 12, 256, cache=False)
    assert enc.k == 16  # largest power of two <= 20
    assert any("K reduced to 16" in n for n in enc.notes)


def test_m_must_divide_the_dimension(minilm_base, small_corpus):
    with pytest.raises(LexlensError, match="does not divide the embedding dimension 384"):
        minilm_base.fit_codebooks(small_corpus, 7, 8, cache=False)


def test_empty_corpus_is_refused(minilm_base):
    from lexlens.models.dense_pq import ProductQuantizer

    with pytest.raises(InputError, match="empty corpus"):
        minilm_base.fit_codebooks([], 12, 8, cache=False)
    with pytest.raises(InputError, match="empty corpus"):
        ProductQuantizer.fit(np.zeros((0, 384), np.float32), 12, 8)


def test_codebook_cache_is_reused(minilm_base, small_corpus, tmp_path, monkeypatch):
    monkeypatch.setenv("LEXLENS_CACHE", str(tmp_path))
    messages = []
    first = minilm_base.fit_codebooks(
        small_corpus[:16], 12, 8, progress=lambda f, m: messages.append(m)
    )
    assert any("embedding texts" in m for m in messages)
    messages.clear()
    second = minilm_base.fit_codebooks(
        small_corpus[:16], 12, 8, progress=lambda f, m: messages.append(m)
    )
    assert messages == ["loaded cached codebooks (M=12, K=8)"]
    np.testing.assert_array_equal(first.centroids, second.centroids)


def _opq_index(faiss, dim: int, m: int, train: np.ndarray):
    """What ``index_factory(dim, "OPQ{m},PQ{m}x8")`` builds, with few training rounds."""
    opq = faiss.OPQMatrix(dim, m)
    opq.niter, opq.niter_pq, opq.niter_pq_0 = 2, 4, 4
    index = faiss.IndexPreTransform(opq, faiss.IndexPQ(dim, m, 8))
    index.train(train)
    return index


def test_faiss_opq_index_is_read(minilm_base, tmp_path):
    faiss = pytest.importorskip("faiss")
    from lexlens.models.dense_pq import load_faiss_index

    rng = np.random.default_rng(0)
    train = rng.standard_normal((1000, 384)).astype(np.float32)
    index = _opq_index(faiss, 384, 12, train)
    path = tmp_path / "opq.index"
    faiss.write_index(index, str(path))

    pq = load_faiss_index(path, dim=384)
    assert pq.centroids.shape == (12, 256, 32) and pq.rotation.shape == (384, 384)
    assert np.abs(pq.rotation - np.eye(384)).max() > 0.1  # a real rotation, read as y = A x
    # Our nearest-centroid codes equal faiss's own encoding of the same vectors.
    sample = train[:50]
    theirs = index.sa_encode(sample)  # [50, 12] uint8 for PQ12x8
    np.testing.assert_array_equal(pq.encode(sample), theirs.astype(np.int64))
    enc = minilm_base.with_faiss_index(path)
    assert enc.m == 12 and enc.codes(["a small dog"]).shape == (1, 12)


def test_faiss_index_of_the_wrong_dimension_is_refused(minilm_base, tmp_path):
    faiss = pytest.importorskip("faiss")
    rng = np.random.default_rng(1)
    index = _opq_index(faiss, 64, 8, rng.standard_normal((600, 64)).astype(np.float32))
    path = tmp_path / "small.index"
    faiss.write_index(index, str(path))
    with pytest.raises(LexlensError, match="64-d embeddings but the encoder outputs 384-d"):
        minilm_base.with_faiss_index(path)
    bad = tmp_path / "garbage.index"
    bad.write_bytes(b"not a faiss index")
    with pytest.raises(LexlensError, match="not a readable faiss index"):
        minilm_base.with_faiss_index(bad)
