"""``lexlens deviation`` in-process on real captions with splade-tiny, against references
computed from the encoder's own outputs."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pytest

from lexlens.analysis.core.vocabulary import is_special_token
from tests.helpers import close_to

CAPTIONS = "data/captions.txt"


@pytest.fixture(scope="module")
def sample(splade):
    """The sample captions' V(x) rows straight from the encoder (no analysis code)."""
    texts = [t for t in Path(CAPTIONS).read_text(encoding="utf-8").splitlines() if t.strip()]
    encodings = splade.encode_texts(texts, keep_units=False)
    return texts, np.stack([e.weights for e in encodings]), encodings


def test_cli_reports_positive_terms_cap_and_flops_without_self_pairs(cli, splade, sample):
    texts, weights, encodings = sample
    proc = cli("deviation", "--encoder", "splade-tiny", "--captions", CAPTIONS, "--json")
    assert proc.returncode == 0, proc.stderr
    doc = proc.json()
    caps = doc["captions"]
    assert doc["k"] == 20 and doc["gate_k"] == 768 and doc["denominator"] == "k"
    assert caps["n"] == len(texts) == 10 and caps["n_skipped"] == 0
    # Positive terms: non-special dimensions with V > 0 (the gate at 768 keeps them all).
    special = np.array([is_special_token(t) for t in splade.vocab])
    positive = ((weights > 0) & ~special).sum(axis=1)
    rows = caps["rows"]
    assert [r["positive_terms"] for r in rows] == positive.tolist()
    assert [r["cap"] for r in rows] == pytest.approx(np.minimum(positive, 20) / 20)
    assert caps["positive_terms"]["below_k"] == int((positive < 20).sum())
    assert caps["positive_terms"]["cap_exact_at_k"] == pytest.approx(
        np.minimum(positive, 20).mean() / 20
    )
    # Every Exact@20 is at most its cap; the 'active' mean is the mean of matches/min(k, pos).
    assert all(r["exact_at_k"] <= r["cap"] + 1e-12 for r in rows)
    matches = np.array([r["matches"] for r in rows])
    assert caps["by_denominator"]["k"]["exact_at_k"] == pytest.approx((matches / 20).mean())
    assert caps["by_denominator"]["active"]["exact_at_k"] == pytest.approx(
        (matches / np.maximum(1, np.minimum(positive, 20))).mean()
    )
    # FLOPs: brute force over every ordered pair of different captions, exact != 0.
    active = weights != 0
    n = len(texts)
    pairs = [int((active[i] & active[j]).sum()) for i in range(n) for j in range(n) if i != j]
    assert caps["flops"] == pytest.approx(np.mean(pairs), rel=1e-12)
    with_self = [int((active[i] & active[j]).sum()) for i in range(n) for j in range(n)]
    assert caps["flops_with_self_pairs"] == pytest.approx(np.mean(with_self), rel=1e-12)
    assert caps["mean_active_dims"] == pytest.approx(active.sum(axis=1).mean())
    # Each caption's tokens and its top term.
    first = rows[0]
    assert first["caption_tokens"] == ["a", "cat", "sleeping", "on", "book"]
    assert first["top_terms"][0] == splade.vocab[int(np.argmax(np.where(special, 0, weights[0])))]
    # Vocabulary statistics come along: mean weight of the top term over the 10 captions.
    top = caps["vocabulary"]["top_terms"][0]
    scales = weights.max(axis=1) / len(weights)  # each weight's scale: its vector's largest
    assert top["mean_weight"] == close_to(weights[:, top["index"]].mean(), terms=scales)
    assert any("fewer than 20 positive terms" in note for note in doc["notes"])


