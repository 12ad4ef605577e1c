"""The collection contract: every module outside ``analysis/collections/`` reads a collection
through the protocols alone (``Collection``, and ``StoredCollection`` for one in the stored
format), read from the code; and both kinds of collection answer every member of them with
real values, checked against references made here."""

from __future__ import annotations

import ast
import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from lexlens.analysis.collections.manifest import Manifest
from lexlens.analysis.collections.memory import MemoryCollection
from lexlens.analysis.collections.store import open_index
from lexlens.analysis.collections.store_writer import write_index
from lexlens.analysis.collections.stored import StoredCollection, is_stored
from lexlens.analysis.core.collection import Collection
from lexlens.models.base import InputError

ROOT = Path(__file__).resolve().parents[2]
#: Where the contract holds: the library, the front ends and the benchmarks, but the
#: folder that implements the collections.
CHECKED = ("analysis", "app", "bench")
IMPLEMENTATION = ROOT / "analysis" / "collections"
#: The dataset readers: a BEIR folder holds a ``queries.jsonl`` too (no index's).
DATASETS = ROOT / "analysis" / "datasets"
#: Files only a stored index's own code opens by name.
INDEX_FILES = frozenset(
    {
        "manifest.json",
        "vocab.txt",
        "words.txt",
        "items.parquet",
        "indptr.npy",
        "indices.npy",
        "data.npy",
        "norms.npy",
        "token_ids.npy",
        "token_indptr.npy",
        "postings_indptr.npy",
        "postings_blocks.npy",
        "postings_items.npy",
        "postings_weights.npy",
        "postings_scale.json",
        "records.bin",
        "records_index.npy",
    }
)
#: The files an index keeps beside its items when built from a benchmark.
KEPT_FILES = frozenset({"queries.jsonl", "qrels.tsv"})
#: The file-name constants of the stored format (importing one is opening a file by name).
FORMAT_NAMES = frozenset({"MANIFEST", "TOKEN_IDS", "TOKEN_INDPTR", "RECORDS", "RECORDS_INDEX"})
#: Members an encoder has too (``getattr(encoder, "vocab", None)`` probes no collection).
SHARED_WITH_ENCODERS = frozenset({"vocab"})
KINDS = ("StoredIndex", "manifest", "file", "getattr")


def members(protocol: type) -> set[str]:
    """The names a protocol declares, its own and those of the protocols it extends."""
    names: set[str] = set()
    for klass in protocol.__mro__:
        if klass is object or klass.__module__ == "typing":
            continue
        names |= {n for n in vars(klass) if not n.startswith("_")}
        names |= set(vars(klass).get("__annotations__", {}))
    return names


def _modules() -> list[Path]:
    return [
        path
        for top in CHECKED
        for path in sorted((ROOT / top).rglob("*.py"))
        if IMPLEMENTATION not in path.parents
    ]


def _is_manifest(node: ast.AST) -> bool:
    """``manifest`` or ``x.manifest`` (any name holding the word)."""
    if isinstance(node, ast.Name):
        return "manifest" in node.id.lower()
    return isinstance(node, ast.Attribute) and "manifest" in node.attr.lower()


