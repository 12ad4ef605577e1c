"""Reports: escaping, every number in the JSON/CSV equal to its input, files, the page."""

from __future__ import annotations

import base64
import csv
import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from lexlens.analysis.attribution import SubvectorAttribution
from lexlens.analysis.report import (
    TermsItem,
    attribution_report_files,
    render_attribution_html,
    write_attribution_report,
    write_terms_report,
)

EVIL = "<script>alert(1)</script>"


def make_attr(
    words: list[str], m: int = 6, *, seed: int = 0, subvectors: list[int] | None = None
) -> SubvectorAttribution:
    """A SubvectorAttribution with computed numbers (the renderer is under test here)."""
    rng = np.random.default_rng(seed)
    sel = list(range(m)) if subvectors is None else subvectors
    tokens = ["[CLS]", *words, "[SEP]"]
    tok = rng.normal(size=(len(sel), len(tokens)))
    tok[:, [0, -1]] = 0.0
    word_attr = tok[:, 1:-1].copy()
    gap = word_attr.sum(1) + rng.normal(scale=1e-3, size=len(sel))
    return SubvectorAttribution(
        text=" ".join(words),
        tokens=tokens,
        words=list(words),
        token_attributions=tok,
        attributions=word_attr,
        delta=word_attr.sum(1) - gap,
        codes=rng.integers(0, 256, size=m),
        global_attributions=rng.normal(size=len(words)),
        global_delta=float(rng.normal(scale=1e-3)),
        steps=16,
        truncated=False,
        subvectors=sel,
        target_gap=gap,
    )


