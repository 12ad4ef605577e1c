"""Reports: escaping, every number in the JSON/CSV equal to its input, files, the CLI."""

from __future__ import annotations

import base64
import csv
import io
import json
import re
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
from PIL import Image

from lexlens.analysis.attribution.attribution import AttributionResult
from lexlens.analysis.attribution.report import AttributionReport
from lexlens.analysis.attribution.report_html import render_attribution_html
from lexlens.analysis.attribution.subvector import SubvectorAttribution
from lexlens.analysis.core.outputs import write_files
from lexlens.analysis.lexical.report import terms_report
from lexlens.analysis.render.html import render_report
from tests.helpers import click_and_wait, page_result

EVIL = "<script>alert(1)</script>"


def make_attr(
    words: list[str], m: int = 6, *, seed: int = 0, subvectors: list[int] | None = None
) -> SubvectorAttribution:
    """A SubvectorAttribution with made-up numbers (the renderer is under test here)."""
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
        word_groups=[[j + 1] for j in range(len(words))],
        target_gap=gap,
    )


def make_report(attrs: list[SubvectorAttribution], meta: dict | None = None) -> AttributionReport:
    result = AttributionResult(
        encoder="minilm-pq",
        m=attrs[0].m,
        k=256,
        texts=attrs,
        settings={"steps": 16},
        notes=["a note"],
    )
    return AttributionReport(attribution=result, mot=None, meta=meta or {})


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
    attr = replace(make_attr(words), text=f"a {EVIL} text & more")
    doc = render_attribution_html(
        [attr], encoder_name=f"enc{EVIL}", meta={f"file{EVIL}": f"corpus{EVIL}.txt"}
    )
    p = parse(doc)
    assert not [t for t, _ in p.tags if t in {"script", "link", "iframe", "object"}]
    assert "<script" not in doc.lower()  # the texts only appear escaped ...
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in doc
    text = "".join(p.text)  # ... and a parser (the browser) gets the literal string back
    assert f"a {EVIL} text & more" in text
    assert f"enc{EVIL}" in text and f"corpus{EVIL}.txt" in text
    titles = [a["title"] for t, a in p.tags if t == "td" and "title" in a]
    assert any(f"{EVIL}: " in s for s in titles)
    assert any('say "hi"' in s for s in titles)
    assert any("&amp;" in s for s in titles)  # the literal token "&amp;", not "&"


def test_security_render_report_escapes_the_title_and_settings() -> None:
    """The one HTML path: every report's frame (title, settings table) is escaped too, empty
    settings are left out and the time it was generated comes last."""
    doc = render_report(
        "terms.html",
        title=f"title{EVIL}",
        meta={f"key{EVIL}": f"value{EVIL}", "empty": "", "count": 3},
        items=[],
        hidden=0,
    )
    p = parse(doc)
    assert "<script" not in doc.lower() and not [t for t, _ in p.tags if t == "script"]
    assert doc.count("&lt;script&gt;alert(1)&lt;/script&gt;") == 4  # <title>, <h1>, key, value
    rows = re.findall(r"<tr><th>(.*?)</th><td>(.*?)</td></tr>", doc)
    assert [k for k, _ in rows] == [
        f"key{EVIL}".replace("<", "&lt;").replace(">", "&gt;"),
        "count",
        "generated",
    ]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", rows[-1][1])


def test_report_is_self_contained() -> None:
    doc = render_attribution_html([make_attr(["one", "two"])], encoder_name="minilm-pq")
    for _, attrs in parse(doc).tags:
        for key in ("src", "href"):
            value = attrs.get(key)
            assert value is None or value.startswith("data:"), value
    assert "@import" not in doc and "url(" not in doc and "<style>" in doc


