"""The app shell: page URLs, the root page, and state that survives page switches.

The persistence helpers (``kept``, ``restore_kept``, ``remembered_uploads`` in
``lexlens.app.runtime.state``) are checked on a two-page app written here with ``st.navigation``,
exactly as ``app/main.py`` wires them, so the test does not depend on what a page draws; the
real app is then checked for its root page, its URLs and the Text page's typed text.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]
MAIN = ROOT / "app" / "main.py"

TOY_MAIN = """
import streamlit as st
from lexlens.app.runtime.state import restore_kept

restore_kept()
pages = [
    st.Page("app_pages/work.py", title="Work", url_path="work"),
    st.Page("app_pages/other.py", title="Other", url_path="other"),
]
st.navigation(pages).run()
"""

TOY_WORK = """
import streamlit as st
from lexlens.app.runtime.state import kept, remembered_uploads

mode = st.selectbox("Mode", ["ready", "stop early"], key=kept("mode", "ready"))
if mode == "stop early":  # like encoder_picker while a checkpoint path is being typed
    st.info("stopped")
    st.stop()
text = st.text_area("Text", key=kept("text", "default text"))
choice = st.selectbox("Choice", ["x", "y", "z"], key=kept("choice", "x"))
k = st.slider("K", 1, 10, key=kept("k", 3))
merge = st.checkbox("Merge", key=kept("merge", False))
side = st.radio("Side", ["query", "document"], key=kept("side", "query"))
tags = st.multiselect("Tags", ["a", "b", "c"], key=kept("tags", ["a"]))
n = st.number_input("N", 0, 100, key=kept("n", 5))
with st.form("form"):
    query = st.text_input("Query", key=kept("query", "cat"))
    st.form_submit_button("Run")
files = remembered_uploads("docs", st.file_uploader("Files", accept_multiple_files=True))
st.write(f"VALUES {text}|{choice}|{k}|{merge}|{side}|{','.join(tags)}|{n}|{query}")
st.write("FILES " + (",".join(f"{name}:{len(data)}" for name, data in files) or "none"))
"""

TOY_OTHER = """
import streamlit as st

