"""docs/notebooks/tour.ipynb runs in a real Jupyter kernel (nbclient; the kernel is this
interpreter with this environment, from a kernelspec made in a temporary folder, so a
worktree's PYTHONPATH and an editable install both hold) and every output it displays is HTML
that parses, names nothing outside (no http(s) address, no script), and holds the numbers of
the equivalent ``--json`` document; the executed notebook renders to HTML (nbconvert) and a
headless-Chromium screenshot of it is kept beside the browser tests' ones."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

from lexlens.analysis.core.counts import counted
from lexlens.analysis.render.html import num
from lexlens.analysis.render.notebook import FAILURES_PER_CAUSE, WORST_SHOWN
from tests.browser import CHROMIUM, CHROMIUM_ARGS, OUTPUT
from tests.helpers import ROOT

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

pytestmark = pytest.mark.slow

NOTEBOOK = ROOT / "docs" / "notebooks" / "tour.ipynb"
#: The names of the tour's results, dumped after it runs as their ``--json`` documents.
RESULTS = (
    "terms",
    "contrib",
    "group",
    "attribution",
    "deviation",
    "evaluation",
    "counterfactual",
    "comparison",
)
#: Printed by the cell appended to the tour (not part of the committed notebook).
MARKER = "LEXLENS-TOUR-DOCUMENTS "
DUMP = f"""
import json as _json
from lexlens.analysis.core.outputs import json_text as _json_text
_documents = {{name: _json.loads(_json_text(globals()[name])) for name in {RESULTS!r}}}
_documents["index_path"] = str(folder / "beir")
_documents["experiment"] = (
    None if pt is None else experiment.set_index("name").to_dict(orient="index")
)
print({MARKER!r} + _json.dumps(_documents))
"""
#: A cell's run may take this long (the index build and the evaluation are the longest).
CELL_SECONDS = 300


class Page(HTMLParser):
    """The tags, texts and every address an HTML output names."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []
        self.urls: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.urls += [v or "" for k, v in attrs if k in ("src", "href")]

    def handle_data(self, data):
        self.text.append(data)


def parsed(html: str, *, inline_scripts: bool = False) -> str:
    """``html`` parsed; it names nothing outside. Its text, joined. With ``inline_scripts``
    (a plotly figure's view) scripts are allowed if they are inline, and the rest is held
    to the same rules without them."""
    if inline_scripts:
        sources = re.findall(r"<script([^>]*)>", html)
        assert sources and not any("src=" in s for s in sources), sources
        html = re.sub(r"<script[^>]*>.*?</script>", "", html, flags=re.S)
    page = Page()
    page.feed(html)
    page.close()
    assert page.tags, "an HTML output without a tag"
    assert "script" not in page.tags and "link" not in page.tags and "iframe" not in page.tags
    assert all(u.startswith("data:image/png;base64,") for u in page.urls), page.urls
    assert "http://" not in html and "https://" not in html
    return " ".join(page.text)


