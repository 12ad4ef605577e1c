"""``lexlens attribute`` and ``lexlens mot-eval`` end to end (console script, real models)."""

from __future__ import annotations

import json

import pytest


@pytest.fixture(scope="module")
def small_pq_dir(tmp_path_factory):
    """A saved dense+PQ directory (M=12, K=4): no fit on the default corpus needed."""
    from lexlens.models.dense import DensePQEncoder, default_corpus

    path = tmp_path_factory.mktemp("pq12")
    enc = DensePQEncoder.packaged_base("cpu").fit_codebooks(
        default_corpus()[:8], 12, 4, cache=False
    )
    enc.save(path)
    return path


def test_attribute_json(cli, small_pq_dir):
    res = cli(
        "attribute",
        "--encoder",
        str(small_pq_dir),
        "--text",
        "a cat <b>naps</b>",
        "--steps",
        "2",
        "--json",
    )
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["tokens"][0] == "[CLS]" and "<" in out["tokens"]
    assert out["subvectors"] == list(range(12)) and len(out["attributions"]) == 12
    assert len(out["attributions"][0]) == len(out["tokens"]) and len(out["delta"]) == 12


def test_mot_eval_and_bad_corpora(cli, small_pq_dir, tmp_path):
    from lexlens.models.dense import default_corpus

    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(default_corpus()[:6]) + "\n")
    res = cli(
        "mot-eval",
        "--encoder",
        str(small_pq_dir),
        "--corpus",
        str(corpus),
        "--subvectors",
        "12",
        "--k",
        "4",
        "--steps",
        "2",
        "--limit",
        "2",
        "--json",
        "--out",
        str(tmp_path / "out"),
    )
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert set(out["table"]["12"]) >= {
        "Tail",
        "Rand",
        "Head",
        "IDF",
        "TF",
        "TF-IDF",
        "RandT",
        "GlobalT",
        "MoT",
    }
    assert (tmp_path / "out" / "mot.csv").exists() and (tmp_path / "out" / "mot_tests.csv").exists()
    bad = tmp_path / "bad.csv"
    bad.write_text('text\n"unterminated\n')
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    for path in (bad, empty):
        res = cli("mot-eval", "--encoder", str(small_pq_dir), "--corpus", str(path))
        assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
        assert "Traceback" not in res.stderr