def _docstrings(tree: ast.Module) -> set[int]:
    """The ids of the module's, classes' and functions' docstring constants."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _kind(node: ast.AST, docstrings: set[int], files: frozenset[str], probed: set[str]):
    """Which forbidden read ``node`` is (one of :data:`KINDS`), or ``None`` (an import of
    both ``StoredIndex`` and a file name is the first)."""
    if isinstance(node, ast.Name) and node.id == "StoredIndex":
        return "StoredIndex"
    if isinstance(node, ast.Attribute) and node.attr == "StoredIndex":
        return "StoredIndex"
    if isinstance(node, ast.ImportFrom) and ".collections" in (node.module or ""):
        names = {alias.name for alias in node.names}
        return "StoredIndex" if "StoredIndex" in names else "file" if names & FORMAT_NAMES else None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return "StoredIndex" if "StoredIndex" in node.value and id(node) not in docstrings else None
    if isinstance(node, ast.Subscript) and _is_manifest(node.value):
        return "manifest"
    if isinstance(node, ast.Call):
        func, args = node.func, node.args
        if isinstance(func, ast.Attribute) and func.attr == "get" and _is_manifest(func.value):
            return "manifest"
        if isinstance(func, ast.Name) and func.id == "getattr" and len(args) >= 2:
            name = args[1]
            return "getattr" if isinstance(name, ast.Constant) and name.value in probed else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        on_index = isinstance(node.left, ast.Attribute) and node.left.attr == "path"
        right = node.right
        named = isinstance(right, ast.Constant) and right.value in files
        return "file" if on_index or named else None
    return None


def findings(path: Path) -> dict[str, list[str]]:
    """What ``path`` does that the contract forbids outside the collections, by kind, each
    as ``line: code``: naming ``StoredIndex`` (an import, a name, a string annotation),
    indexing or ``.get()``-ing a manifest, building the path of an index's file (``x.path /
    …``, or a path ending in one of the format's file names) or importing the format's file
    names, and ``getattr`` of a member the protocols declare."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    files = INDEX_FILES | (KEPT_FILES if DATASETS not in path.parents else frozenset())
    probed = (members(Collection) | members(StoredCollection)) - SHARED_WITH_ENCODERS
    docstrings = _docstrings(tree)
    found: dict[str, list[str]] = {kind: [] for kind in KINDS}
    for node in ast.walk(tree):
        kind = _kind(node, docstrings, files, probed)
        if kind is not None:
            found[kind].append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def all_findings() -> dict[str, dict[str, list[str]]]:
    """Every forbidden read outside the collections, by kind, then by module."""
    out: dict[str, dict[str, list[str]]] = {}
    for path in _modules():
        for kind, lines in findings(path).items():
            if lines:
                out.setdefault(kind, {})[str(path.relative_to(ROOT))] = lines
    return out


@pytest.mark.parametrize("kind", KINDS)
def test_no_module_outside_the_collections_reads_past_the_protocol(kind):
    """No module outside ``analysis/collections/`` names ``StoredIndex`` (a type hint is
    ``Collection`` or ``StoredCollection``; a kind is a protocol question, ``is_stored``),
    indexes or ``.get()``s a manifest (the typed ``Manifest``'s fields are read), builds the
    path of a file of an index, or probes a collection with ``getattr`` for a member the
    protocols declare."""
    found = all_findings().get(kind, {})
    listed = "\n".join(f"{m}: {line}" for m, lines in found.items() for line in lines)
    assert not found, f"{kind} read outside analysis/collections/:\n{listed}"


