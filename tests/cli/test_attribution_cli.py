"""``lexlens attribute`` and ``lexlens mot-eval`` in-process: JSON = the use case's to_dict(),
files through the shared writers, one-line errors before any work."""

from __future__ import annotations

import json

import pytest

from lexlens.analysis.core.outputs import json_text


@pytest.fixture(scope="module")
def small_dir(tmp_path_factory):
    """A saved dense+PQ folder: MiniLM with M=4, K=2 codebooks (5 backward passes per node)."""
    from lexlens.models.dense import DensePQEncoder
    from lexlens.models.packaged import default_corpus

    path = tmp_path_factory.mktemp("pq4")
    enc = DensePQEncoder.packaged_base("cpu").fit_codebooks(default_corpus()[:8], 4, 2, cache=False)
    enc.save(path)
    return path


@pytest.fixture(scope="module")
def small(small_dir):
    from lexlens.models import load_encoder

    return load_encoder(str(small_dir), device="cpu")


def test_attribute_json_is_the_use_case_result(cli, small, small_dir, tmp_path):
    from lexlens.analysis.attribution.attribution import attribute

    text = "a cat <b>naps</b>"
    res = cli("attribute", "--encoder", small_dir, "--text", text, "--steps", "3", "--json")
    assert res.returncode == 0, res.stderr
    assert res.stdout == json_text(attribute(small, text, steps=3)) + "\n"
    out = res.json()
    (t,) = out["texts"]
    assert t["tokens"][0] == "[CLS]" and "<" in t["tokens"] and out["m"] == 4
    assert t["subvectors"] == list(range(4)) and len(t["token_attributions"]) == 4
    assert len(t["token_attributions"][0]) == len(t["tokens"]) and len(t["delta"]) == 4
    assert out["settings"]["steps"] == 3 and t["method"] == "gausslegendre"

    corpus = tmp_path / "c.csv"
    corpus.write_text('text\n"=HYPERLINK(""x"") cat"\nrockets\n', encoding="utf-8")
    res = cli(
        "attribute",
        "--encoder",
        small_dir,
        "--corpus",
        corpus,
        "--steps",
        "2",
        "--out",
        tmp_path / "out",
    )
    assert res.returncode == 0, res.stderr
    written = {p.name for p in (tmp_path / "out").iterdir()}
    assert written == {"report.html", "report.json", "attributions.csv"}
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["meta"] == {"source": "c.csv", "texts": 2}
    assert [t["text"] for t in report["attribution"]["texts"]][1] == "rockets"
    cells = (tmp_path / "out" / "attributions.csv").read_text()
    assert ",'=" in cells and ",=" not in cells  # formula-safe