def test_cli_denominator_active_and_text_output(cli):
    proc = cli(
        "deviation", "--encoder", "splade-tiny", "--captions", CAPTIONS, "--denominator", "active"
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "denominator active" in out and "positive" in out and "cap" in out
    from lexlens.analysis.deviation.flops import FLOPS_LABEL, PAIRS_LABEL

    assert FLOPS_LABEL in out and PAIRS_LABEL in out  # both numbers, each named
    doc = cli(
        "deviation",
        "--encoder",
        "splade-tiny",
        "--captions",
        CAPTIONS,
        "--json",
        "--k",
        "5",
        "--denominator",
        "active",
    ).json()
    caps = doc["captions"]
    assert caps["exact_at_k"] == caps["by_denominator"]["active"]["exact_at_k"]
    assert all(r["denominator"] == min(5, r["positive_terms"]) for r in caps["rows"])


def test_emoji_only_caption_is_skipped_not_fatal(cli, tmp_path):
    path = tmp_path / "mixed.txt"
    path.write_text("a cat sleeping on a book\n😀😀😀\ntwo dogs running on the beach\n")
    proc = cli("deviation", "--encoder", "splade-tiny", "--captions", path, "--json")
    assert proc.returncode == 0, proc.stderr
    doc = proc.json()
    caps = doc["captions"]
    assert caps["n_measured"] == 2 and caps["n_skipped"] == 1 and caps["n"] == 3
    assert [r["text"] for r in caps["rows"]] == [
        "a cat sleeping on a book",
        "two dogs running on the beach",
    ]
    assert doc["captions"]["skipped"][0]["text"] == "😀😀😀"
    assert any("1 caption skipped" in n for n in doc["notes"])
    only = tmp_path / "only.txt"
    only.write_text("🙂\n")
    proc = cli("deviation", "--encoder", "splade-tiny", "--captions", only)
    assert proc.returncode == 2 and "no caption has a token" in proc.stderr


def test_inputs_checked_before_the_encoder_loads(cli, tmp_path):
    # A missing encoder would fail at load: the input errors must come first.
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    for args, message in [
        (["--captions", empty], "empty.txt: holds no captions"),
        (["--captions", tmp_path / "nope.txt"], "nope.txt: file not found"),
        (["--captions", CAPTIONS, "--k", "0"], "--k must be an integer from 1 to 1,000, not 0"),
        (["--captions", CAPTIONS, "--k", "1001"], "--k must be an integer from 1 to 1,000"),
        (["--captions", CAPTIONS, "--gate-k", "-5"], "--gate-k must be -1"),
        (["--captions", CAPTIONS, "--max-rows", "-1"], "--max-rows must be an integer ≥ 0"),
        (["--captions", CAPTIONS, "--batch-size", "0"], "--batch-size must be an integer"),
        (["--captions", CAPTIONS, "--denominator", "n"], "--denominator must be one of k, active"),
        (["--captions", CAPTIONS, "--rows", "5"], "--rows"),
        (["--captions", CAPTIONS, "--glove", tmp_path / "g.txt"], "g.txt: file not found"),
    ]:
        proc = cli("deviation", "--encoder", "no-such-encoder", *args)
        assert proc.returncode == 2, args
        assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    bad = tmp_path / "c.csv"
    bad.write_text('caption\n"a cat\n')
    proc = cli("deviation", "--encoder", "no-such-encoder", "--captions", bad)
    assert proc.returncode == 2 and "c.csv" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_out_files_are_formula_safe_and_match_json(cli, tmp_path):
    captions = tmp_path / "caps.csv"
    captions.write_text('id,text\nx1,"=HYPERLINK(""http://e.x"",""cat"")"\nx2,a red train\n')
    out = tmp_path / "out"
    proc = cli(
        "deviation", "--encoder", "splade-tiny", "--captions", captions, "--out", out, "--json"
    )
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == [
        "captions.csv",
        "deviation.json",
        "vocabulary.csv",
    ]
    assert (out / "deviation.json").read_text() == proc.stdout
    rows = list(csv.DictReader(io.StringIO((out / "captions.csv").read_text())))
    assert rows[0]["text"].startswith("'=HYPERLINK") and rows[0]["id"] == "x1"
    assert "NaN" not in proc.stdout and "Infinity" not in proc.stdout


def test_glove_file_replaces_f_enc(cli, tmp_path):
    glove = tmp_path / "tiny_glove.txt"
    glove.write_text("cat 1 0 0\ncats 0.9 0.1 0\nbook 0 1 0\nsleeping 0 0 1\nsleep 0 0.1 0.9\n")
    doc = cli(
        "deviation",
        "--encoder",
        "splade-tiny",
        "--captions",
        CAPTIONS,
        "--glove",
        glove,
        "--json",
        "--k",
        "5",
    ).json()
    assert doc["f_enc"] == "GloVe file tiny_glove.txt"
    first = doc["captions"]["rows"][0]
    # Top terms outside the 5 GloVe words have no vector (add 0 to Semantic@k).
    no_vec = sum(t not in {"cat", "cats", "book", "sleeping", "sleep"} for t in first["top_terms"])
    assert first["no_vector"] == no_vec
