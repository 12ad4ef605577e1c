"""The Compare page (AppTest): its JSON download is the document ``lexlens compare … --json``
prints for the same input (a text against another vocabulary, an image at two gate k, a
stored collection re-gated); inputs and results survive a page switch."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from lexlens.analysis.collections.indexing import build_index
from tests.compare.test_compare import build_vdr, thumbnail
from tests.helpers import app_page, click_and_wait

PAGE = "app_pages/compare.py"
CUSTOM = "local checkpoint directory…"
TEXT = "a cup of tea at 90 ° with ½ a lemon"


@pytest.fixture(scope="session")
def models_dir(tmp_path_factory) -> Path:
    path = tmp_path_factory.getbasetemp() / "compare-models"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def test_text_against_another_vocabulary_equals_the_cli(cli, downloads, models_dir, monkeypatch):
    vdr_dir = build_vdr(models_dir)
    monkeypatch.setenv("LEXLENS_DATA_ROOTS", str(models_dir))  # a typed checkpoint folder
    at = app_page(PAGE)
    assert not at.exception
    at.text_area(key="compare_text").input(TEXT).run()
    at.number_input(key="compare_text_gate_b").set_value(40).run()
    at.selectbox(key="compare_text_encoder_b").set_value(CUSTOM).run()
    at.text_input(key="compare_text_encoder_b_dir").input(str(vdr_dir)).run()
    assert not at.exception and not at.error
    run = cli(
        "compare",
        "--encoder",
        "splade-tiny",
        "--encoder",
        vdr_dir,
        "--gate-k",
        "768",
        "--gate-k",
        "40",
        "--text",
        TEXT,
        "--json",
    )
    assert run.returncode == 0, run.stderr
    assert downloads["compare.json"].decode("utf-8") == run.stdout
    document = run.json()
    # The page says how many terms differ between the vocabularies, with the same numbers.
    v = document["vocabulary"]
    note = next(i.value for i in at.info if "different vocabularies" in i.value)
    assert f"{v['only_a']:,} tokens of A's vocabulary and {v['only_b']:,} of B's" in note
    # The metrics count what the tables below show: words by default, raw tokens when asked.
    words = document["terms"]["merged"]["counts"]
    assert _metric(at, "Shared (words)") == str(words["shared"])
    assert _metric(at, "Only in A / only in B (words)") == f"{words['only_a']} / {words['only_b']}"
    assert any(m.value == f"**Shared** ({words['shared']})" for m in at.markdown)
    rho = document["terms"]["rank_correlation"]["rho"]
    assert _metric(at, "Spearman's ρ (shared tokens)") == ("n/a" if rho is None else f"{rho:.3f}")
    assert any("cannot exist on the other side" in c.value for c in at.caption)
    # Another page and back: the inputs and the result are still there.
    at.switch_page("app_pages/text.py").run()
    at.switch_page(PAGE).run()
    assert not at.exception and not at.error
    assert at.text_area(key="compare_text").value == TEXT
    assert at.text_input(key="compare_text_encoder_b_dir").value == str(vdr_dir)
    assert at.number_input(key="compare_text_gate_b").value == 40
    assert _metric(at, "Shared (words)") == str(words["shared"])
    at.toggle(key="compare_raw_input").set_value(True).run()
    counts = document["terms"]["counts"]
    assert _metric(at, "Shared (tokens)") == str(counts["shared"])
    assert any(m.value == f"**Shared** ({counts['shared']})" for m in at.markdown)


def test_image_at_two_gate_k_equals_the_cli(cli, downloads, models_dir, monkeypatch):
    photo = thumbnail(models_dir)
    at = app_page(PAGE)
    at.radio(key="compare_kind").set_value("Image").run()
    at.file_uploader(key="compare_upload").set_value((photo.name, photo.read_bytes(), "image/png"))
    at.run()
    assert not at.exception and not at.error
    monkeypatch.chdir(photo.parent)
    run = cli(
        "compare",
        "--encoder",
        "efficientnet-lite0-lexical",
        "--image",
        photo.name,
        "--box",
        "0.5,0,1,1",
        "--gate-k",
        "768",
        "--gate-k",
        "64",
        "--json",
    )
    assert run.returncode == 0, run.stderr
    assert downloads["compare.json"].decode("utf-8") == run.stdout
    heat = run.json()["heatmap"]
    assert any(s.value == f"Heatmap of '{heat['word']}' in both" for s in at.subheader)


def test_stored_collection_regated_equals_the_cli(cli, downloads, tmp_path, monkeypatch, splade):
    home = tmp_path / "home"
    monkeypatch.setenv("LEXLENS_HOME", str(home))
    source = tmp_path / "pets.csv"
    source.write_text(
        "id,text,labels\na,a dog on the beach,dog|beach\nb,a cat in the snow,cat|snow\n"
        "c,two dogs in a park,dog|park\n",
        encoding="utf-8",
    )
    index = home / "collections" / "pets"
    build_index(splade, source, index, gate_k=768, encoder_spec="splade-tiny")
    at = app_page(PAGE)
    at.radio(key="compare_kind").set_value("Stored collection").run()
    # Nothing is computed on the radio click: B's gate waits for the user, no query is typed.
    gate_b = at.number_input(key="compare_index_gate_b_pets_same")
    page_buttons = [b for b in at.button if not str(b.key).startswith("sidebar_")]  # not the jobs'
    assert gate_b.value is None and not page_buttons and not at.dataframe
    assert at.radio(key="compare_query_source").value == "No query"
    assert any("Type the gate k of B" in i.value for i in at.info)
    gate_b.set_value(2).run()
    at.radio(key="compare_query_source").set_value("My own query").run()
    at.text_input(key="compare_query").input("dog").run()
    assert not at.exception and not at.error and not at.dataframe
    click_and_wait(at, at.button(key="compare_collections_go").click)  # a job
    assert not at.exception and not at.error
    run = cli(
        "compare", "--index", index, "--gate-k", "768", "--gate-k", "2", "--query", "dog", "--json"
    )
    assert run.returncode == 0, run.stderr
    assert downloads["compare.json"].decode("utf-8") == run.stdout
    hits = run.json()["collection"]["search"]["hits_a"]
    assert at.dataframe and [h["id"] for h in hits] == ["a", "c"]
    # Another query: the old result is not shown under the new inputs until Compare.
    at.text_input(key="compare_query").input("cat").run()
    assert not at.dataframe and any("press **Compare**" in i.value for i in at.info)