def test_heatmap_rows_columns_and_colours() -> None:
    words = ["the", "cat", "sat"]
    attr = make_attr(words, m=4, subvectors=[1, 3])
    attr = replace(attr, attributions=np.array([[0.5, -0.5, 0.0], [0.25, 0.1, -0.05]]))
    doc = render_attribution_html([attr], encoder_name="x")
    rows = re.findall(r'<tr class="subvector">(.*?)</tr>', doc, flags=re.S)
    assert len(rows) == 2
    assert rows[0].startswith(f'<th>1</th><th class="num">{attr.codes[1]}</th>')
    assert rows[1].startswith(f'<th>3</th><th class="num">{attr.codes[3]}</th>')
    cells = re.findall(
        r'<td class="cell" style="background:(#[0-9a-f]{6})" title="([^"]*)"', rows[0]
    )
    assert [c for c, _ in cells] == ["#b2182b", "#2166ac", "#ffffff"]  # max red, min blue, 0
    assert cells[0][1] == f"sub-vector 1 · code {attr.codes[1]} · the: 0.5"
    assert len(re.findall(r'<tr class="global">', doc)) == 1
    assert doc.count('<td class="cell"') == 3 * 3  # (2 sub-vectors + GlobalT) × 3 words


def test_many_texts_are_capped_in_html_not_in_data() -> None:
    attrs = [make_attr(["w", str(i)], seed=i) for i in range(3)]
    doc = render_attribution_html(attrs, encoder_name="x", max_texts=2)
    assert doc.count('<section class="text-report"') == 2
    assert "1 more texts are in report.json" in doc
    files = make_report(attrs).files()
    assert len(json.loads(files["report.json"])["attribution"]["texts"]) == 3


# -------------------------------------------------------------- every number in the data


def _check_json_matches(texts: list[dict], attrs: list[SubvectorAttribution]) -> None:
    assert len(texts) == len(attrs)
    for got, a in zip(texts, attrs, strict=True):
        assert got["text"] == a.text and got["words"] == a.words and got["tokens"] == a.tokens
        assert got["subvectors"] == a.subvectors and got["codes"] == [int(c) for c in a.codes]
        np.testing.assert_array_equal(np.array(got["attributions"]), a.attributions)
        np.testing.assert_array_equal(np.array(got["token_attributions"]), a.token_attributions)
        np.testing.assert_array_equal(np.array(got["delta"]), a.delta)
        np.testing.assert_array_equal(np.array(got["target_gap"]), a.target_gap)
        np.testing.assert_array_equal(np.array(got["global_attributions"]), a.global_attributions)
        assert got["global_delta"] == a.global_delta
        np.testing.assert_array_equal(got["attribution_sums"], a.attributions.sum(1))
        assert got["steps"] == a.steps and got["truncated"] == a.truncated


def test_json_and_csv_hold_every_number(tmp_path: Path) -> None:
    attrs = [
        make_attr(["a", "cat", EVIL, "=HYPERLINK(x)"], seed=1),
        make_attr(["dog", ","], m=6, seed=2, subvectors=[5, 0]),
    ]
    files = make_report(attrs, {"source": "c.txt"}).files()
    assert set(files) == {"report.html", "report.json", "attributions.csv"}
    payload = json.loads(files["report.json"])
    assert payload["kind"] == "attribution-report" and payload["meta"] == {"source": "c.txt"}
    assert payload["attribution"]["encoder"] == "minilm-pq"
    _check_json_matches(payload["attribution"]["texts"], attrs)

    rows = list(csv.DictReader(io.StringIO(files["attributions.csv"].decode())))
    assert len(rows) == sum((len(a.subvectors) + 1) * len(a.words) for a in attrs)
    for row in rows:
        a = attrs[int(row["text_index"])]
        w = int(row["word_index"])
        word = a.words[w]
        # Formula-safe: a cell a spreadsheet would evaluate gets a leading apostrophe.
        assert row["word"] == ("'" + word if word.startswith("=") else word)
        if row["subvector"] == "global":
            assert float(row["attribution"]) == a.global_attributions[w] and row["code"] == ""
        else:
            sv = int(row["subvector"])
            assert float(row["attribution"]) == a.attributions[a.subvectors.index(sv), w]
            assert float(row["delta"]) == a.delta[a.subvectors.index(sv)]
            assert int(row["code"]) == a.codes[sv]
    paths = write_files(tmp_path / "o", files)
    assert {p.name for p in (tmp_path / "o").iterdir()} == set(paths)


def test_non_finite_numbers_become_null() -> None:
    attr = make_attr(["x", "y"])
    attr.attributions[0, 0] = np.nan
    files = make_report([attr]).files()
    payload = json.loads(files["report.json"])  # strict JSON: no NaN tokens
    assert payload["attribution"]["texts"][0]["attributions"][0][0] is None
    assert b"NaN" not in files["report.json"]