def _kernelspec(folder: Path) -> str:
    """A kernelspec in ``folder`` running ipykernel on this interpreter; its name."""
    spec = folder / "kernels" / "lexlens-tour"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "lexlens tour", "language": "python"})
    )
    return "lexlens-tour"


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """The tour run in a fresh kernel (offline), the documents dumped, its run time."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    folder = tmp_path_factory.mktemp("tour")
    name = _kernelspec(folder)
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    assert all(not c.get("outputs") for c in notebook.cells if c.cell_type == "code")
    notebook.cells.append(nbformat.v4.new_code_cell(DUMP))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    manager = KernelManager(
        kernel_name=name,
        kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(folder / "kernels")]),
    )
    client = nbclient.NotebookClient(
        notebook, km=manager, timeout=CELL_SECONDS, resources={"metadata": {"path": str(folder)}}
    )
    started = time.monotonic()
    # this process's environment (PYTHONPATH too), offline, in a folder of its own
    manager.start_kernel(env=env, cwd=str(folder))
    try:
        client.execute()
    finally:
        if manager.is_alive():
            manager.shutdown_kernel(now=True)
    seconds = time.monotonic() - started
    dumped = notebook.cells.pop()
    line = next(
        t for o in dumped.outputs for t in o.get("text", "").splitlines() if t.startswith(MARKER)
    )
    return {
        "notebook": notebook,
        "documents": json.loads(line[len(MARKER) :]),
        "seconds": seconds,
        "folder": folder,
    }


def _html_outputs(cell) -> list[str]:
    return [
        o["data"]["text/html"]
        for o in cell.get("outputs", [])
        if o.get("output_type") in ("display_data", "execute_result") and "text/html" in o["data"]
    ]


def _result_html(notebook, variable: str) -> str:
    """The HTML the code cell ending in the bare name ``variable`` displayed."""
    for cell in notebook.cells:
        if cell.cell_type == "code" and cell.source.strip().splitlines()[-1] == variable:
            (html,) = _html_outputs(cell)
            return html
    raise AssertionError(f"no cell displays {variable}")


def test_the_tour_runs_in_a_kernel_and_every_output_is_self_contained_html(executed):
    notebook = executed["notebook"]
    print(f"the tour ran in {executed['seconds']:.1f} s")
    errors = [o for c in notebook.cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors, errors
    warned = [
        o["text"]
        for c in notebook.cells
        for o in c.get("outputs", [])
        if o.output_type == "stream" and o.get("name") == "stderr"
    ]
    assert not warned, warned  # nothing written to stderr (a library's warning) in the tour
    shown = [h for c in notebook.cells if c.cell_type == "code" for h in _html_outputs(c)]
    assert len(shown) >= 14  # each result, six frames, the experiment
    deviation = _result_html(notebook, "deviation")
    for html in shown:
        parsed(html, inline_scripts=html == deviation)


def test_terms_and_contrib_show_the_commands_json_numbers(executed, cli):
    documents = executed["documents"]
    terms = cli(
        "terms",
        "--encoder",
        "splade-tiny",
        "--text",
        documents["terms"]["input"]["text"],
        "--top",
        "20",
        "--json",
    ).json()
    assert terms["merged_terms"] == documents["terms"]["merged_terms"]
    text = parsed(_result_html(executed["notebook"], "terms"))
    for term in terms["merged_terms"]:
        assert f"{term['token']} {num(term['weight'])}" in text
    contrib = documents["contrib"]
    text = parsed(_result_html(executed["notebook"], "contrib"))
    assert f"score {num(contrib['score'])}" in text
    for word in contrib["contributions_words"]:
        assert f"{word['token']} {num(word['contribution'])}" in text


def test_the_image_group_shows_the_commands_json_numbers(executed, cli):
    document = executed["documents"]["group"]
    run = cli(
        "terms",
        "--encoder",
        "efficientnet-lite0-lexical",
        "--image",
        document["input"]["image"],
        "--box",
        "0,0,0.5,1",
        "--top",
        "15",
        "--json",
    ).json()
    assert run["merged_terms"] == document["merged_terms"]
    assert run["input"]["cells"] == document["input"]["cells"]
    html = _result_html(executed["notebook"], "group")
    text = parsed(html)
    assert f"{len(run['input']['cells'])} cells" in text
    for rank, term in enumerate(run["merged_terms"], 1):
        assert f"{rank} {term['token']} {num(term['weight'])}" in text
    assert html.count("data:image/png;base64,") == 2  # the image with its grid, the cloud


def test_the_attribution_shows_the_commands_json_numbers(executed, cli):
    document = executed["documents"]["attribution"]
    (text,) = document["texts"]
    run = cli(
        "attribute", "--encoder", "minilm-pq", "--text", text["text"], "--steps", "16", "--json"
    ).json()
    (ran,) = run["texts"]
    assert ran["attributions"] == text["attributions"] and ran["codes"] == text["codes"]
    shown = parsed(_result_html(executed["notebook"], "attribution"))
    for r, sv in enumerate(ran["subvectors"]):
        cells = " ".join(num(v) for v in ran["attributions"][r])
        assert f"{sv} {ran['codes'][sv]} " in shown and cells in shown
    assert " ".join(num(v) for v in ran["global_attributions"]) in shown


def test_the_deviation_shows_the_commands_json_numbers(executed, cli):
    from lexlens.analysis.core.samples import sample_path

    document = executed["documents"]["deviation"]
    run = cli(
        "deviation",
        "--encoder",
        "splade-tiny",
        "--captions",
        str(sample_path("captions.txt")),
        "--json",
    ).json()
    assert run["captions"]["by_denominator"] == document["captions"]["by_denominator"]
    html = _result_html(executed["notebook"], "deviation")
    shown = parsed(html, inline_scripts=True)
    part = run["captions"]
    for values in part["by_denominator"].values():
        assert f"{num(values['exact_at_k'])} {num(values['semantic_at_k'])}" in shown
    assert f"{num(part['flops_with_self_pairs'])} {num(part['flops'])}" in shown
    for row in part["rows"]:
        assert f"{row['text']} {row['positive_terms']} {num(row['exact_at_k'])}" in shown
    assert "Plotly.newPlot" in html


def test_the_evaluation_shows_lexlens_evaluates_numbers(executed, cli):
    documents = executed["documents"]
    evaluation = documents["evaluation"]
    run = cli("evaluate", "--index", documents["index_path"], "--gate-k", "2", "--json").json()
    assert run["metrics"]["aggregate"] == evaluation["metrics"]["aggregate"]
    assert run["causes"] == evaluation["causes"]
    text = parsed(_result_html(executed["notebook"], "evaluation"))
    aggregate = evaluation["metrics"]["aggregate"]
    assert " ".join(num(v) for v in aggregate.values()) in text  # the measures' row
    worst = sorted(evaluation["metrics"]["per_query"], key=lambda q: q["nDCG@10"])
    for q in worst[:WORST_SHOWN]:
        assert f"{q['id']} {q['text']} {num(q['nDCG@10'])}" in text
    more = len(worst) - WORST_SHOWN
    assert f"… {more} more rows" in text
    for cause, count in evaluation["causes"].items():
        assert f"{cause} {count}" in text
        listed = [f for f in evaluation["failures"] if cause in f["causes"]]
        if listed:
            assert f"{cause} — {counted(count, 'failure')}" in text
            if len(listed) > FAILURES_PER_CAUSE:
                assert f"… {len(listed) - FAILURES_PER_CAUSE} more rows" in text
    for f in evaluation["failures"][:3]:
        assert (
            f"{f['query_id']} {f['query']} {f['relevant']['rank']} {f['nonrelevant']['id']}" in text
        )


def test_the_counterfactual_shows_the_edit_and_the_verified_ranks(executed, cli):
    document = executed["documents"]["counterfactual"]
    run = cli(
        "counterfactual",
        "--index",
        executed["documents"]["index_path"],
        "--query-id",
        document["query_id"],
        "--target",
        document["target"],
        "--gate-k",
        "2",
        "--max-calls",
        "40",
        "--json",
    ).json()
    for level in ("counterfactual", "terms"):
        for key in ("edits", "rank_before", "rank_after", "score_before", "score_after"):
            assert run[level][key] == document[level][key], (level, key)
    text = parsed(_result_html(executed["notebook"], "counterfactual"))
    for level in (document["counterfactual"], document["terms"]):
        ranks = [
            str(level[k]) if level[k] is not None else "not retrieved"
            for k in ("rank_before", "rank_after")
        ]
        assert f"rank {ranks[0]} {ranks[1]}" in text
        assert f"score {num(level['score_before'])} {num(level['score_after'])}" in text
    for edit in document["counterfactual"]["edits"]:
        if edit["op"] == "insert":
            assert f"+{edit['word']}" in text
        else:
            assert edit["word"] in text


def test_the_comparison_and_the_experiment_agree_with_evaluate(executed, cli):
    documents = executed["documents"]
    comparison = documents["comparison"]["comparison"]  # several systems: a section
    run = cli(
        "evaluate",
        "--index",
        documents["index_path"],
        "--gate-k",
        "768",
        "--gate-k",
        "2",
        "--json",
    ).json()
    assert run["means"] == comparison["means"]
    text = parsed(_result_html(executed["notebook"], "comparison"))
    for system in comparison["systems"]:
        for m in comparison["measures"]:
            assert num(comparison["means"][system["name"]][m]) in text
    assert "<svg" in _result_html(executed["notebook"], "comparison")
    experiment = documents["experiment"]
    if experiment is None:
        pytest.skip("PyTerrier is not installed")
    names = [s["name"] for s in comparison["systems"]]
    for pt_name, name in zip(("full", "gate 2"), names, strict=True):
        for m in ("nDCG@10", "RR@10", "R@10"):
            # two means of the same 60 per-query values summed in another order
            assert experiment[pt_name][m] == pytest.approx(
                comparison["means"][name][m], rel=0, abs=60 * 2.0**-52
            )


class Requests(HTMLParser):
    """The addresses a page asks the browser to fetch: scripts, images, style sheets."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag in ("script", "img", "iframe") and attrs.get("src"):
            self.urls.append(attrs["src"])
        if tag == "link" and attrs.get("href"):
            self.urls.append(attrs["href"])


