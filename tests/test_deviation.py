"""Exact@k, Semantic@k and FLOPs against hand-computed and brute-force references."""

from __future__ import annotations

import json
from itertools import product

import numpy as np
import pytest

from lexlens.analysis.deviation import StaticEmbeddings, deviation, flops
from lexlens.models import InputError

VOCAB = ["[CLS]", "cat", "dog", "book", "car", "[unused0]"]


def _static() -> StaticEmbeddings:
    # cat and dog are close (cos 0.8), book and car orthogonal to everything else.
    table = np.array(
        [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0.8, 0.6, 0], [0, 0, 0, 1], [0, 0, 0, 0.0], [1, 1, 1, 1]],
        dtype=np.float32,
    )
    table[4] = [0.6, 0, 0, 0.8]  # car: cos 0.8 with book
    return StaticEmbeddings.from_table(table, VOCAB)


def test_exact_and_semantic_by_hand():
    weights = np.array([9.0, 3.0, 2.0, 0.5, 1.0, 8.0], dtype=np.float32)
    # top-3 without special tokens: cat (3), dog (2), car (1); caption tokens: cat, book
    dev = deviation(weights, VOCAB, ["cat", "book"], _static(), k=3)
    assert dev.top_terms == ["cat", "dog", "car"]
    assert dev.exact == pytest.approx(1 / 3)
    # cat→cat 1.0, dog→cat 0.8, car→book 0.8
    assert dev.semantic == pytest.approx((1.0 + 0.8 + 0.8) / 3, abs=1e-6)


def test_fewer_positive_terms_than_k_count_as_misses():
    weights = np.array([0, 1.0, 0, 0, 0, 0], dtype=np.float32)
    dev = deviation(weights, VOCAB, ["cat"], _static(), k=4)
    assert dev.exact == pytest.approx(0.25) and dev.semantic == pytest.approx(0.25)


def test_flops_equals_mean_pairwise_coactivation():
    rng = np.random.default_rng(0)
    a = rng.random((7, 12)) * (rng.random((7, 12)) < 0.3)
    b = rng.random((5, 12)) * (rng.random((5, 12)) < 0.5)
    brute = np.mean([np.sum((x > 0) & (y > 0)) for x, y in product(a, b)])
    assert flops(a, b) == pytest.approx(brute)
    assert flops(a) == pytest.approx(np.mean([np.sum((x > 0) & (y > 0)) for x, y in product(a, a)]))


def test_glove_file(tmp_path):
    good = tmp_path / "glove.txt"
    good.write_text("cat 1 0\ndog 0.6 0.8\n")
    static = StaticEmbeddings.from_glove(good)
    assert static.has("dog") and static.vectors.shape == (2, 2)
    bad = tmp_path / "bad.txt"
    bad.write_text("cat 1 0\ndog 1\n")
    with pytest.raises(InputError, match="bad.txt:2"):
        StaticEmbeddings.from_glove(bad)


def test_deviation_cli_on_sample_captions(cli):
    proc = cli("deviation", "--encoder", "splade-tiny", "--captions", "data/captions.txt", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["n"] == 10 and result["k"] == 20
    assert 0 < result["exact_at_k"] <= 1 and result["exact_at_k"] < result["semantic_at_k"] <= 1
    assert result["flops"] > 0
    first = result["per_caption"][0]
    assert "cat" in first["top_terms"] and "cat" in first["caption_tokens"]


def test_deviation_cli_bad_inputs(cli, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    proc = cli("deviation", "--encoder", "splade-tiny", "--captions", str(empty))
    assert proc.returncode == 2 and "holds no texts" in proc.stderr
    csv = tmp_path / "c.csv"
    csv.write_text('caption\n"a cat\n')
    proc = cli("deviation", "--encoder", "splade-tiny", "--captions", str(csv))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