# ------------------------------------------------------------------------ term reports


def test_terms_report_with_real_encoder(splade) -> None:
    text = f"a cat sleeping on a book {EVIL}"
    report = terms_report(splade, [text, "=cmd|' /C calc'!A0"], top=15, source="c.txt")
    files = report.files()
    assert set(files) == {"report.html", "report.json", "terms.csv"}
    doc = files["report.html"].decode()
    assert "<script" not in doc.lower() and "&lt;script&gt;" in doc
    imgs = [a for t, a in parse(doc).tags if t == "img"]
    assert len(imgs) == 2
    cloud = Image.open(io.BytesIO(base64.b64decode(imgs[0]["src"].split(",", 1)[1])))
    assert cloud.size[0] > 100 and np.asarray(cloud.convert("L")).std() > 5  # not blank
    payload = json.loads(files["report.json"])
    enc = splade.encode_texts([text])[0]
    got = payload["items"][0]["terms"]
    assert [t["weight"] for t in got] == [float(enc.weights[t["index"]]) for t in got]
    assert {t["token"]: t["in_input"] for t in got}["cat"] is True
    table = list(csv.reader(io.StringIO(files["terms.csv"].decode())))
    assert all(not cell.startswith("=") for row in table for cell in row)
    assert any(row[1].startswith("'=cmd") for row in table[1:])


# ------------------------------------------------------------------------------ the CLI


def test_cli_report_lexical(cli, tmp_path: Path) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text(f"a cat sleeping on a book\n\n{EVIL} dogs\n", encoding="utf-8")
    res = cli(
        "report",
        "--encoder",
        "splade-tiny",
        "--corpus",
        corpus,
        "--out",
        tmp_path / "out",
        "--top",
        "10",
        "--json",
    )
    assert res.returncode == 0, res.stderr
    payload = res.json()
    assert {p.name for p in (tmp_path / "out").iterdir()} == {
        "report.html",
        "report.json",
        "terms.csv",
    }
    assert json.loads((tmp_path / "out" / "report.json").read_text()) == payload
    assert [it["label"] for it in payload["items"]] == ["a cat sleeping on a book", f"{EVIL} dogs"]
    assert "&lt;script&gt;" in (tmp_path / "out" / "report.html").read_text()


def test_cli_report_bad_input(cli, tmp_path: Path) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("a text\n", encoding="utf-8")
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n", encoding="utf-8")
    out = str(tmp_path / "o")
    bad = [
        (["--encoder", "splade-tiny", "--corpus", empty, "--out", out], "empty.txt"),
        (["--encoder", "splade-tiny", "--text", "x", "--out", corpus], "not a folder"),
        (["--encoder", "minilm-pq", "--text", "x", "--mot", "--out", out], "two texts"),
        (["--encoder", "splade-tiny", "--corpus", corpus, "--mot", "--out", out], "two texts"),
        (["--encoder", "nope", "--text", "x", "--out", out], "nope"),
        (["--encoder", "minilm-pq", "--text", "x", "--steps", "0", "--out", out], "--steps"),
        (["--encoder", "minilm-pq", "--text", "x", "--m", "7", "--out", out], "M=7"),
        (["--encoder", "splade-tiny", "--text", "x", "--m", "12", "--out", out], "PQ"),
        (["--encoder", "minilm-pq", "--text", "x", "--keep", "0", "--out", out], "--keep must"),
        (["--encoder", "minilm-pq", "--text", "x", "--top", "0", "--out", out], "--top must"),
    ]
    for args, needle in bad:
        res = cli("report", *args)
        assert res.returncode == 2, args
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in res.stderr and needle in lines[0], lines
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


# ------------------------------------------------------------------- the Attribution page

MAIN = str(Path(__file__).resolve().parents[2] / "app" / "main.py")


def _page():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(MAIN, default_timeout=300)
    at.switch_page("app_pages/attribution.py")
    at.run()
    assert not at.exception and not at.error
    return at


def _submit(at) -> None:
    click_and_wait(at, next(b for b in at.button if b.proto.is_form_submitter).click)