class _Collect(HTMLParser):
    """Tags, attributes and visible text of an HTML document, as a browser parses them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def parse(doc: str) -> _Collect:
    p = _Collect()
    p.feed(doc)
    return p


# ----------------------------------------------------------------------------- escaping


def test_user_strings_are_escaped_everywhere() -> None:
    words = ["a", EVIL, 'say "hi"', "&amp;", "cat"]
    attr = make_attr(words)
    attr.text = f"a {EVIL} text & more"
    doc = render_attribution_html(
        [attr],
        encoder_name=f"enc{EVIL}",
        meta={f"file{EVIL}": f"corpus{EVIL}.txt"},
        mot_table=pd.DataFrame({12: [1.0]}, index=pd.Index([EVIL], name="ranking")),
    )
    p = parse(doc)
    assert not [t for t, _ in p.tags if t in {"script", "link", "iframe", "object"}]
    # Not one raw "<script" anywhere: the texts only appear escaped ...
    assert "<script" not in doc.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in doc
    # ... and a parser (the browser) gets the literal string back as text.
    text = "".join(p.text)
    assert f"a {EVIL} text & more" in text
    assert f"enc{EVIL}" in text and f"corpus{EVIL}.txt" in text
    # Attribute values (tooltips) keep quotes inside the attribute.
    titles = [a["title"] for t, a in p.tags if t == "td" and "title" in a]
    assert any(f"{EVIL}: " in s for s in titles)
    assert any('say "hi"' in s for s in titles)
    assert any("&amp;" in s for s in titles)  # the literal token "&amp;", not "&"


def test_report_is_self_contained() -> None:
    doc = render_attribution_html([make_attr(["one", "two"])], encoder_name="minilm-pq")
    p = parse(doc)
    for _, attrs in p.tags:
        for key in ("src", "href"):
            value = attrs.get(key)
            assert value is None or value.startswith("data:"), value
    assert "@import" not in doc and "url(" not in doc


# ------------------------------------------------------------------------ the heatmap


def test_heatmap_rows_columns_and_colours() -> None:
    words = ["the", "cat", "sat"]
    attr = make_attr(words, m=4, subvectors=[1, 3])
    attr.attributions = np.array([[0.5, -0.5, 0.0], [0.25, 0.1, -0.05]])
    doc = render_attribution_html([attr], encoder_name="x")
    rows = re.findall(r'<tr class="subvector">(.*?)</tr>', doc)
    assert len(rows) == 2
    # Row headers: the sub-vector index and ITS code (codes hold all M).
    assert rows[0].startswith(f'<th>1</th><th class="num">{attr.codes[1]}</th>')
    assert rows[1].startswith(f'<th>3</th><th class="num">{attr.codes[3]}</th>')
    cells = re.findall(
        r'<td class="cell" style="background:(#[0-9a-f]{6})" title="([^"]*)"', rows[0]
    )
    assert [c for c, _ in cells] == ["#b2182b", "#2166ac", "#ffffff"]  # max red, min blue, 0 white
    assert cells[0][1] == f"sub-vector 1 · code {attr.codes[1]} · the: 0.5"
    assert len(re.findall(r'<tr class="global">', doc)) == 1
    assert doc.count('<td class="cell"') == 3 * 3  # (2 sub-vectors + GlobalT) × 3 words


def test_many_texts_are_capped_in_html_not_in_data() -> None:
    attrs = [make_attr(["w", str(i)], seed=i) for i in range(3)]
    files = attribution_report_files(attrs, encoder_name="x")
    doc = render_attribution_html(attrs, encoder_name="x", max_texts=2)
    assert doc.count('<section class="text-report"') == 2
    assert "1 more texts are in report.json" in doc
    assert len(json.loads(files["report.json"])["texts"]) == 3


# -------------------------------------------------------------- every number in the data


def _check_json_matches(payload: dict, attrs: list[SubvectorAttribution]) -> None:
    assert len(payload["texts"]) == len(attrs)
    for got, a in zip(payload["texts"], attrs, strict=True):
        assert got["text"] == a.text and got["words"] == a.words and got["tokens"] == a.tokens
        assert got["subvectors"] == a.subvectors
        assert got["codes"] == [int(c) for c in a.codes]
        np.testing.assert_array_equal(np.array(got["attributions"]), a.attributions)
        np.testing.assert_array_equal(np.array(got["token_attributions"]), a.token_attributions)
        np.testing.assert_array_equal(np.array(got["delta"]), a.delta)
        np.testing.assert_array_equal(np.array(got["target_gap"]), a.target_gap)
        np.testing.assert_array_equal(np.array(got["global_attributions"]), a.global_attributions)
        assert got["global_delta"] == a.global_delta
        np.testing.assert_allclose(got["attribution_sums"], a.attributions.sum(1), rtol=0, atol=0)
        assert got["steps"] == a.steps and got["truncated"] == a.truncated


def test_json_and_csv_hold_every_number(tmp_path: Path) -> None:
    attrs = [
        make_attr(["a", "cat", EVIL], seed=1),
        make_attr(["dog", ","], m=6, seed=2, subvectors=[5, 0]),
    ]
    mot = pd.DataFrame(
        {12: [3.08, 2.73], 24: [2.07, 1.87]}, index=pd.Index(["GlobalT", "MoT"], name="ranking")
    )
    tests = pd.DataFrame({"baseline": ["GlobalT"], "M": [12], "p_value": [1e-5]})
    paths = write_attribution_report(
        tmp_path / "out", attrs, encoder_name="minilm-pq", mot_table=mot, mot_tests=tests,
        meta={"corpus": "c.txt"},
    )  # fmt: skip
    assert set(paths) == {
        "report.html",
        "report.json",
        "attributions.csv",
        "mot.csv",
        "mot_tests.csv",
    }
    assert all(p.is_file() and p.stat().st_size > 0 for p in paths.values())

    payload = json.loads(paths["report.json"].read_text())
    assert payload["encoder"] == "minilm-pq" and payload["meta"] == {"corpus": "c.txt"}
    _check_json_matches(payload, attrs)
    assert payload["mot"]["index"] == ["GlobalT", "MoT"]
    assert payload["mot"]["data"] == [[3.08, 2.07], [2.73, 1.87]]

    with paths["attributions.csv"].open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    expected = sum((len(a.subvectors) + 1) * len(a.words) for a in attrs)
    assert len(rows) == expected
    for row in rows:
        a = attrs[int(row["text_index"])]
        w = int(row["word_index"])
        assert row["word"] == a.words[w]
        if row["subvector"] == "global":
            assert float(row["attribution"]) == a.global_attributions[w]
            assert float(row["delta"]) == a.global_delta and row["code"] == ""
        else:
            sv = int(row["subvector"])
            r = a.subvectors.index(sv)
            assert float(row["attribution"]) == a.attributions[r, w]
            assert float(row["delta"]) == a.delta[r]
            assert int(row["code"]) == a.codes[sv]

    back = pd.read_csv(paths["mot.csv"], index_col=0)
    np.testing.assert_array_equal(back.to_numpy(), mot.to_numpy())
    assert list(back.index) == ["GlobalT", "MoT"] and list(back.columns) == ["12", "24"]
    # The MoT table is in the HTML, best (lowest) value per column in bold.
    doc = paths["report.html"].read_text()
    assert "<b>2.73</b>" in doc and "<b>1.87</b>" in doc and "<b>3.08</b>" not in doc


def test_non_finite_numbers_become_null() -> None:
    attr = make_attr(["x", "y"])
    attr.attributions[0, 0] = np.nan
    files = attribution_report_files([attr], encoder_name="x")
    payload = json.loads(files["report.json"])  # strict JSON: no NaN tokens
    assert payload["texts"][0]["attributions"][0][0] is None
    assert b"NaN" not in files["report.json"]


# ------------------------------------------------------------------------ term reports


def test_terms_report_with_real_encoder(tmp_path: Path, splade) -> None:
    from lexlens.analysis.terms import top_terms

    text = f"a cat sleeping on a book {EVIL}"
    enc = splade.encode_texts([text])[0]
    terms = top_terms(enc.weights, splade.vocab, 15)
    paths = write_terms_report(
        tmp_path,
        [TermsItem(label=text, terms=terms, notes=["note & <b>"])],
        encoder_name="splade-tiny",
    )
    assert set(paths) == {"report.html", "report.json", "terms.csv"}
    doc = paths["report.html"].read_text()
    assert (
        "<script" not in doc.lower() and "&lt;script&gt;" in doc and "note &amp; &lt;b&gt;" in doc
    )
    imgs = [a for t, a in parse(doc).tags if t == "img"]
    assert len(imgs) == 1
    src = imgs[0]["src"]
    assert src.startswith("data:image/png;base64,")
    cloud = Image.open(io.BytesIO(base64.b64decode(src.split(",", 1)[1])))
    assert cloud.size[0] > 100 and np.asarray(cloud.convert("L")).std() > 5  # not blank

    payload = json.loads(paths["report.json"].read_text())
    got = payload["items"][0]["terms"]
    assert [t["token"] for t in got] == [t.token for t in terms]
    assert [t["weight"] for t in got] == [float(enc.weights[t.index]) for t in terms]
    assert "cat" in [t["token"] for t in got]
    table = pd.read_csv(paths["terms.csv"], keep_default_na=False)
    assert table["token"].tolist() == [t.token for t in terms]
    np.testing.assert_array_equal(table["weight"].to_numpy(), [float(t.weight) for t in terms])


# --------------------------------------------------------------- real attributions


@pytest.fixture(scope="module")
def minilm_pq():
    from lexlens.models import load_encoder

    return load_encoder("minilm-pq", device="cpu")


@pytest.fixture(scope="module")
def real_attr(minilm_pq):
    from lexlens.analysis.attribution import attribute_subvectors

    return attribute_subvectors(minilm_pq, f"a cat on a {EVIL} book", steps=4, subvectors=[0, 7])


def test_report_of_real_attribution(real_attr, tmp_path: Path) -> None:
    files = attribution_report_files([real_attr], encoder_name="minilm-pq")
    payload = json.loads(files["report.json"])
    _check_json_matches(payload, [real_attr])
    t = payload["texts"][0]
    # Completeness as the report states it: Σ attributions = (F(x) − F(x')) + delta.
    np.testing.assert_allclose(
        np.array(t["attribution_sums"]), np.array(t["target_gap"]) + np.array(t["delta"]), atol=1e-9
    )
    doc = files["report.html"].decode()
    assert "<script" not in doc.lower()
    assert len(re.findall(r'<tr class="subvector">', doc)) == 2


# ------------------------------------------------------------------------------ the CLI


def test_cli_report_lexical(cli, tmp_path: Path) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text(f"a cat sleeping on a book\n\n{EVIL} dogs\n", encoding="utf-8")
    res = cli("report", "--encoder", "splade-tiny", "--corpus", str(corpus),
                      "--out", str(tmp_path / "out"), "--top", "10", "--json")  # fmt: skip
    assert res.returncode == 0, res.stderr
    files = json.loads(res.stdout)["files"]
    assert set(files) == {"report.html", "report.json", "terms.csv"}
    payload = json.loads(Path(files["report.json"]).read_text())
    assert [it["label"] for it in payload["items"]] == ["a cat sleeping on a book", f"{EVIL} dogs"]
    first = {t["token"]: t["in_input"] for t in payload["items"][0]["terms"]}
    assert first["cat"] is True and first.get("cats") is False
    assert "&lt;script&gt;" in Path(files["report.html"]).read_text()


def test_cli_report_bad_input(tmp_path: Path, capsys) -> None:
    from lexlens.analysis.cli import main

    corpus = tmp_path / "c.txt"
    corpus.write_text("a text\n", encoding="utf-8")
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n", encoding="utf-8")
    bad = [
        ["--encoder", "splade-tiny", "--corpus", str(empty), "--out", str(tmp_path / "o")],
        ["--encoder", "splade-tiny", "--text", "x", "--out", str(corpus)],
        ["--encoder", "splade-tiny", "--text", "x", "--mot", "--out", str(tmp_path / "o")],
        ["--encoder", "nope", "--text", "x", "--out", str(tmp_path / "o")],
        ["--encoder", "minilm-pq", "--text", "x", "--steps", "0", "--out", str(tmp_path / "o")],
        [
            "--encoder",
            "minilm-pq",
            "--text",
            "x",
            "--subvectors",
            "7",
            "--out",
            str(tmp_path / "o"),
        ],
    ]
    for args in bad:
        assert main(["report", *args]) == 2, args
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


def test_cli_report_dense_with_mot(tmp_path: Path, capsys) -> None:
    from lexlens.analysis.cli import main  # in-process: reuses the loaded encoder (the lexical test
    # above runs the real console script)

    corpus = tmp_path / "c.txt"
    texts = [f"a cat {EVIL}", "the red car drives on the road", "a small dog barks at the mailman"]
    corpus.write_text("\n".join(texts), encoding="utf-8")
    out = tmp_path / "out"
    args = ["--corpus", str(corpus), "--steps", "2", "--mot", "--out", str(out), "--json"]
    assert main(["report", "--encoder", "minilm-pq", *args]) == 0
    files = json.loads(capsys.readouterr().out)["files"]
    assert set(files) == {
        "report.html",
        "report.json",
        "attributions.csv",
        "mot.csv",
        "mot_tests.csv",
    }
    payload = json.loads(Path(files["report.json"]).read_text())
    assert [t["text"] for t in payload["texts"]] == texts
    t = payload["texts"][0]
    assert t["steps"] == 2 and len(t["attributions"]) == payload["meta"]["M"] == 24
    assert t["words"][:2] == ["a", "cat"]
    # The masking table: the same numbers in mot.csv, the JSON and the HTML.
    mot = pd.read_csv(files["mot.csv"], index_col=0)
    assert list(mot.columns) == ["24"] and {"MoT", "GlobalT", "Tail", "(none masked)"} <= set(
        mot.index
    )
    assert payload["mot"]["index"] == list(mot.index)
    np.testing.assert_array_equal(np.array(payload["mot"]["data"], dtype=float), mot.to_numpy())
    tests = pd.read_csv(files["mot_tests.csv"])
    assert "MoT" not in set(tests["baseline"]) and len(tests) == 8  # MoT against 8 baselines
    doc = Path(files["report.html"]).read_text()
    assert "<script" not in doc.lower() and doc.count('<tr class="subvector">') == 3 * 24
    # The bold cell is the best ranking, never a reference row in parentheses.
    best = mot.drop(index=[i for i in mot.index if i.startswith("(")])["24"].idxmin()
    bold = re.findall(r'<tr><td>([^<]*)</td><td class="num"><b>', doc)
    assert bold == [best]


# ------------------------------------------------------------------- the Attribution page

MAIN = str(Path(__file__).resolve().parent.parent / "app" / "main.py")


def _attribution_page():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(MAIN, default_timeout=300)
    at.switch_page("app_pages/attribution.py")
    at.run()
    assert not at.exception and not at.error
    return at


def test_attribution_page_text_corpus_and_errors() -> None:
    at = _attribution_page()
    assert at.header[0].value == "Attribution"
    at.text_area(key="attr_text").input(f"a cat {EVIL}")
    at.number_input(key="attr_steps").set_value(2)
    at.button[0].click()  # the form's submit button
    at.run()
    assert not at.exception and not at.error
    result = at.session_state["attr_result"]
    (a,) = result["attrs"]
    assert a.words[:2] == ["a", "cat"] and a.steps == 2
    # The completeness table shows the attribution's own numbers ...
    table = at.dataframe[0].value
    np.testing.assert_allclose(table["delta"].to_numpy(), a.delta)
    np.testing.assert_allclose(table["Σ attributions"].to_numpy(), a.attributions.sum(1))
    # ... and the downloads are the report of the same numbers.
    assert [b.label for b in at.get("download_button")] == [
        "report.html", "report.json", "attributions.csv",
    ]  # fmt: skip
    _check_json_matches(json.loads(result["files"]["report.json"]), [a])
    assert "<script" not in result["files"]["report.html"].decode().lower()

    # Bad input (corpus chosen, nothing uploaded): one clear error, earlier results kept.
    at.radio(key="attr_source").set_value("Corpus file")
    at.button[0].click()
    at.run()
    assert not at.exception
    assert len(at.error) == 1 and "upload a corpus" in at.error[0].value
    assert at.session_state["attr_result"] is result
    assert at.dataframe[0].value["delta"].tolist() == table["delta"].tolist()

    # A .csv corpus with a 'text' column: the first N texts are attributed.
    corpus = b"text\nthe red car\n\na small dog barks\nignored third\n"
    at.file_uploader(key="attr_upload").set_value(("c.csv", corpus, "text/csv"))
    at.number_input(key="attr_max").set_value(2)
    at.checkbox(key="attr_mot").check()
    at.button[0].click()
    at.run()
    assert not at.exception and not at.error
    result = at.session_state["attr_result"]
    assert [x.text for x in result["attrs"]] == ["the red car", "a small dog barks"]
    # The masking table is shown and downloadable, with the same numbers.
    shown = at.dataframe[1].value
    assert "MoT" in shown.index and "GlobalT" in shown.index
    back = pd.read_csv(io.BytesIO(result["files"]["mot.csv"]), index_col=0)
    np.testing.assert_allclose(back.to_numpy(), shown.to_numpy())
    assert "mot.csv" in [b.label for b in at.get("download_button")]
