"""Encoded corpora imported (``lexlens index --vectors``): JsonVectorCollection from
Lexlens's own export and from independent writers (plain ``json``, sentence-transformers'
SparseEncoder on the same checkpoint), a scipy CSR .npz, Parquet; the parity check; bad
input refused in one line."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import numpy as np
import pytest

from lexlens.analysis.collections.indexing import build_index
from lexlens.analysis.collections.manifest import Manifest
from lexlens.analysis.collections.store import StoredIndex
from lexlens.analysis.collections.vector_import import import_vectors
from lexlens.analysis.counterfactual.counterfactual import counterfactual
from lexlens.analysis.evaluation.evaluate import evaluate_benchmark
from lexlens.analysis.export.export import export_index
from lexlens.analysis.faithfulness.benchmark import failures_faithfulness

WORDS = [
    *("the", "cat", "dog", "sat", "on", "mat", "river", "bank", "money", "loan", "fish"),
    *("swim", "quick", "brown", "fox", "jumps", "lazy", "house", "tree", "garden"),
    *("photosynthesis", "mitochondria", "engine", "rocket", "coffee", "espresso", "beach"),
    "volcano",
]
#: Items of the test corpus (the parity sample of 200 takes them all).
N_ITEMS = 60


def _texts() -> list[str]:
    rng = random.Random(7)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 25))) for _ in range(N_ITEMS)]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, splade) -> Path:
    """The texts indexed by splade-tiny itself (the reference of every import)."""
    folder = tmp_path_factory.mktemp("vectors")
    rows = [{"id": f"d{n}", "text": t} for n, t in enumerate(_texts())]
    (folder / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    build_index(splade, folder / "items.jsonl", folder / "ix")
    return folder / "ix"


@pytest.fixture(scope="module")
def sparse_encoder_lines() -> list[dict]:
    """The corpus encoded by sentence-transformers' SparseEncoder on splade-tiny's weights,
    as JsonVectorCollection objects with float weights (an independent encoder and writer)."""
    from sentence_transformers import SparseEncoder

    from lexlens.models.packaged import splade_tiny_dir

    model = SparseEncoder(str(splade_tiny_dir()), device="cpu")
    texts = _texts()
    embeddings = model.encode_document(texts)
    lines = []
    for n, (text, row) in enumerate(zip(texts, embeddings, strict=True)):
        pairs = model.decode(row, top_k=None)
        lines.append({"id": f"d{n}", "contents": text, "vector": dict(pairs)})
    return lines


def _stored(ix: StoredIndex) -> dict[str, dict[str, float]]:
    """Every item's stored vector as term → weight."""
    vocab = ix.vocab
    out = {}
    for batch in ix.iter_batches(1024, columns=["id"]):
        m = batch.vectors
        for i, meta in enumerate(batch.meta):
            a, b = m.indptr[i], m.indptr[i + 1]
            out[meta["id"]] = {
                vocab[c]: float(w) for c, w in zip(m.indices[a:b], m.data[a:b], strict=True)
            }
    return out


def _write_jsonl(path: Path, lines: list[dict], gz: bool = False) -> None:
    text = "".join(json.dumps(line) + "\n" for line in lines).encode()
    path.write_bytes(gzip.compress(text) if gz else text)


def test_lexlens_anserini_export_imports_back_within_the_scale_rounding(corpus, tmp_path, cli):
    export_index(corpus, tmp_path / "ex", format="anserini", scale=100)
    run = cli(
        "index",
        "--vectors",
        tmp_path / "ex" / "docs.jsonl",
        "--encoder",
        "splade-tiny",
        "--scale",
        "100",
        "--out",
        tmp_path / "im",
    )
    assert run.returncode == 0, run.stderr
    assert "format: anserini (told from the content" in run.stdout
    assert f"over {N_ITEMS} items" in run.stdout
    source, imported = _stored(StoredIndex(corpus)), _stored(StoredIndex(tmp_path / "im"))
    assert source.keys() == imported.keys()
    half_unit = 0.5 / 100
    for item, weights in source.items():
        got = imported[item]
        # A weight that rounds to impact 0 is dropped by the export; every other one comes
        # back as round(w × 100) / 100: within half an impact unit (+ float32's rounding).
        kept = {t for t, w in weights.items() if round(w * 100) > 0}
        assert set(got) == kept
        for term in kept:
            assert abs(got[term] - weights[term]) <= half_unit + 4 * np.finfo(np.float32).eps
    manifest = StoredIndex(tmp_path / "im").manifest
    assert manifest.imported.integer_impacts and manifest.imported.scale == 100
    assert manifest.imported.parity.passed and manifest.imported.parity.sample == N_ITEMS
    texts = {m["id"]: m["text"] for m in StoredIndex(tmp_path / "im").meta(range(N_ITEMS))}
    assert texts == {m["id"]: m["text"] for m in StoredIndex(corpus).meta(range(N_ITEMS))}