def download_matches(at, label: str, data: bytes, mimetype: str) -> bool:
    """The page's download button ``label`` serves exactly ``data`` (Streamlit names a
    download by a hash of its bytes, type and file name)."""
    from streamlit.runtime.memory_media_file_storage import _calculate_file_id

    buttons = [b for b in at.get("download_button") if b.proto.label == label]
    assert buttons, f"no download button {label!r}"
    return Path(buttons[0].proto.url).stem == _calculate_file_id(data, mimetype, label)


def test_attribution_page_runs_keeps_and_matches_the_cli(cli, tmp_path: Path) -> None:
    at = _page()
    at.text_area(key="attr_text").input(f"a cat {EVIL}")
    at.selectbox(key="attr_steps").set_value(8)
    _submit(at)
    assert not at.exception and not at.error
    first = page_result(at)
    (a,) = first.attribution.texts
    assert a.words[:2] == ["a", "cat"] and a.steps == 8
    assert at.text[0].value == f"Text 1: a cat {EVIL}"
    np.testing.assert_allclose(at.dataframe[0].value["delta"].to_numpy(), a.delta)

    # One text with MoT ticked: refused at once (no IG ran), the earlier result stays.
    at.toggle(key="attr_mot").set_value(True)
    _submit(at)
    assert not at.exception
    assert len(at.error) == 1 and "at least two texts" in at.error[0].value
    assert page_result(at) is first

    # Three texts with MoT: the selector names the text the heatmap shows (the first).
    texts = ["red car", "dogs bark", "=HYPERLINK(x) rockets"]
    corpus = ("text\n" + "\n".join(texts) + "\n").encode()
    at.radio(key="attr_source").set_value("Corpus file")
    at.file_uploader(key="attr_upload").set_value(("c.csv", corpus, "text/csv"))
    _submit(at)
    assert not at.exception and not at.error
    report = page_result(at)
    assert [x.text for x in report.attribution.texts] == texts
    pick = next(s for s in at.selectbox if s.label == "Text")
    assert pick.value == 0 and pick.format_func(pick.value).startswith("1: red car")
    assert at.text[0].value == "Text 1: red car"
    pick.set_value(2).run()
    assert at.text[0].value == f"Text 3: {texts[2]}"
    np.testing.assert_allclose(
        at.dataframe[0].value["delta"].to_numpy(), report.attribution.texts[2].delta
    )
    # The MoT table as in the HTML report: "M=24" headers, no index, p-values like 3.0e-15.
    shown = next(d.value for d in at.dataframe if "M=24" in d.value.columns)
    assert list(shown.columns) == ["ranking", "M=24"] and "MoT" in set(shown["ranking"])
    tests = next(d.value for d in at.dataframe if "baseline" in d.value.columns)
    assert list(tests.columns)[:3] == ["baseline", "M=24 p", "M=24 q (FDR)"]
    assert all(re.fullmatch(r"\d\.\d{3}|\d\.\de-\d\d", p) for p in tests["M=24 p"])
    # The topic of a code (RepMoT): the texts sharing the chosen code, from the same run.
    topic = next(d.value for d in at.dataframe if "top words" in d.value.columns)
    assert len(topic) >= 1 and set(topic["text"]) <= set(texts)

    # report.json on the page is the document `lexlens report --json` prints for this input.
    path = tmp_path / "c.csv"
    path.write_bytes(corpus)
    res = cli(
        "report",
        "--encoder",
        "minilm-pq",
        "--corpus",
        path,
        "--steps",
        "8",
        "--mot",
        "--out",
        tmp_path / "out",
        "--json",
    )
    assert res.returncode == 0, res.stderr
    assert download_matches(at, "report.json", res.stdout.encode(), "application/json")
    assert report.files()["report.json"] == res.stdout.encode()
    for name in ("mot.csv", "mot_tests.csv", "attributions.csv"):
        assert (tmp_path / "out" / name).read_bytes() == report.files()[name]

    # Another page and back: the inputs and the result are still there.
    at.switch_page("app_pages/text.py").run()
    at.switch_page("app_pages/attribution.py").run()
    assert not at.exception and not at.error
    assert at.radio(key="attr_source").value == "Corpus file"
    assert at.selectbox(key="attr_steps").value == 8
    assert page_result(at) is report
    assert at.text[0].value == f"Text 3: {texts[2]}"  # the chosen text too