def test_the_code_reader_finds_each_kind_it_forbids(tmp_path):
    """The reader is not blind: a module doing each forbidden thing is caught, and the
    allowed look-alikes (an encoder's vocabulary, a docstring) are not."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        '"""A docstring may name StoredIndex."""\n'
        "from lexlens.analysis.collections.store import StoredIndex\n"
        "from lexlens.analysis.collections.token_ids import TOKEN_IDS\n"
        "def f(ix: 'StoredIndex', other, folder, encoder):\n"
        "    isinstance(ix, StoredIndex)\n"
        "    ix.manifest['gate_k']\n"
        "    other.manifest.get('modality')\n"
        "    ix.path / 'anything'\n"
        "    folder / 'vocab.txt'\n"
        "    folder / 'qrels.tsv'\n"
        "    getattr(ix, 'gate_k', 10)\n"
        "    getattr(encoder, 'vocab', None)\n"
    )
    found = findings(bad)
    assert len(found["StoredIndex"]) == 3  # the import, the string annotation, isinstance
    assert found["manifest"] == ["6: ix.manifest['gate_k']", "7: other.manifest.get('modality')"]
    assert len(found["file"]) == 4  # the constant's import, ix.path / …, the two file names
    assert found["getattr"] == ["11: getattr(ix, 'gate_k', 10)"]


# -- both kinds answer every member ---------------------------------------------------------

VOCAB = ["[CLS]", "dog", "cat", "beach", "sofa", "##s"]
#: Each item's gated vector, dense (the reference every member is checked against).
DENSE = np.array(
    [
        [0.0, 1.5, 0.0, 0.25, 0.0, 0.0],
        [0.0, 0.0, 2.0, 0.0, 0.75, 0.0],
        [0.0, 0.5, 0.5, 0.0, 0.0, 0.125],
    ],
    dtype=np.float32,
)
IDS = ["d1", "d2", "d3"]
TEXTS = ["a dog on the beach", "a cat on a sofa", "dogs and cats"]
LABELS = [frozenset({"dog"}), frozenset({"cat"}), frozenset({"dog", "cat"})]
GATE_K = 5
QUERIES = '{"_id": "q1", "text": "dog"}\n{"_id": "q2", "text": "cat"}\n'
QRELS = "q1\t0\td1\t1\nq1\t0\td3\t1\n"


def _reference_hash(vocab: list[str]) -> str:
    return hashlib.sha256("".join(t + "\n" for t in vocab).encode("utf-8")).hexdigest()


@pytest.fixture
def stored(tmp_path) -> StoredCollection:
    """A stored index of the reference vectors (with postings), keeping two queries and
    two judgements beside its items."""
    rows = []
    for i, item in enumerate(IDS):
        cols = np.flatnonzero(DENSE[i])
        meta = {"id": item, "text": TEXTS[i], "labels": sorted(LABELS[i])}
        rows.append((meta, cols, DENSE[i, cols]))
    encoder = {"name": "toy", "spec": "toy@/models/toy", "capabilities": ["text-lexical"]}
    ix = write_index(tmp_path / "ix", VOCAB, rows, encoder=encoder, gate_k=GATE_K, postings=True)
    (tmp_path / "ix" / "queries.jsonl").write_text(QUERIES)
    (tmp_path / "ix" / "qrels.tsv").write_text(QRELS)
    return open_index(ix.path)


@pytest.fixture
def memory() -> MemoryCollection:
    return MemoryCollection(
        IDS, TEXTS, sp.csr_matrix(DENSE), VOCAB, LABELS, "toy-texts", "toy", gate_k=GATE_K
    )


def _checks(collection: Collection, expected: dict) -> dict:
    """A check of every member of :class:`Collection`, by name (each asserts)."""
    n = len(IDS)

    def row(i: int) -> None:
        cols, weights = collection.row(i)
        assert np.array_equal(cols, np.flatnonzero(DENSE[i]))
        assert np.array_equal(weights, DENSE[i, cols])

    def meta() -> None:
        found = collection.meta([2, 0])
        assert [(m["id"], m["text"], m["row"]) for m in found] == [
            (IDS[2], TEXTS[2], 2),
            (IDS[0], TEXTS[0], 0),
        ]
        assert [sorted(m["labels"]) for m in found] == [sorted(LABELS[2]), sorted(LABELS[0])]

    def matrix() -> None:
        got = collection.matrix()
        assert sp.issparse(got) and got.format == "csr" and got.dtype == np.float32
        assert np.array_equal(got.toarray(), DENSE)

    def benchmark_files() -> None:
        found = collection.benchmark_files
        if expected["path"] is None:
            assert found is None
        else:
            assert [p.name for p in found] == ["queries.jsonl", "qrels.tsv"]
            assert found[0].read_text() == QUERIES and found[1].read_text() == QRELS

    def fingerprint() -> None:
        value = collection.fingerprint
        assert isinstance(value, str) and len(value) == 16 and int(value, 16) >= 0
        assert value == expected["same"].fingerprint  # what it holds, not which object
        assert value != expected["other"].fingerprint  # other vectors: another

    return {
        "modality": lambda: collection.modality == "text",
        "vocab": lambda: list(collection.vocab) == VOCAB,
        "vocab_size": lambda: collection.vocab_size == len(VOCAB),
        "has_labels": lambda: collection.has_labels is True,
        "encoder_name": lambda: collection.encoder_name == "toy",
        "norms": lambda: np.allclose(collection.norms, np.linalg.norm(DENSE, axis=1), rtol=1e-6),
        "row": lambda: [row(i) for i in range(n)],
        "meta": meta,
        "column": lambda: collection.column("id") == IDS,
        "describe": lambda: (
            collection.describe()["items"] == n and collection.describe()["encoder"] == "toy"
        ),
        "label": lambda: collection.label == expected["label"],
        "path": lambda: collection.path == expected["path"],
        "gate_k": lambda: collection.gate_k == GATE_K,
        "encoder_spec": lambda: collection.encoder_spec == expected["spec"],
        "vocab_hash": lambda: collection.vocab_hash == _reference_hash(VOCAB),
        "fingerprint": fingerprint,
        "known_words": lambda: collection.known_words == frozenset(),
        "benchmark_files": benchmark_files,
        "matrix": matrix,
        "kept_benchmark": lambda: collection.kept_benchmark() == expected["kept"],
    }


def _answers_every_member(checks: dict, protocol: type) -> None:
    assert set(checks) == members(protocol), "a member of the protocol is not checked"
    for name, check in checks.items():
        assert check() is not False, name


def test_a_stored_index_answers_every_member_of_the_collection(stored, tmp_path):
    """A stored index answers each member of ``Collection`` with the values its build was
    given: a copy of its folder has the same fingerprint, another gate another."""
    copy = open_index(shutil.copytree(stored.path, tmp_path / "copy"))
    again = write_index(
        tmp_path / "other",
        VOCAB,
        [
            ({"id": i}, np.flatnonzero(DENSE[n]), DENSE[n, np.flatnonzero(DENSE[n])])
            for n, i in enumerate(IDS)
        ],
        encoder={"name": "toy"},
        gate_k=GATE_K + 1,
    )
    expected = {
        "label": str(stored.path),
        "path": stored.path,
        "spec": "toy@/models/toy",
        "kept": {"queries": 2, "judged_queries": 1, "judgements": 2},
        "same": copy,
        "other": again,
    }
    assert isinstance(stored, Collection) and is_stored(stored)
    _answers_every_member(_checks(stored, expected), Collection)


def test_a_collection_in_memory_answers_every_member_of_the_collection(memory):
    """A collection held in memory answers each member of ``Collection``: no folder, no
    kept queries, its own name, gate and encoder; the same vectors the same fingerprint."""
    twin = MemoryCollection(IDS, TEXTS, DENSE, VOCAB, LABELS, "another name", "toy", GATE_K)
    moved = DENSE.copy()
    moved[0, 1] = 1.25
    other = MemoryCollection(IDS, TEXTS, moved, VOCAB, LABELS, "toy-texts", "toy", GATE_K)
    expected = {
        "label": "toy-texts",
        "path": None,
        "spec": "toy",
        "kept": None,
        "same": twin,
        "other": other,
    }
    assert isinstance(memory, Collection) and not is_stored(memory)
    assert not isinstance(memory, StoredCollection)
    _answers_every_member(_checks(memory, expected), Collection)


def _stored_checks(ix: StoredCollection, dense: np.ndarray, gate_k: int, base: Path) -> dict:
    """A check of every member :class:`StoredCollection` adds, by name (each asserts):
    ``ix`` holds the vectors ``dense`` at ``gate_k``, in the index folder ``base``."""
    reference = sp.csr_matrix(dense)
    mean = dense.astype(np.float64).mean(axis=0)
    view = ix.manifest.extra.get("regated_from") is not None

    def manifest() -> None:
        m = ix.manifest
        assert isinstance(m, Manifest) and m.gate_k == gate_k and m.counts.nnz == reference.nnz
        if not view:  # the manifest as it was read, byte for byte
            assert m.to_json() == (base / "manifest.json").read_bytes()

    def batches() -> None:
        got = list(ix.iter_batches(batch_size=2, columns=["id"]))
        assert [(b.start, b.stop, b.ids) for b in got] == [(0, 2, IDS[:2]), (2, 3, IDS[2:])]
        assert np.array_equal(sp.vstack([b.vectors for b in got]).toarray(), dense)

    def corrupt() -> None:
        error = ix.corrupt("data.npy was eaten")
        assert isinstance(error, InputError) and "data.npy was eaten" in str(error)

    def postings() -> None:
        if view:
            assert ix.postings is None  # its vectors are not the stored postings'
            return
        stored = ix.postings
        indptr, weights, scale = stored.indptr, stored.weights, stored.scale
        items = np.concatenate([stored.term_rows(t) for t in range(len(VOCAB))])
        csc = reference.tocsc()
        assert np.array_equal(indptr, csc.indptr) and np.array_equal(items, csc.indices)
        # float16 postings: each weight within float16's relative rounding of the stored one
        assert np.allclose(weights.astype(np.float64) * scale, csc.data, rtol=2.0**-10, atol=0)

    def with_vectors() -> None:
        other = ix.with_vectors(reference * 2, gate_k, "doubled")
        assert isinstance(other, StoredCollection) and other.label == "doubled"
        assert np.array_equal(other.matrix().toarray(), 2 * dense)

    def strongest() -> None:
        tokens = [t.token for t, _ in ix.strongest_readings(2)]
        assert tokens == [VOCAB[i] for i in np.argsort(-mean, kind="stable")[:2]]

    return {
        "path": lambda: ix.path == base,
        "manifest": manifest,
        "nnz": lambda: ix.nnz == reference.nnz,
        "indptr": lambda: np.array_equal(ix.indptr, reference.indptr),
        "indices": lambda: np.array_equal(ix.indices, reference.indices),
        "data": lambda: np.array_equal(ix.data, reference.data),
        "postings": postings,
        "corrupt": corrupt,
        "rows": lambda: np.array_equal(ix.rows(1, 3).toarray(), dense[1:3]),
        "iter_batches": batches,
        "mean_weights": lambda: np.allclose(ix.mean_weights(), mean, rtol=1e-6, atol=0),
        "strongest_readings": strongest,
        "image_path": lambda: ix.image_path(ix.meta([0])[0]) is None,
        "card": lambda: ix.card()["items"] == len(IDS) and ix.card()["queries"] is None,
        "with_vectors": with_vectors,
    }


def test_a_stored_index_and_its_view_answer_every_stored_member(stored):
    """A stored index, and its view with other vectors (``with_vectors``: a re-gated
    side), answer each member ``StoredCollection`` adds, with the stored values."""
    kept = DENSE * (DENSE >= 0.5)  # the view: the small weights dropped
    view = stored.with_vectors(sp.csr_matrix(kept), GATE_K - 2, "toy (fewer)")
    assert view.manifest.extra["regated_from"] == GATE_K and view.label == "toy (fewer)"
    added = members(StoredCollection) - members(Collection)
    for ix, dense, gate_k in ((stored, DENSE, GATE_K), (view, kept, GATE_K - 2)):
        checks = _stored_checks(ix, dense, gate_k, stored.path)
        assert set(checks) == added | {"path"}, "a member of the protocol is not checked"
        for name, check in checks.items():
            assert check() is not False, name
        assert isinstance(ix, StoredCollection) and is_stored(ix) and ix.gate_k == gate_k
        assert np.array_equal(ix.matrix().toarray(), dense)
        assert np.allclose(ix.norms, np.linalg.norm(dense, axis=1), rtol=1e-6, atol=0)


def test_a_manifest_read_and_written_again_is_the_same_object():
    """A manifest read and written again is the same object: unknown keys kept (at every
    level), keys an older index lacks left absent, the order of its keys kept."""
    written = {
        "format": "lexlens-index",
        "gate_k": 10,
        "encoder": {"fingerprint": "ab", "capabilities": ["text-lexical"], "name": "x", "new": 1},
        "vocab": {"size": 3},
        "counts": {"items": 2, "nnz": 4, "by_kind": {"text": 2}},
        "files": {"data.npy": 10},
        "source": {"path": "/s", "kind": "csv", "benchmark": {"queries": 2, "seen": True}},
        "from_the_future": [1, 2],
    }
    m = Manifest.read(json.loads(json.dumps(written)))
    assert m.to_dict() == written and list(m.to_dict()) == list(written)
    assert list(m.to_dict()["encoder"]) == ["fingerprint", "capabilities", "name", "new"]
    assert m.extra == {"from_the_future": [1, 2]} and m.counts.extra == {"by_kind": {"text": 2}}
    assert (m.gate_k, m.encoder.capabilities, m.vocab.hash, m.counts.labelled) == (
        10,
        ("text-lexical",),
        None,
        0,
    )
    assert m.source.benchmark.queries == 2 and m.encoder.loads_as == "x"


def test_a_manifest_value_of_another_type_is_refused_naming_its_key(stored):
    """A manifest is typed when read: a value of another type is one line naming its key
    (never a traceback later, where it is used)."""
    file = stored.path / "manifest.json"
    data = json.loads(file.read_text())
    data["encoder"]["capabilities"] = "text-lexical"
    data["counts"]["labelled"] = "3"
    file.write_text(json.dumps(data))
    with pytest.raises(InputError, match=r"encoder\.capabilities is \"text-lexical\", not a list"):
        open_index(stored.path)