def test_sparse_encoder_corpus_in_gzip_parts_passes_parity(sparse_encoder_lines, tmp_path, cli):
    """Two parts, one gzip; floats taken as given; unknown terms left out and counted."""
    lines = [dict(line, vector=dict(line["vector"])) for line in sparse_encoder_lines]
    lines[0]["vector"]["zz-not-a-token"] = 0.5
    lines[1]["vector"]["zz-not-a-token"] = 0.25
    lines[2]["vector"]["ALSO_UNKNOWN"] = 1.0
    parts = tmp_path / "parts"
    parts.mkdir()
    _write_jsonl(parts / "part-00.jsonl", lines[:25])
    _write_jsonl(parts / "part-01.jsonl.gz", lines[25:], gz=True)
    run = cli("index", "--vectors", parts, "--encoder", "splade-tiny", "--out", tmp_path / "im")
    assert run.returncode == 0, run.stderr
    assert "3 weights on 2 terms not in the encoder's vocabulary left out, in 3 items" in run.stdout
    assert "zz-not-a-token (2)" in run.stdout
    assert "parity with splade-tiny: cosine" in run.stdout
    ix = StoredIndex(tmp_path / "im")
    stored = _stored(ix)
    for line in sparse_encoder_lines:  # float32 weights written by json come back exactly
        assert stored[line["id"]] == {t: float(np.float32(w)) for t, w in line["vector"].items()}
    parity = ix.manifest.imported.parity
    assert parity.cosine > 0.9999 and parity.top10_overlap >= 0.99 and parity.zero_mass == 0
    assert ix.manifest.imported.unknown_terms == {"zz-not-a-token": 2, "ALSO_UNKNOWN": 1}


def _cut(lines: list[dict], keep: float) -> list[dict]:
    """Each vector keeping a seeded ``keep`` share of its terms (at least one)."""
    rng = random.Random(3)
    out = []
    for line in lines:
        terms = list(line["vector"])
        kept = rng.sample(terms, max(1, round(len(terms) * keep)))
        out.append(dict(line, vector={t: line["vector"][t] for t in kept}))
    return out


def test_silent_wrong_a_corpus_missing_80_percent_of_its_terms_is_refused(
    sparse_encoder_lines, tmp_path, cli
):
    cut = tmp_path / "cut.jsonl"
    _write_jsonl(cut, _cut(sparse_encoder_lines, 0.2))
    run = cli("index", "--vectors", cut, "--encoder", "splade-tiny", "--out", tmp_path / "im")
    assert run.returncode == 2
    message = run.stderr.strip()
    assert "\n" not in message and "Traceback" not in message
    assert "parity with splade-tiny: cosine" in message and "refused" in message
    cosine = float(message.split("cosine ")[1].split(",")[0])
    overlap = float(message.split("top-10 overlap ")[1].split(",")[0])
    assert cosine < 0.98 and overlap < 0.8
    assert not (tmp_path / "im").exists()
    accepted = cli(
        "index",
        "--vectors",
        cut,
        "--encoder",
        "splade-tiny",
        "--accept-mismatch",
        "--out",
        tmp_path / "im",
    )
    assert accepted.returncode == 0, accepted.stderr
    parity = StoredIndex(tmp_path / "im").manifest.imported.parity
    assert not parity.passed and parity.accepted_mismatch
    assert parity.cosine == pytest.approx(cosine, abs=5e-5)


