"""An encoder spec typed into a page is held to the data roots as a whole: split as the
loader splits it, every path it names — the checkpoint folder's files, the codebook
suffix's file, what its ``lexlens_dense_pq.json`` names — checked once every link is
followed, before anything is loaded.

Each test is named by the kind of failure it guards against."""

from __future__ import annotations

import json

import pytest

from lexlens.app.runtime.state import CUSTOM
from lexlens.models.packaged import default_corpus
from tests.helpers import app_page
from tests.models.test_models_dense_dirs import write_st_dir

SECRET = "secret: the launch codes\n"


@pytest.fixture(scope="module")
def places(tmp_path_factory):
    """A data root with a dense checkpoint and a corpus, and a folder outside it with a
    corpus, a private file and a model of its own; links from the root to each."""
    base = tmp_path_factory.mktemp("spec-roots")
    root, outside = base / "root", base / "outside"
    write_st_dir(root / "mymodel", pooling="cls", normalize=False, seed=5)
    write_st_dir(outside / "model", pooling="cls", normalize=False, seed=6)
    texts = "\n".join(" ".join(t.split()[:8]) for t in default_corpus()[:300]) + "\n"
    (root / "corpus.txt").write_text(texts)
    (outside / "corpus.txt").write_text(texts)
    (outside / "secret.txt").write_text(SECRET)
    (root / "corpus-link.txt").symlink_to(outside / "corpus.txt")
    (root / "zero").symlink_to("/dev/zero")
    (root / "model-link").symlink_to(outside / "model")
    leaky = root / "leaky-model"
    write_st_dir(leaky, pooling="cls", normalize=False, seed=7)
    (leaky / "vocab.txt").unlink()
    (leaky / "vocab.txt").symlink_to(outside / "secret.txt")
    for name, codebook, base_model in (
        ("pq-corpus-outside", {"fit": {"corpus": str(outside / "corpus.txt"), "m": 4}}, None),
        ("pq-faiss-outside", {"faiss_index": str(outside / "secret.txt")}, None),
        ("pq-base-outside", {"fit": {"corpus": "default", "m": 4}}, str(outside / "model")),
    ):
        folder = root / name
        folder.mkdir()
        spec = {"format": "lexlens-dense-pq", "name": name, "codebook": codebook}
        spec["base_model"] = base_model or str(root / "mymodel")
        (folder / "lexlens_dense_pq.json").write_text(json.dumps(spec))
    return root, outside


def _attribution_with(at, typed: str):
    at.text_input(key="attr_encoder_dir").set_value(typed)
    at.run()
    assert not at.exception, at.exception
    return [e.value for e in at.error]


def test_security_a_typed_spec_reads_no_path_outside_the_data_roots(places, monkeypatch):
    """On the Attribution page, ``ROOT/mymodel+pq:8:/outside/corpus.txt`` fitted codebooks on
    a file outside the roots, ``+faiss:/outside/secret.txt`` answered with the file's first
    bytes (and "not found" for a missing one: an oracle), ``+pq:8:/dev/zero`` read until
    memory ran out. Each is refused in one line that names the roots, the same for a file
    that exists and one that does not."""
    root, outside = places
    monkeypatch.setenv("LEXLENS_DATA_ROOTS", str(root))
    at = app_page("app_pages/attribution.py")
    at.selectbox(key="attr_encoder").set_value(CUSTOM)
    at.run()
    typed = [
        f"{root}/mymodel+pq:4:{outside}/corpus.txt",
        f"{root}/mymodel+pq:4:{root}/corpus-link.txt",
        f"{root}/mymodel+faiss:{outside}/secret.txt",
        f"{root}/mymodel+faiss:{outside}/missing.index",
        f"{root}/mymodel+pq:4:/dev/zero",
        f"{root}/mymodel+pq:4:{root}/zero",
        f"minilm-pq+pq:4:{outside}/corpus.txt",
        f"{root}/mymodel+pq:4:{root}/corpus.txt+faiss:{outside}/secret.txt",
        f"{root}/mymodel+pq:4:{outside}/corpus.txt+faiss:{root}/corpus.txt",
        f"{root}/leaky-model",
        f"{root}/model-link+pq:4",
        f"{root}/pq-corpus-outside",
        f"{root}/pq-faiss-outside",
        f"{root}/pq-base-outside",
    ]
    for spec in typed:
        errors = _attribution_with(at, spec)
        refusals = [e for e in errors if "outside the data roots" in e]
        assert len(refusals) == 1 and "\n" not in refusals[0], (spec, errors)
        assert str(root) in refusals[0] or "link" in refusals[0], (spec, refusals)
        assert "secr" not in " ".join(errors).replace(str(outside / "secret.txt"), "FILE")
        assert "not found" not in " ".join(errors), (spec, errors)
    # Inside the roots the same spec loads: the check refuses what leaves them, nothing else.
    errors = _attribution_with(at, f"{root}/mymodel+pq:4:{root}/corpus.txt")
    assert not errors, errors


def test_security_a_typed_query_encoder_of_the_systems_view_is_held_to_the_roots(
    places, monkeypatch
):
    """The Evaluation page's "query encoders" field takes specs as the sidebar does: each
    is held to the data roots before the comparison starts."""
    from lexlens.app.views.systems import _spec
    from lexlens.models import LexlensError

    root, outside = places
    monkeypatch.setenv("LEXLENS_DATA_ROOTS", str(root))
    values = {"names": "", "gates": "", "with_exact": False}
    for encoders in (f"splade-tiny, {outside}/model", f"{root}/mymodel+faiss:{outside}/secret.txt"):
        with pytest.raises(LexlensError, match="outside the data roots"):
            _spec(["ix"], [], {**values, "encoders": encoders})
    spec = _spec(["ix"], [], {**values, "encoders": f"splade-tiny, {root}/mymodel+pq:4"})
    assert list(spec.query_encoders) == ["splade-tiny", f"{root.resolve()}/mymodel+pq:4"]