def _one_line_error(res) -> str:
    assert res.returncode == 2, (res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    return lines[0]


def test_errors_are_one_line_and_come_before_any_work(cli, tmp_path):
    a_file = tmp_path / "file.txt"
    a_file.write_text("a text\n")
    bad = tmp_path / "bad.csv"
    bad.write_text('text\n"unterminated\n')
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    two = tmp_path / "two.txt"
    two.write_text("a text\nanother text\n")
    cases = [
        (["attribute", "--encoder", "minilm-pq", "--text", "x", "--steps", "1"], "--steps"),
        (["attribute", "--encoder", "minilm-pq", "--text", "x", "--steps", "many"], "--steps"),
        (["attribute", "--encoder", "minilm-pq", "--text", "   "], "empty"),
        (["attribute", "--encoder", "splade-tiny", "--text", "x", "--steps", "2"], "needs an"),
        (["attribute", "--encoder", "minilm-pq", "--text", "x", "--m", "7"], "--m=7: M=7"),
        (["attribute", "--encoder", "minilm-pq", "--text", "x", "--tolerance", "2"], "tolerance"),
        (
            [
                "attribute",
                "--encoder",
                "minilm-pq",
                "--text",
                "x",
                "--steps",
                "8",
                "--method",
                "clenshaw-curtis",
            ],
            "--steps must be odd",
        ),
        # The old spelling of M (--subvectors) is refused, never read as another option.
        (
            ["attribute", "--encoder", "minilm-pq", "--text", "x", "--subvectors", "12"],
            "--subvectors",
        ),
        (
            ["mot-eval", "--encoder", "minilm-pq", "--corpus", a_file, "--subvectors", "12"],
            "--subvectors",
        ),
        (
            ["mot-eval", "--encoder", "minilm-pq", "--corpus", two, "--m-values", "12,7"],
            "--m-values holds 7",
        ),
        (
            ["mot-eval", "--encoder", "minilm-pq", "--corpus", a_file, "--m-values", "12,x"],
            "--m-values must be",
        ),
        # --out is checked before the encoder is even loaded (the name is bogus here).
        (["attribute", "--encoder", "nope", "--text", "x", "--out", a_file], "not a folder"),
        (["mot-eval", "--encoder", "minilm-pq", "--corpus", a_file, "--seed", "-1"], "seed"),
        (["mot-eval", "--encoder", "minilm-pq", "--corpus", a_file], "two texts"),
        (["mot-eval", "--encoder", "minilm-pq", "--corpus", bad], "bad.csv"),
        (["mot-eval", "--encoder", "minilm-pq", "--corpus", empty], "empty.txt"),
        (["mot-eval", "--encoder", "nope", "--corpus", bad, "--out", a_file], "bad.csv"),
    ]
    for args, needle in cases:
        assert needle in _one_line_error(cli(*args)), args


def test_mot_eval_json_and_files(cli, small, small_dir, tmp_path):
    from lexlens.analysis.attribution.mot import mot_evaluate

    texts = ["a cat sleeps on a mat .", "rockets launch"]
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(texts) + "\n")
    res = cli(
        "mot-eval",
        "--encoder",
        small_dir,
        "--corpus",
        corpus,
        "--own-codebook",
        "--steps",
        "2",
        "--json",
        "--out",
        tmp_path / "out",
    )
    assert res.returncode == 0, res.stderr
    expected = mot_evaluate(small, texts, own_codebook=True, steps=2)
    assert res.stdout == json_text(expected) + "\n"
    out = res.json()
    assert set(out["table"]["4"]) >= {"Tail", "Rand", "Head", "IDF", "TF", "TF-IDF", "MoT"}
    assert out["settings"]["steps"] == 2 and len(out["per_m"]["4"]["delta"]) == 2
    names = {p.name for p in (tmp_path / "out").iterdir()}
    assert names == {
        "mot.json",
        "mot.csv",
        "mot_tests.csv",
        "mot_pairs.csv",
        "mot_convergence.csv",
        "mot_docs_M4.csv",
        "mot_deltas_M4.csv",
        "report.html",
    }
    assert json.loads((tmp_path / "out" / "mot.json").read_text()) == out
    html = (tmp_path / "out" / "report.html").read_text()
    assert "M=4" in html and "q (FDR)" in html


@pytest.mark.parametrize("command", ["report", "mot-eval"])
def test_unbounded_mot_on_one_text_is_refused_before_the_model_loads(
    cli, monkeypatch, tmp_path, command
):
    """The masking evaluation on one text is refused before the encoder loads: the command
    hands the analysis the encoder's spec, not a loaded model (it loaded minilm-pq first,
    19–32 s, then refused)."""
    from lexlens.analysis.core import arguments
    from lexlens.app.cli import common
    from lexlens.models import registry

    one = tmp_path / "one.txt"
    one.write_text("espresso is a strong coffee\n")
    loaded: list[str] = []
    real = registry.load_encoder

    def spy(spec, *args, **kwargs):
        loaded.append(spec)
        return real(spec, *args, **kwargs)

    monkeypatch.setattr(registry, "load_encoder", spy)
    monkeypatch.setattr(common, "load_encoder", spy, raising=False)  # a command's own import
    monkeypatch.setattr(arguments, "load_encoder", spy)  # the analysis' own import
    extra = ["--mot"] if command == "report" else []
    run = cli(command, "--encoder", "minilm-pq", "--corpus", one, *extra, "--out", tmp_path / "o")
    assert "two texts" in _one_line_error(run)
    assert loaded == []
