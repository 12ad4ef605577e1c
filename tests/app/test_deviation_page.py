"""The Semantic deviation page (AppTest, real splade-tiny): same JSON as the CLI, notes,
skipped captions, errors naming the upload, state kept across pages."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from tests.helpers import ROOT, app_page, click_and_wait

PAGE = "app_pages/deviation.py"
SOURCES = ["Sample captions (data/captions.txt)", "Upload a caption file", "Stored collection"]


def _upload(at: AppTest, name: str, data: bytes) -> None:
    at.radio(key="dev_source").set_value(SOURCES[1])
    at.run()
    at.file_uploader(key="dev_upload").upload(name, data, "text/plain")
    at.run()


def test_page_json_equals_cli_json_and_says_how_many_are_below_k(cli, downloads):
    at = app_page(PAGE)
    assert not at.exception and not at.error
    assert at.metric[0].label == "Exact@20"
    assert any("10 of 10 captions have fewer than 20 positive terms" in i.value for i in at.info)
    page_json = downloads["deviation.json"]
    proc = cli("deviation", "--encoder", "splade-tiny", "--captions", "data/captions.txt", "--json")
    assert proc.returncode == 0
    assert page_json.decode("utf-8") == proc.stdout
    # The same with the other denominator and another k, chosen on the page.
    at.radio(key="dev_denominator").set_value("active")
    at.number_input(key="dev_k").set_value(7)
    at.run()
    assert not at.exception and at.metric[0].label == "Exact@7"
    proc = cli(
        "deviation",
        "--encoder",
        "splade-tiny",
        "--captions",
        "data/captions.txt",
        "--json",
        "--k",
        "7",
        "--denominator",
        "active",
    )
    assert downloads["deviation.json"].decode("utf-8") == proc.stdout
    # Readable plots: the scatter has a title and named axes, the boxes are not flat.
    charts = at.get("plotly_chart")
    specs = [c.proto.spec for c in charts]
    assert any("Per caption: Exact@7 against Semantic@7" in s for s in specs)
    assert not any('"title":{"text":"exact_at_k"}' in s for s in specs)
    assert any("where they are active" in s for s in specs)


def test_uploaded_file_same_json_as_cli_and_state_survives_pages(cli, downloads, tmp_path):
    data = "a cat sleeping on a book\n🙂🙂\na red train crossing a bridge\n".encode()
    at = app_page(PAGE)
    _upload(at, "mine.txt", data)
    assert not at.exception and not at.error
    assert any("1 of the captions not measured" in w.value for w in at.warning)
    assert len(at.dataframe[0].value) == 2
    assert at.number_input(key="dev_k").value == 20  # the upload changed no option
    path = tmp_path / "mine.txt"
    path.write_bytes(data)
    proc = cli("deviation", "--encoder", "splade-tiny", "--captions", path, "--json")
    assert downloads["deviation.json"].decode("utf-8") == proc.stdout
    # Another page and back: the upload, the options and the result are still there.
    at.switch_page("app_pages/text.py")
    at.run()
    at.switch_page(PAGE)
    at.run()
    assert not at.exception
    assert at.radio(key="dev_source").value == SOURCES[1]
    assert any("mine.txt" in c.value for c in at.caption)
    assert len(at.dataframe[0].value) == 2


def test_k_set_before_an_upload_stays_what_the_user_set(cli, downloads, tmp_path):
    at = app_page(PAGE)
    at.number_input(key="dev_k").set_value(7)
    at.run()
    _upload(at, "mine.txt", b"a dog running on a beach\na cat on a sofa\n")
    assert not at.exception and not at.error
    assert at.number_input(key="dev_k").value == 7
    assert at.metric[0].label == "Exact@7"
    path = tmp_path / "mine.txt"
    path.write_bytes(b"a dog running on a beach\na cat on a sofa\n")
    proc = cli("deviation", "--encoder", "splade-tiny", "--captions", path, "--json", "--k", "7")
    assert downloads["deviation.json"].decode("utf-8") == proc.stdout


def test_bad_upload_names_the_file_and_keeps_the_previous_result():
    at = app_page(PAGE)
    assert len(at.dataframe[0].value) == 10
    _upload(at, "broken.csv", b'text\n"a cat\n')
    assert not at.exception
    assert any("broken.csv" in e.value for e in at.error)
    assert not any("tmp" in e.value for e in at.error)
    assert any("previous result" in c.value for c in at.caption)
    assert len(at.dataframe[0].value) == 10  # the sample's result is still shown


def test_stored_collection_same_json_as_cli(cli, downloads, splade, tmp_path, monkeypatch):
    from lexlens.analysis.collections.indexing import build_index

    monkeypatch.setenv("LEXLENS_HOME", str(tmp_path))
    at = app_page(PAGE)
    at.radio(key="dev_source").set_value(SOURCES[2])
    at.run()
    assert not at.exception and any("No stored collection yet" in i.value for i in at.info)
    path = tmp_path / "collections" / "sample-captions"
    build_index(splade, ROOT / "data" / "captions.txt", path)
    at.run()
    assert not at.exception and not at.error
    assert at.selectbox(key="dev_collection").value == "sample-captions"
    click_and_wait(at, at.button[0].click)  # measured as a job
    assert not at.exception and not at.error
    proc = cli("deviation", "--index", path, "--json")
    assert proc.returncode == 0, proc.stderr
    assert downloads["deviation.json"].decode("utf-8") == proc.stdout
    assert any("10 of 10 texts have fewer than 20 positive terms" in i.value for i in at.info)
