"""The attribution report carries the IG deletion and insertion curves a page shows: the very
curves (``ig_faithfulness`` on the report), drawn as inline SVG with their AOPCs per ranking,
every exact number kept as a tooltip; report.json stays the CLI's document."""

from __future__ import annotations

import html
import json
import re

import pytest

from lexlens.analysis.attribution.ig_curves import ig_faithfulness
from lexlens.analysis.attribution.report import (
    attribution_report,
    report_ig_curves,
    with_ig_curves,
)
from lexlens.models import LexlensError, load_encoder

TEXTS = ["a cat sleeping on a book", "rockets launch at dawn"]


@pytest.fixture(scope="module")
def measured():
    encoder = load_encoder("minilm-pq")
    report = attribution_report(encoder, TEXTS, steps=16)
    return encoder, report, ig_faithfulness(encoder, report, 0)


def _section(page: str, index: int) -> str:
    start = page.index(f'id="ig-curves-{index}"')
    return page[start : page.index("</table>", start)]


def test_silent_wrong_the_report_draws_the_curves_and_aopcs_it_was_given(measured):
    encoder, report, curves = measured
    files = with_ig_curves(report, {0: curves}).files()
    page = files["report.html"].decode("utf-8")
    assert 'id="ig-curves-1"' not in page  # only the text whose curves were measured
    section = _section(page, 0)
    # Each ranking's AOPCs: the exact values of the curves, shown rounded with a tooltip.
    rows = re.findall(
        r"<tr><td>(\w+)</td><td class=\"num\" title=\"([^\"]+)\">[^<]*</td>"
        r"<td class=\"num\" title=\"([^\"]+)\">",
        section,
    )
    assert [r[0] for r in rows] == ["MoT", "RandT", "GlobalT"]
    for name, deletion, insertion in rows:
        assert float(deletion) == curves.mean_deletion_aopc[name]
        assert float(insertion) == curves.mean_insertion_aopc[name]
        # AOPC by hand from the drawn mean curve: the mean drop over k = 0…K (the mean of
        # per-sub-vector AOPCs equals the AOPC of the mean curve, AOPC being linear).
        curve = curves.deletion[name]
        by_hand = sum(curve[0] - v for v in curve) / len(curve)
        assert float(deletion) == pytest.approx(by_hand, rel=1e-9, abs=1e-12)
    # Two charts, one polyline per ranking, each point's tooltip its exact value.
    charts = re.findall(r"<svg class=\"chart\".*?</svg>", section, flags=re.S)
    assert [re.search(r'aria-label="([^"]+)"', c).group(1) for c in charts] == [
        "deletion curves",
        "insertion curves",
    ]
    for chart, drawn in zip(charts, (curves.deletion, curves.insertion), strict=True):
        assert chart.count("<polyline") == len(drawn) == 3
        for name, ys in drawn.items():
            for k, v in enumerate(ys):
                assert html.escape(f"{name}, k = {k}: {v!r}") in chart
    assert "http" not in section.replace('xmlns="http://www.w3.org/2000/svg"', "")
    # report.json stays the document `lexlens report --json` prints (no curves there).
    assert files["report.json"] == report.files()["report.json"]
    assert "ig_curves" not in json.loads(files["report.json"])


def test_silent_wrong_curves_measured_for_the_report_are_those_of_ig_faithfulness(measured):
    encoder, report, curves = measured
    both = report_ig_curves(encoder, with_ig_curves(report, {0: curves}))
    assert both.ig_curves[0] is curves  # kept, not measured again
    again = ig_faithfulness(encoder, report, 1)
    assert both.ig_curves[1].mean_deletion_aopc == again.mean_deletion_aopc
    assert both.ig_curves[1].insertion == again.insertion
    page = both.html()
    assert 'id="ig-curves-0"' in page and 'id="ig-curves-1"' in page
    assert report.ig_curves == {}  # the report given is left as it was


def test_silent_wrong_curves_filed_under_another_text_are_refused(measured):
    _, report, curves = measured
    with pytest.raises(LexlensError, match="not that text's IG curves"):
        with_ig_curves(report, {1: curves})
    with pytest.raises(LexlensError, match="text number 5"):
        with_ig_curves(report, {5: curves})


def test_traceback_wrong_arguments_are_one_line_errors(measured):
    encoder, report, curves = measured
    cases = [
        (lambda: report_ig_curves(encoder, "report.json"), "report must be an AttributionReport"),
        (lambda: report_ig_curves(encoder, report, texts=3), "texts must be a list of text"),
        (lambda: report_ig_curves(encoder, report, texts=[7]), "text must be an index from 0"),
        (lambda: report_ig_curves("no-such-encoder", report, texts=[1]), "no-such-encoder"),
        (lambda: with_ig_curves(report, [curves]), "curves must map text numbers"),
        (lambda: with_ig_curves(report, {True: curves}), "text number True"),
    ]
    for call, needle in cases:
        with pytest.raises(LexlensError) as caught:
            call()
        assert needle in str(caught.value) and "\n" not in str(caught.value)


def test_silent_wrong_the_command_adds_the_curves_the_api_measures(measured, cli, tmp_path):
    """`lexlens report --ig-curves` writes report.html with each text's curves: the AOPCs
    those of ``ig_faithfulness`` on the same attribution (same seed); on a lexical encoder
    the flag is refused in one line before any work."""
    encoder, _, _ = measured
    corpus = tmp_path / "texts.txt"
    corpus.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    run = cli(
        "report",
        "--encoder",
        "minilm-pq",
        "--corpus",
        corpus,
        "--steps",
        "16",
        "--ig-curves",
        "--out",
        tmp_path / "r",
    )
    assert run.returncode == 0, run.stderr
    page = (tmp_path / "r" / "report.html").read_text(encoding="utf-8")
    again = attribution_report(encoder, TEXTS, steps=16)
    for i in range(len(TEXTS)):
        expected = ig_faithfulness(encoder, again, i)
        rows = re.findall(
            r"<tr><td>(\w+)</td><td class=\"num\" title=\"([^\"]+)\">", _section(page, i)
        )
        assert {name: float(v) for name, v in rows} == expected.mean_deletion_aopc
    refused = cli(
        "report",
        "--encoder",
        "splade-tiny",
        "--text",
        "a cat",
        "--ig-curves",
        "--out",
        tmp_path / "t",
    )
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "IG curves" in refused.stderr and not list(tmp_path.glob("t/*"))