st.write("OTHER PAGE")
"""


@pytest.fixture
def toy(tmp_path: Path) -> AppTest:
    (tmp_path / "app_pages").mkdir()  # not "pages/": that name switches Streamlit to MPA v1
    (tmp_path / "main.py").write_text(textwrap.dedent(TOY_MAIN))
    (tmp_path / "app_pages" / "work.py").write_text(textwrap.dedent(TOY_WORK))
    (tmp_path / "app_pages" / "other.py").write_text(textwrap.dedent(TOY_OTHER))
    return AppTest.from_file(str(tmp_path / "main.py"), default_timeout=30).run()


def _line(at: AppTest, prefix: str) -> str:
    found = [m.value for m in at.markdown if m.value.startswith(prefix)]
    assert len(found) == 1, [m.value for m in at.markdown]
    return found[0]


def _edit(at: AppTest) -> AppTest:
    at.text_area(key="text").input("typed by me").run()
    at.selectbox(key="choice").select("z").run()
    at.slider(key="k").set_value(7).run()
    at.checkbox(key="merge").check().run()
    at.radio(key="side").set_value("document").run()
    at.multiselect(key="tags").select("c").run()
    at.number_input(key="n").set_value(42).run()
    at.text_input(key="query").input("dog on a beach")
    at.button[0].click().run()  # the form's submit button
    return at


EDITED = "VALUES typed by me|z|7|True|document|a,c|42|dog on a beach"


def test_defaults_are_seeded_once_without_warnings(toy: AppTest) -> None:
    assert not toy.exception
    assert _line(toy, "VALUES") == "VALUES default text|x|3|False|query|a|5|cat"
    assert not toy.warning


def test_kept_values_survive_a_page_switch(toy: AppTest) -> None:
    assert _line(_edit(toy), "VALUES") == EDITED
    toy.switch_page("app_pages/other.py").run()
    assert _line(toy, "OTHER") == "OTHER PAGE"
    toy.switch_page("app_pages/work.py").run()
    assert not toy.exception
    assert _line(toy, "VALUES") == EDITED
    toy.run()  # and on the run after that
    assert _line(toy, "VALUES") == EDITED


def test_kept_values_survive_a_run_that_stops_before_the_widgets(toy: AppTest) -> None:
    _edit(toy)
    toy.selectbox(key="mode").select("stop early").run()
    assert [i.value for i in toy.info] == ["stopped"]
    assert not [m for m in toy.markdown if m.value.startswith("VALUES")]
    toy.selectbox(key="mode").select("ready").run()
    assert _line(toy, "VALUES") == EDITED


def test_uploads_are_remembered_after_a_page_switch(toy: AppTest) -> None:
    toy.file_uploader[0].set_value([("a.txt", b"hello", "text/plain")]).run()
    assert _line(toy, "FILES") == "FILES a.txt:5"
    toy.switch_page("app_pages/other.py").run()
    toy.switch_page("app_pages/work.py").run()
    assert _line(toy, "FILES") == "FILES a.txt:5"
    assert any("Using your earlier upload: a.txt" in c.value for c in toy.caption)
    # "Forget" drops them.
    toy.button(key="_lexlens_uploads_docs_forget").click().run()
    assert _line(toy, "FILES") == "FILES none"


def test_uploads_survive_an_early_stop_but_not_their_removal(toy: AppTest) -> None:
    toy.file_uploader[0].set_value([("b.csv", b"x,y\n1,2\n", "text/csv")]).run()
    toy.selectbox(key="mode").select("stop early").run()
    toy.selectbox(key="mode").select("ready").run()
    assert _line(toy, "FILES") == "FILES b.csv:8"
    # A new upload replaces the remembered one ...
    toy.file_uploader[0].set_value([("c.txt", b"abc", "text/plain")]).run()
    assert _line(toy, "FILES") == "FILES c.txt:3"
    # ... and emptying the uploader on the page forgets it (no resurrection).
    toy.file_uploader[0].clear().run()
    assert _line(toy, "FILES") == "FILES none"


# ------------------------------------------------------------------------- the real app


def _pages() -> list[tuple[str, str, str, str]]:
    """``PAGES`` of app/main.py, read from its source (running it needs a Streamlit run)."""
    tree = ast.parse(MAIN.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "PAGES":
            return ast.literal_eval(node.value)
    raise AssertionError("app/main.py defines no PAGES list")


def test_every_page_file_exists_with_its_own_url() -> None:
    pages = _pages()
    assert len(pages) >= 6
    urls = [url for _, _, _, url in pages]
    assert len(set(urls)) == len(urls) and all(urls)
    assert "home" not in urls  # the hidden root page's path
    for path, *_ in pages:
        assert (MAIN.parent / path).is_file(), path


@pytest.fixture(scope="module")
def app() -> AppTest:
    return AppTest.from_file(str(MAIN), default_timeout=120).run()


def test_root_shows_the_text_page(app: AppTest) -> None:
    assert not app.exception
    assert [h.value for h in app.header][:1] == ["Text"]
    assert any(t.label == "Text" for t in app.text_area)


def test_text_survives_a_page_switch_and_a_checkpoint_detour(app: AppTest) -> None:
    typed = "a red bicycle leaning on a wall"
    area = next(t for t in app.text_area if t.label == "Text")
    area.input(typed)
    next(b for b in app.button if b.label == "Encode").click().run()
    assert not app.exception
    assert app.session_state["text_input"] == typed

    # "local checkpoint directory…" and back: the page stops early in between.
    picker = app.sidebar.selectbox(key="text_encoder")
    picker.select("local checkpoint directory…").run()
    assert any("checkpoint directory" in i.value for i in app.info)
    app.sidebar.text_input(key="text_encoder_dir").input("/no/such/dir").run()
    assert app.error  # one clear error, no exception
    assert not app.exception
    app.sidebar.selectbox(key="text_encoder").select("splade-tiny").run()
    area = next(t for t in app.text_area if t.label == "Text")
    assert area.value == typed

    # Another page and back.
    app.switch_page("app_pages/contrib.py").run()
    assert not app.exception
    app.switch_page("app_pages/text.py").run()
    assert not app.exception
    area = next(t for t in app.text_area if t.label == "Text")
    assert area.value == typed
    # The checkpoint path typed earlier is kept too.
    app.sidebar.selectbox(key="text_encoder").select("local checkpoint directory…").run()
    assert app.sidebar.text_input(key="text_encoder_dir").value == "/no/such/dir"
    app.sidebar.selectbox(key="text_encoder").select("splade-tiny").run()