#: The views screenshot one by one (file name → the start of the view's title).
VIEWS = {
    "terms": "Top terms",
    "contrib": "Query ⊙ Document",
    "group": "Patch group",
    "attribution": "Integrated Gradients",
    "deviation": "Semantic deviation",
    "evaluation": "Evaluation",
    "counterfactual": "What would it take?",
    "comparison": "Systems compared",
}


def test_the_executed_tour_renders_and_is_screenshot(executed):
    """The executed tour as nbconvert's lab page, its CDN scripts (MathJax, RequireJS)
    left out, opened in headless Chromium (Playwright on the system's browser) that asks
    for nothing but the page itself (every request recorded), the plotly figure drawn;
    the whole page and each view screenshot."""
    if not CHROMIUM.exists():
        pytest.skip("no Chromium at /usr/bin/chromium")
    sync_api = pytest.importorskip("playwright.sync_api")
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(template_name="lab", mathjax_url="", require_js_url="")
    body, _ = exporter.from_notebook_node(executed["notebook"])
    requests = Requests()
    requests.feed(body)
    assert not [u for u in requests.urls if u.startswith(("http:", "https:", "//"))]
    OUTPUT.mkdir(parents=True, exist_ok=True)
    page_file = OUTPUT / "tour.html"
    page_file.write_text(body, encoding="utf-8")
    asked: list[str] = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.on("request", lambda r: asked.append(r.url))
            page.goto(page_file.as_uri(), wait_until="load")
            page.wait_for_selector(".lexlens-nb .js-plotly-plot .main-svg", timeout=30_000)
            page.screenshot(path=OUTPUT / "tour.png", full_page=True)
            for name, title in VIEWS.items():
                heading = page.locator("h4", has_text=title)
                view = page.locator(".lexlens-nb").filter(has=heading).first
                view.screenshot(path=OUTPUT / f"tour-{name}.png")
        finally:
            browser.close()
    outside = [u for u in asked if not u.startswith(("file:", "data:"))]
    assert not outside, outside
    assert (OUTPUT / "tour.png").stat().st_size > 10_000
    for name in VIEWS:
        assert (OUTPUT / f"tour-{name}.png").stat().st_size > 5_000, name