def test_silent_wrong_analyses_that_re_encode_say_the_mismatch_was_accepted(
    sparse_encoder_lines, corpus, splade, tmp_path
):
    """Kind: silent wrong. A counterfactual and the faithfulness of failures re-encode texts
    against the stored vectors: on vectors stored beyond the parity tolerance each says so,
    with the numbers; on a collection Lexlens encoded neither does."""
    cut = tmp_path / "cut.jsonl"
    _write_jsonl(cut, _cut(sparse_encoder_lines, 0.2))
    import_vectors(splade, cut, tmp_path / "im", accept_mismatch=True)
    accepted, own = StoredIndex(tmp_path / "im"), StoredIndex(corpus)
    parity = accepted.manifest.imported.parity
    queries = {"q1": "quick brown fox", "q2": "coffee espresso beach"}
    qrels = {"q1": {"d5": 1}, "q2": {"d9": 1}}
    for ix, said in ((accepted, True), (own, False)):
        found = counterfactual(ix, "quick brown fox", "d5", query_encoder=splade, max_calls=5)
        evaluation = evaluate_benchmark(ix, queries=queries, qrels=qrels, query_encoder=splade)
        measured = failures_faithfulness(ix, evaluation, query_encoder=splade)
        for notes in (found.notes, measured.notes):
            mentions = [n for n in notes if "beyond the parity tolerance" in n]
            assert len(mentions) == (1 if said else 0), notes
            if said:
                assert f"cosine {parity.cosine:.4f}" in mentions[0]
                assert "--accept-mismatch" in mentions[0]


def test_silent_wrong_a_wrong_scale_is_refused_with_the_norm_ratio(corpus, tmp_path, cli):
    export_index(corpus, tmp_path / "ex", format="anserini", scale=100)
    run = cli(
        "index",
        "--vectors",
        tmp_path / "ex" / "docs.jsonl",
        "--encoder",
        "splade-tiny",
        "--scale",
        "10",
        "--out",
        tmp_path / "im",
    )
    assert run.returncode == 2
    assert "norm ratio 10 " in run.stderr and "is --scale right?" in run.stderr
    assert "\n" not in run.stderr.strip()


def test_npz_and_parquet_import_equal_their_source(corpus, tmp_path, cli):
    import pyarrow as pa
    import pyarrow.parquet as pq
    import scipy.sparse as sp

    source = StoredIndex(corpus)
    matrix = sp.csr_matrix(source.matrix())
    meta = source.meta(range(len(source)))
    sp.save_npz(tmp_path / "v.npz", matrix)
    (tmp_path / "v.ids.txt").write_text("".join(f"{m['id']}\t{m['text']}\n" for m in meta))
    run = cli(
        "index",
        "--vectors",
        tmp_path / "v.npz",
        "--encoder",
        "splade-tiny",
        "--out",
        tmp_path / "npz",
    )
    assert run.returncode == 0, run.stderr
    assert "format: npz" in run.stdout and "parity with splade-tiny" in run.stdout
    assert _stored(StoredIndex(tmp_path / "npz")) == _stored(source)
    rows = [matrix.getrow(i) for i in range(matrix.shape[0])]
    table = pa.table(
        {
            "id": [m["id"] for m in meta],
            "text": [m["text"] for m in meta],
            "indices": [r.indices.tolist() for r in rows],
            "values": [r.data.tolist() for r in rows],
        }
    )
    pq.write_table(table, tmp_path / "v.parquet", row_group_size=17)
    run = cli(
        "index",
        "--vectors",
        tmp_path / "v.parquet",
        "--encoder",
        "splade-tiny",
        "--out",
        tmp_path / "pq",
    )
    assert run.returncode == 0, run.stderr
    assert "format: hf" in run.stdout
    assert _stored(StoredIndex(tmp_path / "pq")) == _stored(source)


def test_import_without_an_encoder_keeps_the_terms_and_names_what_needs_one(tmp_path, cli):
    lines = [
        {"id": "a", "contents": "x", "vector": {"apple": 2.0, "##s": 0.5}},
        {"id": "b", "contents": "y", "vector": {"zebra": 1.0, "apple": 0.25}},
        {"id": "c", "contents": "", "vector": {}},
    ]
    _write_jsonl(tmp_path / "v.jsonl", lines)
    run = cli("index", "--vectors", tmp_path / "v.jsonl", "--out", tmp_path / "im")
    assert run.returncode == 0, run.stderr
    assert "no encoder: the vocabulary is the 3 terms read; search and evaluation" in run.stdout
    search = cli("search", "--index", tmp_path / "im", "--query", "apple")
    assert search.returncode == 2 and "which does not encode texts" in search.stderr
    ix = StoredIndex(tmp_path / "im")
    assert ix.vocab == ["apple", "##s", "zebra"]
    assert _stored(ix) == {line["id"]: line["vector"] for line in lines}
    assert ix.manifest.imported.parity is None


