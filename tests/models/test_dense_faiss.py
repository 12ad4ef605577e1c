"""Dense encoders beyond the packaged MiniLM with a RepCONC/JPQ-style faiss index, chosen by
the spec ``DIR+faiss:FILE``: codes equal faiss's own ``sa_encode``, IG per
sub-vector runs on it, and the commands that take an encoder take the spec.

The model is a small random BERT (2 layers, 32 hidden) saved as a sentence-transformers
directory with CLS pooling (MiniLM pools by mean); the index is ``OPQ4,PQ4x8`` trained with
faiss on that model's embeddings of real texts.
"""

from __future__ import annotations

import numpy as np
import pytest

from lexlens.models import Capability, load_encoder
from lexlens.models.packaged import default_corpus
from lexlens.models.pq import faiss_single_thread
from tests.helpers import one_line_error
from tests.models.test_models_dense_dirs import write_st_dir

TEXTS = ["a tabby cat asleep on a sofa", "espresso in a white cup", "a rocket on the launch pad"]


@pytest.fixture(scope="module")
def st_dir(tmp_path_factory):
    return write_st_dir(
        tmp_path_factory.mktemp("dense") / "tiny-cls", pooling="cls", normalize=False, seed=5
    )


@pytest.fixture(scope="module")
def reference_model(st_dir):
    """sentence-transformers itself on the directory (independent of Lexlens's loader)."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(st_dir), device="cpu", local_files_only=True)


@pytest.fixture(scope="module")
def corpus() -> list[str]:
    """Real texts, cut to their first eight words (short texts embed fast)."""
    return [" ".join(t.split()[:8]) for t in default_corpus()[:360]]


@pytest.fixture(scope="module")
def faiss_index(tmp_path_factory, reference_model, corpus):
    """``OPQ4,PQ4x8`` trained on the model's embeddings of 300 real texts, written to a file."""
    import faiss

    train = reference_model.encode(corpus[:300], convert_to_numpy=True)
    index = faiss.index_factory(32, "OPQ4,PQ4x8")
    faiss.downcast_VectorTransform(index.chain.at(0)).niter = 4
    pq = faiss.downcast_index(index.index)
    pq.do_polysemous_training = False  # the factory's default costs seconds, codes unchanged
    pq.pq.cp.min_points_per_centroid = 1  # 300 points for 256 centroids: no warning
    with faiss_single_thread():
        index.train(np.ascontiguousarray(train, dtype=np.float32))
    path = tmp_path_factory.mktemp("faiss") / "opq4.index"
    faiss.write_index(index, str(path))
    return index, path


@pytest.fixture(scope="module")
def encoder(st_dir, faiss_index):
    return load_encoder(f"{st_dir}+faiss:{faiss_index[1]}", device="cpu")


def test_codes_equal_faiss_sa_encode(encoder, st_dir, faiss_index, reference_model, corpus):
    index, path = faiss_index
    assert encoder.name == "tiny-cls+faiss:opq4.index"
    assert encoder.capabilities == frozenset(
        {Capability.DENSE, Capability.QUANTISED, Capability.DIFFERENTIABLE}
    )
    assert (encoder.m, encoder.k, encoder.dim) == (4, 256, 32)
    texts = corpus[300:] + TEXTS  # texts the index was not trained on
    vectors = reference_model.encode(texts, convert_to_numpy=True)
    assert np.abs(encoder.embed_texts(texts) - vectors).max() < 1e-5
    with faiss_single_thread():
        want = index.sa_encode(np.ascontiguousarray(vectors, dtype=np.float32))
    np.testing.assert_array_equal(encoder.codes(texts), want.astype(np.int64))
    # The directory alone is still a plain dense model: the spec made a new encoder.
    base = load_encoder(str(st_dir), device="cpu")
    assert base.name == "tiny-cls" and base.capabilities == frozenset({Capability.DENSE})


def test_integrated_gradients_per_subvector(encoder):
    from lexlens.analysis.attribution.attribution import attribute

    result = attribute(encoder, TEXTS[0], steps=32)
    (text,) = result.texts
    assert result.m == 4 and result.k == 256
    assert text.attributions.shape == (4, len(text.words))
    assert np.abs(text.attributions).sum() > 0
    np.testing.assert_array_equal(text.codes, encoder.codes([TEXTS[0]])[0])
    # Completeness: each sub-vector's attributions sum to F_i(x) − F_i(x').
    assert np.all(np.abs(text.delta) <= 0.05 * np.abs(text.gap()) + 1e-4)


def test_commands_take_the_spec(cli, st_dir, faiss_index, tmp_path):
    spec = f"{st_dir}+faiss:{faiss_index[1]}"
    run = cli("attribute", "--encoder", spec, "--text", TEXTS[1], "--steps", "8", "--json")
    assert run.returncode == 0, run.stderr
    out = run.json()
    assert out["encoder"] == "tiny-cls+faiss:opq4.index" and out["m"] == 4
    (tmp_path / "corpus.txt").write_text("\n".join(TEXTS[:2]))
    run = cli(
        "mot-eval",
        "--encoder",
        spec,
        "--corpus",
        tmp_path / "corpus.txt",
        "--own-codebook",
        "--steps",
        "8",
        "--json",
    )
    assert run.returncode == 0, run.stderr
    run = cli(
        "report",
        "--encoder",
        spec,
        "--text",
        TEXTS[2],
        "--steps",
        "8",
        "--out",
        tmp_path / "report",
    )
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "report").is_dir() and any((tmp_path / "report").iterdir())


def test_codebooks_fitted_locally_by_spec(cli, st_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("LEXLENS_CACHE", str(tmp_path / "cache"))
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(t[:60] for t in default_corpus()[:80]))
    enc = load_encoder(f"{st_dir}+pq:8:{corpus}", device="cpu")
    assert (enc.m, enc.k) == (8, 64) and enc.name == f"tiny-cls+pq:8:{corpus}"
    assert any("K reduced to 64" in n for n in enc.notes)
    run = cli("attribute", "--encoder", f"{st_dir}+pq:5", "--text", "x")
    assert run.returncode == 2 and "M=5" in run.stderr and "32" in run.stderr


def test_bad_specs(cli, st_dir, tmp_path):
    import faiss

    index = faiss.IndexPQ(64, 4, 8)
    with faiss_single_thread():
        index.train(np.random.default_rng(1).standard_normal((300, 64)).astype(np.float32))
    faiss.write_index(index, str(tmp_path / "pq64.index"))
    run = cli("attribute", "--encoder", f"{st_dir}+faiss:{tmp_path / 'pq64.index'}", "--text", "x")
    one_line_error(run, "pq64.index", "64-d", "32-d")
    run = cli("attribute", "--encoder", f"{st_dir}+faiss:{tmp_path / 'none.index'}", "--text", "x")
    one_line_error(run, "none.index", "not found")
    (tmp_path / "junk.index").write_bytes(b"not an index")
    run = cli("attribute", "--encoder", f"{st_dir}+faiss:{tmp_path / 'junk.index'}", "--text", "x")
    one_line_error(run, "junk.index", "not a readable faiss index")
    run = cli(
        "attribute", "--encoder", f"splade-tiny+faiss:{tmp_path / 'pq64.index'}", "--text", "x"
    )
    one_line_error(run, "+faiss: applies to a dense text encoder", "splade-tiny")
