"""The public entry points of stored collections (build_index, open_index, index_collection,
build_collection) refuse a wrong type or value of every argument with one LexlensError that
names the argument, before anything is read or written; StoredIndex answers the Collection
protocol every analysis reads collections through."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lexlens.analysis.collections.indexing import build_index, index_collection
from lexlens.analysis.collections.options import IndexOptions
from lexlens.analysis.collections.store import StoredIndex, open_index
from lexlens.analysis.collections.workspace_build import build_collection
from lexlens.analysis.core.collection import Collection
from tests.helpers import refused


def _texts(tmp_path: Path) -> Path:
    source = tmp_path / "texts.csv"
    source.write_text("id,text\na,a dog on the beach\nb,a cat in the snow\n", encoding="utf-8")
    return source


#: A wrong value of each option, and the start of the declared message that names it.
WRONG_OPTIONS = [
    ({"gate_k": "768"}, "gate_k must be"),
    ({"gate_k": -2}, "gate_k must be"),
    ({"gate_k": True}, "gate_k must be"),
    ({"batch_size": 0}, "batch_size must be an integer from 1 to 4,096, not 0"),
    ({"batch_size": 10**9}, "batch_size must be an integer from 1 to 4,096"),
    ({"batch_size": 2.5}, "batch_size must be"),
    ({"ray": 5}, "ray must be"),
    ({"ray": "anywhere"}, "ray must be local, auto or ray://HOST:PORT"),
    ({"postings": "yes"}, "postings must be true or false"),
    ({"captions": 5}, "captions must be"),
    ({"captions": ""}, "captions must be"),
    ({"ids": ["a", "b"]}, "ids must be"),
    ({"split": 5}, "split must be"),
    ({"split": "  "}, "split must be"),
    ({"images": 5}, "images must be"),
    ({"images": "a\0b"}, "images must be"),
    ({"image_column": 5}, "image_column must be"),
    ({"text_columns": "caption"}, "text_columns must be"),
    ({"text_columns": [1]}, "text_columns must be"),
    ({"text_columns": []}, "text_columns must be"),
    ({"topk": 768}, "'topk' is now 'gate_k'"),
    ({"options": "fast"}, "options must be IndexOptions, not str"),
]


def test_traceback_build_index_names_each_wrong_argument(splade, tmp_path):
    source, out = _texts(tmp_path), tmp_path / "ix"
    cases = [
        (lambda: build_index("splade-tiny", source, out), "encoder must be a loaded encoder"),
        (lambda: build_index(5, source, out), "encoder must be a loaded encoder"),
        (lambda: build_index(splade, 5, out), "source must be"),
        (lambda: build_index(splade, None, out), "source must be"),
        (lambda: build_index(splade, "", out), "source must be"),
        (lambda: build_index(splade, b"a dog", out), "source must be"),
        (lambda: build_index(splade, "a\0b", out), "source must be"),
        (lambda: build_index(splade, source, 5), "out must be a folder path, not int"),
        (lambda: build_index(splade, source, ""), "out must be a folder path"),
        (lambda: build_index(splade, source, out, progress=5), "progress must be a function"),
        (lambda: build_index(splade, source, out, source_label=5), "source_label must be text"),
        (lambda: build_index(splade, source, out, encoder_spec=[]), "encoder_spec must be text"),
        (lambda: build_index(splade, source, out, split="test"), "--split, --images"),
        (lambda: build_index(splade, source, out, ids="ids.txt"), "--captions and --ids apply"),
        (lambda: build_index(splade, "sample:nothing", out), "no sample benchmark 'nothing'"),
    ]
    cases += [
        (lambda wrong=wrong: build_index(splade, source, out, **wrong), needle)
        for wrong, needle in WRONG_OPTIONS
    ]
    for call, needle in cases:
        refused(call, needle)
    assert not out.exists()


def test_traceback_index_collection_names_each_wrong_argument(tmp_path):
    source, out = _texts(tmp_path), tmp_path / "new" / "ix"
    cases = [
        (lambda: index_collection(5, source, out), "encoder must be an encoder, a registry n"),
        (lambda: index_collection("", source, out), "encoder must be"),
        (lambda: index_collection("splade-tiny", 5, out), "source must be"),
        (lambda: index_collection("splade-tiny", [source], out), "source must be"),
        (lambda: index_collection("splade-tiny", source, 5), "out must be a folder path"),
        (lambda: index_collection("splade-tiny", source, None), "out must be a folder path"),
        (lambda: index_collection("splade-tiny", source, out, device=0), "device must be 'cpu'"),
        (lambda: index_collection("splade-tiny", source, out, progress="yes"), "progress must"),
        (lambda: index_collection("splade-tiny", source, out, images="x"), "--split, --images"),
    ]
    cases += [
        (lambda wrong=wrong: index_collection("splade-tiny", source, out, **wrong), needle)
        for wrong, needle in WRONG_OPTIONS
    ]
    for call, needle in cases:
        refused(call, needle)
    assert not (tmp_path / "new").exists()


def test_traceback_build_collection_names_each_wrong_argument(splade, tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("LEXLENS_HOME", str(home))
    source = str(_texts(tmp_path))
    roots = [tmp_path]

    def build(*args, **kwargs):
        return build_collection(*args, **kwargs)

    cases = [
        (lambda: build("splade-tiny", "pets", "path", path=source), "encoder must be a loaded"),
        (lambda: build(splade, 5, "path", path=source), "collection name must be text, not int"),
        (lambda: build(splade, "../pets", "path", path=source), "collection name '../pets'"),
        (lambda: build(splade, "pets", 5, path=source), "source kind 5: one of upload, path"),
        (lambda: build(splade, "pets", "ftp", path=source), "source kind 'ftp': one of"),
        (lambda: build(splade, "pets", "path", path=5), "path must be text, not int"),
        (lambda: build(splade, "pets", "path", path=" "), "type the path"),
        (lambda: build(splade, "pets", "upload", files="t.csv"), "files must be a list of"),
        (lambda: build(splade, "pets", "upload", files=[("t.csv", "a")]), "files must be"),
        (lambda: build(splade, "pets", "upload", files=[b"x"]), "files must be"),
        (lambda: build(splade, "pets", "path", path=source, roots=str(tmp_path)), "roots must"),
        (lambda: build(splade, "pets", "path", path=source, roots=[5]), "roots must be"),
        (lambda: build(splade, "pets", "path", path=source, progress=1), "progress must be"),
    ]
    cases += [
        (
            lambda wrong=wrong: build(splade, "pets", "path", path=source, roots=roots, **wrong),
            needle,
        )
        for wrong, needle in WRONG_OPTIONS
    ]
    for call, needle in cases:
        refused(call, needle)
    assert not home.exists()


def test_traceback_open_index_names_its_argument(splade, tmp_path):
    for wrong, shown in [
        (5, "int"),
        (None, "NoneType"),
        (3.5, "float"),
        ("", "''"),
        ("a\0b", "'a\\x00b'"),
        (["ix"], "list"),
    ]:
        refused(
            lambda wrong=wrong: open_index(wrong),
            f"path must be a stored index or its folder, not {shown}",
        )
    refused(lambda: open_index(tmp_path / "none"), "not found")
    index = open_index(build_index(splade, _texts(tmp_path), tmp_path / "ix").out)
    assert open_index(index) is index


def test_traceback_a_wrong_option_reads_the_same_on_the_command_line(cli, tmp_path):
    """The declared message, the option spelled as its flag."""
    source = _texts(tmp_path)
    for flag, value, needle in [
        ("--batch-size", "0", "--batch-size must be an integer from 1 to 4,096, not 0"),
        ("--gate-k", "-2", "--gate-k must be -1 (every dimension)"),
        ("--ray", "anywhere", "--ray must be local, auto or ray://HOST:PORT"),
        ("--text-columns", ",", "--text-columns must be one or more column names"),
    ]:
        run = cli(
            "index",
            "--encoder",
            "splade-tiny",
            "--source",
            source,
            "--out",
            tmp_path / "ix",
            flag,
            value,
        )
        assert run.returncode == 2 and run.stderr.count("\n") == 1, run.stderr
        assert needle in run.stderr, run.stderr
    assert not (tmp_path / "ix").exists()


def test_traceback_every_option_is_a_flag_of_lexlens_index():
    """The flags come from the declarations: one per option, spelled as its name."""
    from lexlens.app.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    index = sub.choices["index"]
    flags = {s for action in index._actions for s in action.option_strings}
    for declared in IndexOptions.declared():
        assert declared.flag in flags, declared.flag
    assert "--topk" not in flags and "--text-column" not in flags


def test_traceback_a_stored_index_answers_the_collection_protocol(splade, tmp_path):
    index = open_index(build_index(splade, _texts(tmp_path), tmp_path / "ix").out)
    assert isinstance(index, StoredIndex) and isinstance(index, Collection)
    assert index.modality == "text" and index.encoder_name == "splade-tiny"
    assert len(index.vocab) == index.vocab_size == 30522 and not index.has_labels
    assert len(index) == 2 and index.norms.shape == (2,)
    cols, weights = index.row(1)
    assert np.isclose(np.sqrt(float((weights.astype(np.float64) ** 2).sum())), index.norms[1])
    assert [m["id"] for m in index.meta([1, 0])] == ["b", "a"]
    assert index.column("id") == ["a", "b"] and index.describe()["items"] == 2
    assert cols.dtype == np.int32 and np.all(np.diff(cols) > 0)