def test_a_normal_build_manifest_has_no_import_entry_and_reads_back_byte_identical(corpus):
    data = (corpus / "manifest.json").read_bytes()
    assert "imported" not in json.loads(data)
    assert Manifest.read(json.loads(data)).to_json() == data


def test_an_import_manifest_reads_back_byte_identical(tmp_path, cli):
    _write_jsonl(tmp_path / "v.jsonl", [{"id": "a", "contents": "", "vector": {"t": 3}}])
    assert (
        cli(
            "index", "--vectors", tmp_path / "v.jsonl", "--scale", "2", "--out", tmp_path / "im"
        ).returncode
        == 0
    )
    data = (tmp_path / "im" / "manifest.json").read_bytes()
    manifest = Manifest.read(json.loads(data))
    assert manifest.to_json() == data and manifest.imported.scale == 2
    assert _stored(StoredIndex(tmp_path / "im")) == {"a": {"t": 1.5}}


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (
            b'{"id": "a", "vector": {"t": 1.0}}\n{"id": "b", "vector": {"t": 1.0}\n',
            "v.jsonl:2: not JSON",
        ),
        (b"", "the file is empty"),
        (b'{"id": "a", "vector": {"t": 1}}\n', "v.jsonl:1: integer impacts: give --scale"),
        (
            b'{"id": "a", "vector": {"t": 1.0}}\n{"id": "b", "vector": {"t": 2}}\n',
            "v.jsonl:2: a int weight in a file of float weights",
        ),
        (b'{"id": "a", "vector": {"t": "x"}}\n', "v.jsonl:1: a weight that is not a number"),
        (b'{"id": "a", "vector": {"t": NaN}}\n', "v.jsonl:1: a NaN or infinite weight"),
        (b'{"id": "a b", "vector": {}}\n', "v.jsonl:1: the id must be a text without whitespace"),
        (b'{"id": "a", "vector": {}}\n{"id": "a", "vector": {}}\n', "the id 'a' appears twice"),
        (b'{"id": "a"}\n', 'v.jsonl:1: no "vector" object'),
        (b"\n\n", "no items"),
        (b'{"id": "a", "vector": {"\\ud800": 1.0}}\n', "v.jsonl:1: a lone surrogate escape"),
    ],
)
def test_traceback_bad_vectors_file_is_one_line_and_nothing_is_written(
    content, expected, tmp_path, cli
):
    (tmp_path / "v.jsonl").write_bytes(content)
    run = cli(
        "index",
        "--vectors",
        tmp_path / "v.jsonl",
        "--vector-format",
        "anserini",
        "--out",
        tmp_path / "im",
    )
    assert run.returncode == 2
    assert expected in run.stderr, run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "im").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v.jsonl"]


def test_unbounded_a_huge_line_is_refused_with_its_number(tmp_path, cli):
    from lexlens.analysis.core.inputs import MAX_LINE_BYTES

    with open(tmp_path / "v.jsonl", "wb") as handle:
        handle.write(b'{"id": "a", "contents": "", "vector": {"t": 1.0}}\n')
        handle.write(
            b'{"id": "b", "contents": "' + b"x" * (MAX_LINE_BYTES + 10) + b'", "vector": {}}\n'
        )
    run = cli("index", "--vectors", tmp_path / "v.jsonl", "--out", tmp_path / "im")
    assert run.returncode == 2
    assert f"v.jsonl:2: a line longer than {MAX_LINE_BYTES:,} bytes" in run.stderr


def test_data_lost_an_import_never_overwrites_a_user_folder(tmp_path, cli):
    _write_jsonl(tmp_path / "v.jsonl", [{"id": "a", "contents": "", "vector": {"t": 1.0}}])
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    run = cli("index", "--vectors", tmp_path / "v.jsonl", "--out", tmp_path / "mine")
    assert run.returncode == 2 and "is not a Lexlens index" in run.stderr
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep"


def test_a_scale_that_is_not_positive_is_refused_by_its_declaration(tmp_path, cli):
    _write_jsonl(tmp_path / "v.jsonl", [{"id": "a", "contents": "", "vector": {"t": 1}}])
    run = cli("index", "--vectors", tmp_path / "v.jsonl", "--scale", "0", "--out", tmp_path / "im")
    assert run.returncode == 2 and "--scale" in run.stderr and "positive" in run.stderr


