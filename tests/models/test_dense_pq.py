"""Dense MiniLM encoder + product quantiser: embeddings, faiss codebooks, persistence, cache."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from lexlens.models import Capability, InputError, LexlensError, ModalityError, load_encoder
from lexlens.models.pq import faiss_single_thread
from tests.helpers import model_tolerance


@pytest.fixture(scope="session")
def minilm_base():
    """The packaged dense model without a codebook (no fitting on the default corpus)."""
    from lexlens.models.dense import DensePQEncoder

    return DensePQEncoder.packaged_base("cpu")


@pytest.fixture(scope="session")
def small_corpus():
    from lexlens.models.packaged import default_corpus

    return default_corpus()[:40]


def test_default_corpus_is_real_text():
    from lexlens.models.packaged import default_corpus

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
    assert np.abs(ours - reference).max() <= model_tolerance(np.abs(reference).max())
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
    from lexlens.models.pq import ProductQuantizer

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
    from lexlens.models.pq import ProductQuantizer

    # OPQ fits a D×D rotation: it needs at least D vectors (faiss crashes below that).
    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((400, 384)).astype(np.float32) * np.linspace(0.2, 2, 384)
    pq = ProductQuantizer.fit(vecs, 12, 8, seed=0, opq_iters=2)
    r = pq.rotation
    assert r is not None and r.shape == (384, 384)
    assert np.abs(r @ r.T - np.eye(384)).max() < 1e-4
    assert np.abs(r - np.eye(384)).max() > 0.1
    split = pq.split(vecs[:3])
    terms = np.abs(vecs[:3, None, :]) * np.abs(r[None])  # x_j · R_ij of each rotated entry
    rotated = np.abs(split.reshape(3, 384) - vecs[:3] @ r.T)
    assert (rotated <= model_tolerance(terms, axis=-1)).all()
    with pytest.raises(InputError, match="OPQ rotation needs at least 384 texts"):
        minilm_base.fit_codebooks(small_corpus, 12, 8, opq_iters=2, cache=False)


def test_small_corpus_reduces_k_with_a_notice(minilm_base, small_corpus):
    enc = minilm_base.fit_codebooks(small_corpus[:20], 12, 256, cache=False)
    assert enc.k == 16  # largest power of two <= 20
    assert any("K reduced to 16" in n for n in enc.notes)


def test_m_must_divide_the_dimension(minilm_base, small_corpus):
    with pytest.raises(LexlensError, match="does not divide the embedding dimension 384"):
        minilm_base.fit_codebooks(small_corpus, 7, 8, cache=False)


def test_empty_corpus_is_refused(minilm_base):
    from lexlens.models.pq import ProductQuantizer

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
    with faiss_single_thread():  # faiss's OpenMP threads spin against torch's otherwise
        index.train(train)
    return index


def test_faiss_opq_index_is_read(minilm_base, tmp_path):
    import faiss

    from lexlens.models.faiss_index import load_faiss_index

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
    import faiss

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


# --- faiss equality, the sentence-transformers modules, options ---------------------------


@pytest.mark.parametrize("nbits", [8, 4])
def test_codes_equal_faiss_index_pq(nbits):
    """Our codes are what a faiss IndexPQ holding the same centroids stores."""
    import faiss

    from lexlens.models.pq import ProductQuantizer

    rng = np.random.default_rng(nbits)
    train = rng.standard_normal((600, 96)).astype(np.float32)
    pq = ProductQuantizer.fit(train, 12, 1 << nbits, seed=1)
    index = faiss.IndexPQ(96, 12, nbits)
    faiss.copy_array_to_vector(pq.centroids.ravel(), index.pq.centroids)
    index.is_trained = True
    sample = rng.standard_normal((200, 96)).astype(np.float32)
    ours = pq.encode(sample)
    assert ours.shape == (200, 12) and ours.dtype == np.int64
    packed = index.sa_encode(sample)
    # Decoding faiss's packed codes gives the centroids our codes pick.
    np.testing.assert_array_equal(
        index.sa_decode(packed).reshape(200, 12, 96 // 12), pq.decode(ours)
    )
    if nbits == 8:
        np.testing.assert_array_equal(ours, packed.astype(np.int64))
    # …and they are the nearest centroids (brute force, float64).
    sub = sample.reshape(200, 12, 8).astype(np.float64)
    dist = ((sub[:, :, None, :] - pq.centroids[None].astype(np.float64)) ** 2).sum(-1)
    best = dist.min(-1)
    chosen = np.take_along_axis(dist, ours[..., None], -1)[..., 0]
    picked = pq.centroids[np.arange(12), ours].astype(np.float64)  # [200, 12, 8]
    squares = (np.abs(sub) + np.abs(picked)) ** 2  # the |terms| of s² − 2sc + c²
    assert (np.abs(chosen - best) <= model_tolerance(squares, axis=-1)).all()


def test_embeddings_equal_sentence_transformers_encode(minilm_base):
    texts = ["a tabby cat asleep on a sofa", "espresso", "the rocket lifted off at dawn " * 30]
    ours = minilm_base.embed_texts(texts)
    theirs = minilm_base.sentence_transformer.encode(texts, convert_to_numpy=True)
    assert np.abs(ours - theirs).max() <= model_tolerance(np.abs(theirs).max())


def test_forward_embeds_is_differentiable_and_equals_embed_texts(minilm_base):
    batch = minilm_base.tokenize(["a red bus", "two dogs play in the snow"])
    embeds = minilm_base.word_embeddings(batch.input_ids).detach().requires_grad_(True)
    f = minilm_base.forward_embeds(embeds, batch.attention_mask)
    f[:, 0].sum().backward()
    assert embeds.grad is not None and embeds.grad.abs().sum() > 0
    ref = minilm_base.embed_texts(["a red bus", "two dogs play in the snow"])
    assert np.abs(f.detach().numpy() - ref).max() < 1e-5
    hidden = minilm_base.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask)
    pooled = _pool(minilm_base, hidden.last_hidden_state, batch.attention_mask)
    assert np.abs(pooled.detach().numpy() - ref).max() < 1e-5


def _pool(encoder, hidden, attention_mask):
    """The sentence-transformers modules after the Transformer, on its hidden states."""
    features = {"token_embeddings": hidden, "attention_mask": attention_mask}
    for module in list(encoder.sentence_transformer)[1:]:
        features = module(features)
    return features["sentence_embedding"]


def _minilm_copy(tmp_path, **pooling):
    """The packaged MiniLM directory (files linked) with another Pooling configuration."""
    from lexlens.models.packaged import minilm_dir

    src = minilm_dir()
    dst = tmp_path / "minilm-copy"
    dst.mkdir()
    for item in src.iterdir():
        if item.name != "1_Pooling":
            (dst / item.name).symlink_to(item)
    (dst / "1_Pooling").mkdir()
    config = json.loads((src / "1_Pooling" / "config.json").read_text())
    config.update(pooling)
    (dst / "1_Pooling" / "config.json").write_text(json.dumps(config))
    return dst


def test_cls_pooling_is_read_from_the_directory(tmp_path, minilm_base):
    """A sentence-transformers directory pooling the [CLS] token (no mean) loads as such."""
    path = _minilm_copy(tmp_path, pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    enc = load_encoder(str(path), device="cpu")
    assert enc.name == "minilm-copy" and not enc.can(Capability.QUANTISED)
    text = "a lighthouse on a cliff"
    batch = minilm_base.tokenize([text])
    with torch.no_grad():
        h = minilm_base.model(**{"input_ids": batch.input_ids}).last_hidden_state[0, 0]
    reference = (h / h.norm()).numpy()
    assert np.abs(enc.embed_texts([text])[0] - reference).max() < 1e-5


def test_options_are_checked_before_embedding(minilm_base, small_corpus):
    with pytest.raises(LexlensError, match="K must be a power of two"):
        minilm_base.fit_codebooks(small_corpus, 12, 100, cache=False)
    with pytest.raises(LexlensError, match="seed must be an integer"):
        minilm_base.fit_codebooks(small_corpus, 12, 8, seed=-1, cache=False)
    with pytest.raises(LexlensError, match="opq_iters"):
        minilm_base.fit_codebooks(small_corpus, 12, 8, opq_iters=-2, cache=False)


def test_one_text_gives_one_centroid(minilm_base, small_corpus):
    enc = minilm_base.fit_codebooks(small_corpus[:1], 12, 8, cache=False)
    assert enc.k == 1 and enc.codes(small_corpus[:2]).tolist() == [[0] * 12] * 2
    vec = minilm_base.embed_texts(small_corpus[:1])
    scale = model_tolerance(np.abs(vec).max())  # the vector's largest entry: its sums' scale
    np.testing.assert_allclose(enc.centroids[:, 0].reshape(1, 384), vec, rtol=0, atol=scale)


# --- the codebook cache ------------------------------------------------------------------


def _messages():
    messages: list[str] = []
    return messages, lambda f, m: messages.append(m)


def test_cache_that_is_a_file_runs_uncached(
    minilm_base, small_corpus, tmp_path, monkeypatch, caplog
):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    monkeypatch.setenv("LEXLENS_CACHE", str(blocker))
    enc = minilm_base.fit_codebooks(small_corpus[:16], 12, 8)
    assert enc.k == 8
    assert any("without the disk cache" in r.getMessage() for r in caplog.records)


def test_unwritable_cache_runs_uncached(minilm_base, small_corpus, tmp_path, monkeypatch, caplog):
    import os

    root = tmp_path / "ro"
    root.mkdir()
    root.chmod(0o500)
    # root may write anywhere: then use a place nobody can create directories in.
    target = root if not os.access(root, os.W_OK) else Path("/proc/lexlens-cache")
    try:
        monkeypatch.setenv("LEXLENS_CACHE", str(target))
        enc = minilm_base.fit_codebooks(small_corpus[:16], 12, 8)
        assert enc.k == 8
        assert not target.exists() or not any(target.iterdir())
        assert any("without the disk cache" in r.getMessage() for r in caplog.records)
    finally:
        root.chmod(0o700)


@pytest.mark.parametrize("damage", ["truncated", "meta-list", "nan"])
def test_corrupt_cache_entry_is_a_miss_and_rebuilt(
    minilm_base, small_corpus, tmp_path, monkeypatch, damage
):
    from safetensors.numpy import save_file

    monkeypatch.setenv("LEXLENS_CACHE", str(tmp_path))
    first = minilm_base.fit_codebooks(small_corpus[:16], 12, 8)
    (entry,) = [p for p in (tmp_path / "dense_pq").iterdir() if p.is_dir()]
    codebook, meta = entry / "codebook.safetensors", entry / "meta.json"
    if damage == "truncated":
        codebook.write_bytes(codebook.read_bytes()[:100])
    elif damage == "meta-list":
        meta.write_text("[1, 2]")
    else:
        save_file({"centroids": np.full((12, 8, 32), np.nan, np.float32)}, str(codebook))
    messages, progress = _messages()
    again = minilm_base.fit_codebooks(small_corpus[:16], 12, 8, progress=progress)
    assert any("embedding texts" in m for m in messages)  # fitted again
    np.testing.assert_array_equal(again.centroids, first.centroids)
    messages.clear()
    minilm_base.fit_codebooks(small_corpus[:16], 12, 8, progress=progress)
    assert messages == ["loaded cached codebooks (M=12, K=8)"]  # the entry was repaired


def test_concurrent_fits_of_one_codebook_fit_once(minilm_base, small_corpus, tmp_path, monkeypatch):
    """Two callers (threads here; the lock file works across processes) fit once."""
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setenv("LEXLENS_CACHE", str(tmp_path))
    logs = [_messages() for _ in range(2)]
    with ThreadPoolExecutor(2) as pool:
        futures = [
            pool.submit(minilm_base.fit_codebooks, small_corpus[:24], 12, 8, progress=p)
            for _, p in logs
        ]
        results = [f.result() for f in futures]
    fitted = [any("embedding texts" in m for m in msgs) for msgs, _ in logs]
    assert sorted(fitted) == [False, True]
    np.testing.assert_array_equal(results[0].centroids, results[1].centroids)
    assert list((tmp_path / "dense_pq").glob("*.lock"))
