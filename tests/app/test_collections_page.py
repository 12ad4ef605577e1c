"""The Collections page (AppTest): build from a server path, see the card, survive a page
switch, delete; errors shown without losing earlier results."""

from __future__ import annotations

from tests.helpers import app_page, click_and_wait


def test_build_open_switch_pages_and_delete(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("LEXLENS_HOME", str(home))
    monkeypatch.setenv("LEXLENS_DATA_ROOTS", str(tmp_path))  # the source is typed as a path
    source = tmp_path / "pets.csv"
    source.write_text("id,text,labels\na,a dog on the beach,dog|beach\nb,a cat in the snow,cat\n")
    # Encoders load when the user builds (in the build's job), not when the page is drawn.
    import lexlens.models

    loaded: list[str] = []
    real = lexlens.models.load_encoder
    monkeypatch.setattr(
        lexlens.models,
        "load_encoder",
        lambda spec, device=None: loaded.append(spec) or real(spec, device),
    )
    at = app_page("app_pages/collections.py")
    assert not at.exception and not at.error
    assert any("No stored collection" in i.value for i in at.info)
    at.radio(key="collections_source").set_value("Path on this server")
    at.run()
    at.text_input(key="collections_path").set_value(str(source))
    at.run()
    assert loaded == []
    # The typed path proposes its name and an encoder that reads it (texts).
    assert at.text_input(key="collections_name").value == "pets"
    assert at.selectbox(key="collections_encoder").value == "splade-tiny"
    # An image encoder chosen anyway: a text file is refused with one clear message.
    at.selectbox(key="collections_encoder").set_value("efficientnet-lite0-lexical").run()
    click_and_wait(at, at.button[0].click)
    assert not at.exception
    assert loaded == ["efficientnet-lite0-lexical"]
    assert any("does not encode text" in e.value for e in at.error)
    assert not (home / "collections" / "pets").exists()
    # The failed build can be dismissed: off the page, its run gone from History.
    from lexlens.app.runtime import runs

    failed = [r.id for r in runs.list_runs() if r.status == "failed"]
    [b for b in at.button if b.label == "Dismiss"][0].click().run()
    assert not any("does not encode text" in e.value for e in at.error)
    assert failed and not {r.id for r in runs.list_runs()} & set(failed)
    at.selectbox(key="collections_encoder").set_value("splade-tiny")
    at.run()
    click_and_wait(at, at.button[0].click)
    assert not at.exception and not at.error
    assert (home / "collections" / "pets" / "manifest.json").is_file()
    assert any("pets: 2 items" in s.value for s in at.success)
    assert at.metric[0].value == "2"
    listed = at.dataframe[0].value
    assert list(listed["name"]) == ["pets"] and listed["items"].iloc[0] == 2
    # Another page and back: the inputs and the stored collection are still there.
    at.switch_page("app_pages/text.py")
    at.run()
    at.switch_page("app_pages/collections.py")
    at.run()
    assert not at.exception
    assert at.text_input(key="collections_path").value == str(source)
    assert at.selectbox(key="collections_open").value == "pets"
    # Building again from the unchanged source encodes nothing, and reuses every item.
    click_and_wait(at, at.button[0].click)
    assert any("nothing to encode" in s.value and "reused 2" in s.value for s in at.success)
    # Delete.
    [b for b in at.button if b.key == "collections_delete"][0].click()
    at.run()
    assert not (home / "collections" / "pets").exists()
    assert any("No stored collection" in i.value for i in at.info)


def test_a_benchmark_from_a_server_path_keeps_its_queries(tmp_path, monkeypatch):
    """A Karpathy split JSON with its image folder and split, as ``lexlens index`` takes it."""
    from lexlens.analysis.collections.store import open_index
    from tests.helpers import ROOT, skimage_path

    home = tmp_path / "home"
    monkeypatch.setenv("LEXLENS_HOME", str(home))
    bench = ROOT / "data" / "benchmarks" / "photos_karpathy"
    at = app_page("app_pages/collections.py")
    at.radio(key="collections_source").set_value("Path on this server").run()
    at.text_input(key="collections_path").set_value(str(bench / "dataset_photos.json")).run()
    assert at.selectbox(key="collections_encoder").value == "efficientnet-lite0-lexical"
    at.text_input(key="collections_images").set_value(str(skimage_path("chelsea.png").parent))
    at.text_input(key="collections_split").set_value("test")
    at.text_input(key="collections_name").set_value("karpathy")
    at.run()
    click_and_wait(at, at.button[0].click)
    assert not at.exception and not at.error, [e.value for e in at.error]
    index = open_index(home / "collections" / "karpathy")
    queries, qrels = index.benchmark_files
    assert len(index) == 12 and index.modality == "image"
    assert queries.is_file() and qrels.is_file()


def test_silent_wrong_a_path_outside_the_data_roots_is_refused_as_it_is_typed(
    tmp_path, monkeypatch
):
    """A server path outside the data roots (here through a link inside a root) is refused
    under the field as soon as it is typed — the build's own one line — and Build is
    disabled, before any press; a path inside the roots takes the refusal away."""
    from lexlens.analysis.core.roots import inside_roots
    from lexlens.models import LexlensError

    root, outside = tmp_path / "root", tmp_path / "private"
    root.mkdir()
    outside.mkdir()
    (outside / "notes.csv").write_text("id,text\na,private\n")
    (root / "leak").symlink_to(outside)
    (root / "pets.csv").write_text("id,text\na,a dog on the beach\n")
    monkeypatch.setenv("LEXLENS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LEXLENS_DATA_ROOTS", str(root))
    typed = str(root / "leak" / "notes.csv")
    try:
        inside_roots(typed, [root], "path")
    except LexlensError as exc:
        expected = str(exc)
    assert "outside the data roots" in expected
    at = app_page("app_pages/collections.py")
    at.radio(key="collections_source").set_value("Path on this server").run()
    at.selectbox(key="collections_encoder").set_value("splade-tiny").run()
    build = next(b for b in at.button if b.label == "Build")
    assert not build.disabled
    at.text_input(key="collections_path").set_value(typed).run()
    assert not at.exception
    assert [e.value for e in at.error] == [expected]
    assert next(b for b in at.button if b.label == "Build").disabled
    assert not (tmp_path / "home" / "collections").exists()
    at.text_input(key="collections_path").set_value(str(root / "pets.csv")).run()
    assert not at.error
    assert not next(b for b in at.button if b.label == "Build").disabled


def test_vectors_encoded_elsewhere_import_with_their_parity_line(tmp_path, monkeypatch, splade):
    """A JsonVectorCollection written by an independent writer (plain ``json``, from
    splade-tiny's own vectors) imports from the page as ``lexlens index --vectors`` imports
    it: the same parity line, the same stored vectors; a queries file outside the data roots
    is refused in one line, nothing written."""
    import json

    import numpy as np

    from lexlens.analysis.collections.indexing import build_index
    from lexlens.analysis.collections.store import open_index
    from lexlens.analysis.collections.vector_import import import_vectors

    root = tmp_path / "root"
    root.mkdir()
    texts = ["a dog on the beach", "a cat in the snow", "two horses in a field at dawn"]
    (tmp_path / "items.jsonl").write_text(
        "".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(texts))
    )
    build_index(splade, tmp_path / "items.jsonl", tmp_path / "source")
    source = open_index(tmp_path / "source")
    rows = source.rows(0, len(source))
    lines = []
    for i, text in enumerate(texts):
        a, b = rows.indptr[i], rows.indptr[i + 1]
        weights = {
            source.vocab[c]: round(float(w) * 100)
            for c, w in zip(rows.indices[a:b], rows.data[a:b], strict=True)
        }
        lines.append({"id": f"d{i}", "contents": text, "vector": weights})
    corpus = root / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(line) + "\n" for line in lines))
    (tmp_path / "queries.tsv").write_text("q1\ta dog\n")
    monkeypatch.setenv("LEXLENS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LEXLENS_DATA_ROOTS", str(root))
    at = app_page("app_pages/collections.py")
    at.radio(key="collections_source").set_value("Vectors encoded elsewhere").run()
    at.selectbox(key="collections_encoder").set_value("splade-tiny").run()
    at.text_input(key="collections_vectors_path").set_value(str(corpus)).run()
    at.number_input(key="collections_import_scale").set_value(100.0).run()
    at.text_input(key="collections_name").set_value("imported").run()
    # A queries file outside the data roots: refused in one line, nothing written.
    at.text_input(key="collections_import_queries").set_value(str(tmp_path / "queries.tsv"))
    at.run()
    click_and_wait(at, next(b for b in at.button if b.label == "Import").click)
    assert not at.exception
    assert any("outside the data roots" in e.value for e in at.error)
    assert not (tmp_path / "home" / "collections" / "imported").exists()
    at.text_input(key="collections_import_queries").set_value("").run()
    click_and_wait(at, next(b for b in at.button if b.label == "Import").click)
    assert not at.exception and not at.error
    assert any("imported: 3 items imported" in s.value for s in at.success)
    reference = import_vectors("splade-tiny", corpus, tmp_path / "cli", scale=100.0, device="cpu")
    parity = [n for n in reference.notes if n.startswith("parity with splade-tiny")]
    assert parity and parity[0] in [c.value for c in at.caption]
    stored = open_index(tmp_path / "home" / "collections" / "imported")
    cli = open_index(tmp_path / "cli")
    for name in ("indptr", "indices", "data"):
        np.testing.assert_array_equal(getattr(stored, name), getattr(cli, name))