def test_source_and_vectors_exclude_each_other(tmp_path, cli):
    run = cli("index", "--out", tmp_path / "im")
    assert run.returncode == 2 and "give --source (items to encode) or --vectors" in run.stderr


def test_queries_and_judgements_are_kept_beside_an_import(corpus, tmp_path, cli):
    export_index(corpus, tmp_path / "ex", format="anserini", scale=100)
    (tmp_path / "q.tsv").write_text("q1\ta dog on the mat\nq2\trocket engine\n")
    (tmp_path / "qrels.txt").write_text("q1 0 d0 1\nq2 0 d1 1\nq2 0 d2 2\n")
    docs = tmp_path / "ex" / "docs.jsonl"
    run = cli(
        "index",
        "--vectors",
        docs,
        "--encoder",
        "splade-tiny",
        "--scale",
        "100",
        "--queries",
        tmp_path / "q.tsv",
        "--qrels",
        tmp_path / "qrels.txt",
        "--out",
        tmp_path / "im",
    )
    assert run.returncode == 0, run.stderr
    assert "kept 2 queries and 3 judgements" in run.stdout
    kept = StoredIndex(tmp_path / "im").manifest.kept_benchmark
    assert (kept.queries, kept.judgements) == (2, 3)
    evaluated = cli("evaluate", "--index", tmp_path / "im", "--json")
    assert evaluated.returncode == 0, evaluated.stderr
    alone = cli(
        "index",
        "--vectors",
        docs,
        "--scale",
        "100",
        "--queries",
        tmp_path / "q.tsv",
        "--out",
        tmp_path / "im2",
    )
    assert alone.returncode == 2 and "--queries and --qrels go together" in alone.stderr


def test_a_saved_hugging_face_dataset_imports_equal_to_its_source(corpus, tmp_path, cli):
    datasets = pytest.importorskip("datasets")
    source = StoredIndex(corpus)
    matrix = source.matrix()
    meta = source.meta(range(len(source)))
    rows = [matrix.getrow(i) for i in range(matrix.shape[0])]
    saved = datasets.Dataset.from_dict(
        {
            "id": [m["id"] for m in meta],
            "text": [m["text"] for m in meta],
            "indices": [r.indices.tolist() for r in rows],
            "values": [r.data.tolist() for r in rows],
        }
    )
    saved.save_to_disk(str(tmp_path / "ds"))
    run = cli(
        "index", "--vectors", tmp_path / "ds", "--encoder", "splade-tiny", "--out", tmp_path / "im"
    )
    assert run.returncode == 0, run.stderr
    assert "format: hf (told from the content" in run.stdout
    assert _stored(StoredIndex(tmp_path / "im")) == _stored(source)


def test_a_beir_folder_beside_an_import_keeps_its_queries_and_test_judgements(
    corpus, tmp_path, cli
):
    export_index(corpus, tmp_path / "ex", format="anserini", scale=100)
    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "queries.jsonl").write_text(
        '{"_id": "q1", "text": "a dog on the mat"}\n{"_id": "q2", "text": "rocket engine"}\n'
    )
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td0\t1\n")
    (beir / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\nq2\td1\t1\nq2\td2\t1\n")
    docs = tmp_path / "ex" / "docs.jsonl"
    common = ["index", "--vectors", docs, "--scale", "100", "--queries", beir]
    run = cli(*common, "--out", tmp_path / "im")
    assert run.returncode == 0, run.stderr
    kept = StoredIndex(tmp_path / "im").manifest.kept_benchmark
    assert (kept.queries, kept.judgements, kept.split) == (2, 1, "test")
    dev = cli(*common, "--qrels", beir / "qrels" / "dev.tsv", "--out", tmp_path / "im2")
    assert dev.returncode == 0, dev.stderr
    kept = StoredIndex(tmp_path / "im2").manifest.kept_benchmark
    assert (kept.judged_queries, kept.judgements) == (1, 2)
    (beir / "qrels" / "test.tsv").unlink()
    (beir / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td0\t1\n")
    several = cli(*common, "--out", tmp_path / "im3")
    assert several.returncode == 2 and "several splits (dev, train)" in several.stderr
    (beir / "queries.jsonl").unlink()
    bare = cli(*common, "--out", tmp_path / "im4")
    assert bare.returncode == 2 and "a folder without queries.jsonl" in bare.stderr
