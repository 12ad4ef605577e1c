"""A toy differentiable, quantised encoder whose Integrated Gradients are known in closed form.

``f(x) = W · Σ_t x_t`` (sum of the word embeddings of the real tokens, a linear map ``W``):
``F_i = −||d̂_i − f_i(x)||²`` is then quadratic in ``x``, its gradient is linear along the
straight IG path, and the path integral is the gradient at the midpoint::

    attr_ij = (x_j − x'_j) · 2 W_iᵀ (d̂_i − W_i Σ_t (x_t + x'_t) / 2)

exactly, for any quadrature exact on linear functions. With ``steep`` set,
``f(x) = tanh(steep · W Σ_t x_t)``: every token still sees the same gradient (``f`` depends
on the sum only), so ``attr_ij = (x_j − x'_j) · v_i`` with ``v_i`` a one-dimensional
integral that ``scipy.integrate.quad_vec`` computes independently.

The toy uses the real bert-base-uncased tokenizer (word pieces, stop words, ``[UNK]``) with
a small random embedding table; other attribution tests import it from here.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lexlens.models.base import Capability, Encoder, InputError
from tests.helpers import model_tolerance


class ToyQuantizer:
    """Centroids ``[M, K, d]`` without a rotation (the protocol's quantiser members)."""

    def __init__(self, centroids: np.ndarray, notes: tuple[str, ...] = ()) -> None:
        self.centroids = np.asarray(centroids, dtype=np.float32)
        self.rotation = None
        self.notes = notes

    m = property(lambda self: int(self.centroids.shape[0]))
    k = property(lambda self: int(self.centroids.shape[1]))
    dsub = property(lambda self: int(self.centroids.shape[2]))
    dim = property(lambda self: self.m * self.dsub)

    def split(self, vectors: np.ndarray) -> np.ndarray:
        return np.asarray(vectors, np.float32).reshape(len(vectors), self.m, self.dsub)

    def encode(self, vectors: np.ndarray) -> np.ndarray:
        sub = self.split(vectors)
        dist = ((sub[:, :, None, :] - self.centroids[None]) ** 2).sum(-1)
        return dist.argmin(-1).astype(np.int64)

    def decode(self, codes: np.ndarray) -> np.ndarray:
        return self.centroids[np.arange(self.m)[None, :], np.asarray(codes, dtype=np.int64)]


class ToyEncoder(Encoder):
    """``f(x) = W Σ_t x_t`` (or ``tanh(steep · …)``) over a small random embedding table."""

    capabilities = frozenset({Capability.DENSE, Capability.QUANTISED, Capability.DIFFERENTIABLE})

    def __init__(
        self, *, m: int = 4, k: int = 3, dim: int = 8, emb: int = 6, steep: float | None = None
    ) -> None:
        from lexlens.models.text_io import load_bert_tokenizer

        gen = torch.Generator().manual_seed(0)
        self.tokenizer = load_bert_tokenizer()
        self.name = "toy" if steep is None else f"toy-tanh{steep:g}"
        self.max_length = 32
        self.dim = dim
        self.steep = steep
        table = torch.randn(len(self.tokenizer.vocab), emb, generator=gen, dtype=torch.float64)
        self._emb = torch.nn.Embedding.from_pretrained(table.float(), freeze=True)
        scale = 0.3 if steep is None else 1.0
        self.W = (scale * torch.randn(dim, emb, generator=gen, dtype=torch.float64)).float()
        cents = torch.randn(m, k, dim // m, generator=gen, dtype=torch.float64).numpy()
        self.quantizer = ToyQuantizer(cents)
        self.notes: tuple[str, ...] = ()

    m = property(lambda self: self.quantizer.m)
    k = property(lambda self: self.quantizer.k)
    centroids = property(lambda self: self.quantizer.centroids)

    @property
    def word_embeddings(self) -> torch.nn.Embedding:
        return self._emb

    def tokenize(self, texts: list[str]):
        from lexlens.models.text_io import tokenize_batch

        return tokenize_batch(self.tokenizer, texts, self.max_length)

    def forward_embeds(self, inputs_embeds: torch.Tensor, attention_mask: torch.Tensor):
        summed = (inputs_embeds * attention_mask.unsqueeze(-1).to(inputs_embeds.dtype)).sum(1)
        f = summed @ self.W.to(summed.dtype).T
        return f if self.steep is None else torch.tanh(self.steep * f)

    def forward_ids(self, input_ids: torch.Tensor, attention_mask: torch.Tensor):
        return self.forward_embeds(self._emb(input_ids), attention_mask)

    def split_torch(self, f: torch.Tensor) -> torch.Tensor:
        return f.reshape(f.shape[0], self.m, self.dim // self.m)

    def centroids_torch(self) -> torch.Tensor:
        return torch.from_numpy(self.quantizer.centroids)

    @torch.no_grad()
    def embed_texts(self, texts: list[str], *, batch_size=None, progress=None) -> np.ndarray:
        batch = self.tokenize(texts)
        return self.forward_ids(batch.input_ids, batch.attention_mask).double().numpy()

    def codes(self, texts: list[str], *, progress=None) -> np.ndarray:
        return self.quantizer.encode(self.embed_texts(texts))

    def with_quantizer(self, quantizer, *, name: str | None = None) -> ToyEncoder:
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone.quantizer = quantizer
        clone.notes = tuple(getattr(quantizer, "notes", ()))
        if name is not None:
            clone.name = name
        return clone


def toy_ig(enc: ToyEncoder, text: str, baseline_ids: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Closed-form (linear ``f``) or quad_vec (tanh ``f``) IG: ``[M, n_tokens]`` and the gap."""
    from scipy.integrate import quad_vec

    ids = enc.tokenize([text]).input_ids[0].tolist()
    table = enc.word_embeddings.weight.double().numpy()
    x, xb = table[ids], table[baseline_ids]
    w = enc.W.double().numpy()
    s, sb = x.sum(0), xb.sum(0)
    f_real = w @ s if enc.steep is None else np.tanh(enc.steep * (w @ s))
    d = enc.dim // enc.m
    codes = enc.quantizer.encode(f_real[None])[0]
    dhat = enc.quantizer.decode(codes[None])[0].astype(np.float64).reshape(-1)  # [D]
    block = np.repeat(np.arange(enc.m), d)

    def grad_s(alpha: float) -> np.ndarray:  # ∂F_i/∂S for every i: [M, E]
        z = w @ (sb + alpha * (s - sb))
        if enc.steep is None:
            f, jac = z, w
        else:
            f = np.tanh(enc.steep * z)
            jac = (enc.steep * (1 - f**2))[:, None] * w
        out = np.zeros((enc.m, w.shape[1]))
        np.add.at(out, block, 2 * (dhat - f)[:, None] * jac)
        return out

    v = grad_s(0.5) if enc.steep is None else quad_vec(grad_s, 0, 1, epsabs=1e-13, epsrel=1e-12)[0]
    attr = (x - xb) @ v.T  # [n_tokens, M]

    def big_f(sum_vec: np.ndarray) -> np.ndarray:
        z = w @ sum_vec
        f = z if enc.steep is None else np.tanh(enc.steep * z)
        return -(((dhat - f) ** 2).reshape(enc.m, d)).sum(1)

    return attr.T, big_f(s) - big_f(sb)


def toy_ig_terms(enc: ToyEncoder, text: str, baseline_ids: list[int]) -> tuple[np.ndarray, ...]:
    """The sums of |terms| behind the linear toy's attributions ``[M, n_tokens]`` and gaps
    ``[M]``, along the sums the float32 model runs: ``s = Σ_t x_t``, ``f = W s``, the
    gradient ``2 Wᵀ (d̂ − f)``, ``(x_j − x'_j) · ∇`` and ``||d̂ − f||² = d̂² − 2 d̂ f + f²``."""
    ids = enc.tokenize([text]).input_ids[0].tolist()
    table = enc.word_embeddings.weight.double().numpy()
    x, xb = table[ids], table[baseline_ids]
    w = enc.W.double().numpy()
    codes = enc.quantizer.encode((w @ x.sum(0))[None])[0]
    dhat = np.abs(enc.quantizer.decode(codes[None])[0].astype(np.float64).reshape(-1))
    size_x, size_b = np.abs(x).sum(0), np.abs(xb).sum(0)  # |Σ_t x_t| at most, every node
    path = np.abs(w) @ np.maximum(size_x, size_b)
    block = np.repeat(np.arange(enc.m), enc.dim // enc.m)
    grad = np.zeros((enc.m, w.shape[1]))
    np.add.at(grad, block, 2 * (dhat + path)[:, None] * np.abs(w))
    attributions = (np.abs(x - xb) @ grad.T).T
    squares = (dhat + np.abs(w) @ size_x) ** 2 + (dhat + np.abs(w) @ size_b) ** 2
    gaps = np.bincount(block, weights=squares, minlength=enc.m)
    return attributions, gaps


@pytest.fixture(scope="module")
def toy() -> ToyEncoder:
    return ToyEncoder()


TEXT = "the quick brown fox jumps over the lazy dog, unbelievably"


def text_tolerance(enc: ToyEncoder, groups: list[list[int]] | None = None) -> np.ndarray:
    """:func:`model_tolerance` of each attribution of ``TEXT`` by the linear toy ``[M,
    n_tokens]``, or of each word's (its pieces' terms together) given the word groups."""
    from lexlens.analysis.attribution.words import baseline_ids

    ids = enc.tokenize([TEXT]).input_ids[0].tolist()
    terms, _ = toy_ig_terms(enc, TEXT, baseline_ids(ids, enc.tokenizer))
    if groups is not None:
        terms = np.stack([terms[:, g].sum(1) for g in groups], axis=1)
    return model_tolerance(terms, axis=())


def test_linear_toy_matches_the_closed_form_at_any_step_count(toy):
    from lexlens.analysis.attribution.ig import attribute_texts
    from lexlens.analysis.attribution.words import baseline_ids

    ids = toy.tokenize([TEXT]).input_ids[0].tolist()
    expected, gap = toy_ig(toy, TEXT, baseline_ids(ids, toy.tokenizer))
    terms, gap_terms = toy_ig_terms(toy, TEXT, baseline_ids(ids, toy.tokenizer))
    for steps, method in ((2, "gausslegendre"), (7, "gausslegendre"), (3, "clenshaw-curtis")):
        (a,) = attribute_texts(toy, [TEXT], steps=steps, method=method)
        assert (np.abs(a.token_attributions - expected) <= model_tolerance(terms, axis=())).all()
        assert (np.abs(a.target_gap - gap) <= model_tolerance(gap_terms, axis=())).all()
        # float32 arithmetic: completeness holds to rounding.
        assert np.abs(a.delta).max() < 1e-5 * max(1.0, np.abs(gap).max()) * 10 and a.converged
    # Adaptive: the first Clenshaw–Curtis level is already exact.
    (a,) = attribute_texts(toy, [TEXT])
    assert a.steps == 9 and a.method == "clenshaw-curtis" and a.converged


def test_tanh_toy_adaptive_refines_until_the_tolerance():
    from lexlens.analysis.attribution.ig import attribute_texts
    from lexlens.analysis.attribution.words import baseline_ids

    enc = ToyEncoder(steep=1.5)
    ids = enc.tokenize([TEXT]).input_ids[0].tolist()
    expected, gap = toy_ig(enc, TEXT, baseline_ids(ids, enc.tokenizer))
    (coarse,) = attribute_texts(enc, [TEXT], steps=3, method="clenshaw-curtis")
    (a,) = attribute_texts(enc, [TEXT], tolerance=1e-4)
    floor = np.abs(gap).mean()
    # The coarse rule misses; the adaptive one went further and meets its promise.
    assert np.max(np.abs(coarse.delta) / np.maximum(np.abs(gap), floor)) > 1e-4
    assert a.steps > 9 and a.converged
    assert np.all(np.abs(a.delta) <= 1e-4 * np.maximum(np.abs(gap), floor) + 1e-7)
    scale = np.abs(expected).max()
    np.testing.assert_allclose(a.token_attributions, expected, atol=2e-3 * scale)
    # ... and the level before it (half the nodes) did not.
    (before,) = attribute_texts(enc, [TEXT], steps=(a.steps - 1) // 2 + 1, method="clenshaw-curtis")
    assert np.any(np.abs(before.delta) > 1e-4 * np.maximum(np.abs(gap), floor))


def test_stop_words_keep_their_embedding_and_get_zero(toy):
    from lexlens.analysis.attribution.ig import attribute_texts

    (a,) = attribute_texts(toy, [TEXT], steps=2)
    base = dict(zip(range(len(a.tokens)), a.baseline_tokens, strict=True))
    for j, (tok, b) in enumerate(zip(a.tokens, a.baseline_tokens, strict=True)):
        if tok in {"the", "over", "[CLS]", "[SEP]"}:
            assert b == tok and np.all(a.token_attributions[:, j] == 0.0), (tok, base[j])
        elif tok in {"quick", "fox", ",", "un", "##bel"}:
            assert b == "[UNK]", tok
    # Word pieces of one word ("unbelievably") share their fate and sum into the word.
    w = a.words.index("unbelievably")
    idx = a.word_groups[w]
    assert len(idx) > 1
    np.testing.assert_allclose(a.attributions[:, w], a.token_attributions[:, idx].sum(1))


def test_selected_subvectors_and_globalt(toy):
    from lexlens.analysis.attribution.ig import attribute_texts
    from lexlens.analysis.attribution.subvector import randt_attributions

    (full,) = attribute_texts(toy, [TEXT], steps=4)
    (part,) = attribute_texts(toy, [TEXT], steps=4, subvectors=[3, 1])
    assert part.subvectors == [3, 1] and part.attributions.shape[0] == 2
    words = text_tolerance(toy, full.word_groups)  # [M, n_words]
    assert (np.abs(part.attributions[0] - full.attributions[3]) <= words[3]).all()
    globalt = np.abs(part.global_attributions - full.global_attributions)
    assert (globalt <= words.sum(0)).all()
    np.testing.assert_allclose(full.global_attributions, full.attributions.sum(0), atol=1e-12)
    rand = randt_attributions(full, seed=3)
    assert rand.shape == full.attributions.shape
    with pytest.raises(InputError, match="all M"):
        randt_attributions(part)


def test_chunks_of_any_size_give_the_same_numbers(toy):
    from lexlens.analysis.attribution.ig import attribute_texts

    (whole,) = attribute_texts(toy, [TEXT], steps=33, method="clenshaw-curtis")
    (tiny,) = attribute_texts(toy, [TEXT], steps=33, method="clenshaw-curtis", memory_budget=1)
    difference = np.abs(tiny.token_attributions - whole.token_attributions)
    assert (difference <= text_tolerance(toy)).all()


def test_progress_is_monotone_per_text_and_subvector(toy):
    from lexlens.analysis.attribution.ig import attribute_texts

    seen: list[tuple[float, str]] = []
    attribute_texts(toy, [TEXT, "a dog"], progress=lambda f, m: seen.append((f, m)))
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert any("text 2/2" in m and "sub-vector 4/4" in m for _, m in seen)
    assert any("text 1/2" in m and "sub-vector 1/4" in m for _, m in seen)


def test_ig_thread_count_is_set_and_restored(toy, monkeypatch):
    from lexlens.analysis.attribution.ig import attribute_texts

    before = torch.get_num_threads()
    seen: list[int] = []
    monkeypatch.setenv("LEXLENS_THREADS", "1")
    attribute_texts(
        toy, [TEXT], steps=2, progress=lambda f, m: seen.append(torch.get_num_threads())
    )
    assert set(seen) == {1} and torch.get_num_threads() == before
    monkeypatch.setenv("LEXLENS_THREADS", "many")
    with pytest.raises(InputError, match="LEXLENS_THREADS"):
        attribute_texts(toy, [TEXT], steps=2)
    assert torch.get_num_threads() == before


def test_quadrature_rules():
    from lexlens.analysis.attribution.quadrature import quadrature

    for n in (3, 9, 17):
        a, w = quadrature(n, "clenshaw-curtis")
        assert a[0] == 0 and a[-1] == pytest.approx(1) and w.sum() == pytest.approx(1)
        assert (w * a ** (n - 1)).sum() == pytest.approx(1 / n)  # exact up to degree n − 1
    a9, _ = quadrature(9, "clenshaw-curtis")
    a17, _ = quadrature(17, "clenshaw-curtis")
    np.testing.assert_allclose(a17[0::2], a9, atol=1e-15)  # nested
    a, w = quadrature(5, "gausslegendre")
    assert (w * a**9).sum() == pytest.approx(1 / 10)
    with pytest.raises(InputError, match="odd"):
        quadrature(8, "clenshaw-curtis")


def test_bad_requests_fail_before_any_work(toy):
    """IG's own entry refuses an empty text and an even Clenshaw–Curtis rule (every wrong
    option of ``attribute`` is refused in tests/attribution/test_api_checks.py)."""
    from lexlens.analysis.attribution.ig import attribute_texts

    with pytest.raises(InputError, match="empty"):
        attribute_texts(toy, ["  "])
    with pytest.raises(InputError, match="odd"):
        attribute_texts(toy, [TEXT], steps=8, method="clenshaw-curtis")


def test_silent_wrong_ig_words_follow_the_one_word_piece_rule(toy):
    """IG's words are the library's words (core.words): pieces merged at ``##``, the frame
    tokens dropped (the baseline keeps them, so they carry exactly 0), and an input's
    ``[UNK]`` or ``[MASK]`` kept as a word of its own (it stands where the text had
    something, and under the ``[PAD]`` baseline it carries attribution)."""
    from lexlens.analysis.attribution.ig import attribute_texts
    from lexlens.analysis.core.words import group_word_pieces, input_words

    text = "The giraffe's neck \N{GIRAFFE FACE} stands [MASK] tall, unbelievably"
    by_hand = [
        "the",
        "giraffe",
        "'",
        "s",
        "neck",
        "[UNK]",
        "stands",
        "[MASK]",
        "tall",
        ",",
        "unbelievably",
    ]
    for baseline in ("unk", "pad"):
        (a,) = attribute_texts(toy, [text], steps=2, baseline=baseline)
        assert (a.tokens[0], a.tokens[-1]) == ("[CLS]", "[SEP]") and a.words == by_hand
        assert (a.words, a.word_groups) == group_word_pieces(a.tokens)
        assert input_words(a.tokens) == set(by_hand) - {"[UNK]", "[MASK]"}
        # Nothing is lost by dropping the frame: the words sum to every token.
        np.testing.assert_allclose(
            a.attributions.sum(1), a.token_attributions.sum(1), rtol=1e-6, atol=1e-9
        )
        unk = a.token_attributions[:, a.tokens.index("[UNK]")]
        assert np.all(unk == 0.0) if baseline == "unk" else np.any(unk != 0.0)


class _CountingToy(ToyEncoder):
    """The toy encoder, recording how many sequences each forward pass takes."""

    def forward_embeds(self, inputs_embeds: torch.Tensor, attention_mask: torch.Tensor):
        self.rows.append(int(inputs_embeds.shape[0]))
        return super().forward_embeds(inputs_embeds, attention_mask)


def test_silent_wrong_batch_size_is_the_interpolated_inputs_per_forward_pass():
    """``batch_size`` sets how many IG nodes go through the model at once (7 nodes in
    chunks of 3: 3, 3, 1); the attributions do not depend on it."""
    from lexlens.analysis.attribution.ig import attribute_texts

    enc = _CountingToy()
    enc.rows = []
    (whole,) = attribute_texts(enc, [TEXT], steps=7)
    assert max(enc.rows) == 7  # the default: every node fits the memory budget at once
    enc.rows = []
    (chunked,) = attribute_texts(enc, [TEXT], steps=7, batch_size=3)
    assert max(enc.rows) == 3 and enc.rows.count(3) == 2 and 1 in enc.rows
    difference = np.abs(chunked.token_attributions - whole.token_attributions)
    assert (difference <= text_tolerance(enc)).all()
