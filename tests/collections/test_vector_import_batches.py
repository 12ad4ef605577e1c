"""The batch reader of JsonVectorCollection lines against the per-line reader it stands in
for: the same files stored byte for byte, the same notes, the same refusal (file:line)
for a corpus of every kind of line the batch reader reads or leaves to the per-line one,
with chunks and reads small enough that every boundary is crossed; and its number and
term readers against orjson and a plain dict."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import numpy as np
import orjson
import pytest

from lexlens.analysis.collections import vector_import, vector_lines
from lexlens.analysis.collections.vector_import import import_vectors
from lexlens.models.base import InputError


def _tricky_lines(rng: random.Random, vocab: list[str], floats: bool) -> list[bytes]:
    """Lines of every shape: the usual ones in both separators and both escapings,
    escapes in ids and texts, unicode and ``##`` terms, terms no vocabulary has, a
    term twice, the vector not last, odd whitespace, ``docid`` / ``content``, blank
    lines, CRLF, an empty vector."""
    words = [w for w in vocab if 0 < len(w) < 12][:3000]
    special = ['"', "\\", "é", "日本", "##s", "##ing", "}", "{", ":", ",", "vector", "a b"]
    special = [t for t in special if t in vocab] + ["zzz-not-a-token", "ü" * 20, "x" * 40]

    def weight() -> float | int:
        if floats:
            return rng.choice([rng.random() * 3, 1e-05 * rng.random(), 2.5e3, -0.0, 1.0])
        return rng.randint(0, 400)

    lines: list[bytes] = []
    for n in range(400):
        terms = rng.sample(words, rng.randint(0, 30)) + rng.sample(special, rng.randint(0, 3))
        vector = {t: weight() for t in terms}
        item = {
            "id": f"d{n}",
            "contents": f"text {n} " + rng.choice(["", 'a "quote"', "é\\n"]),
            "vector": vector,
        }
        shape = n % 13
        if shape == 0:
            item["id"] = f'q"{n}\\x'
        if shape == 1:
            text = json.dumps(item, ensure_ascii=False)
        elif shape == 2:
            text = json.dumps(item, separators=(",", ":"))
        elif shape == 3 and terms:  # a term twice: a dict keeps the last
            body = json.dumps(vector)[:-1] + f", {json.dumps(terms[0])}: {json.dumps(weight())}}}"
            text = json.dumps({"id": item["id"], "contents": item["contents"]})[:-1]
            text += f', "vector": {body}}}'
        elif shape == 4:
            text = json.dumps({"vector": vector, "id": item["id"]})
        elif shape == 5:
            text = json.dumps(item, separators=(" , ", " : "))
        elif shape == 6:
            text = json.dumps({"docid": n + 100_000, "content": item["contents"], "vector": vector})
        elif shape == 7:
            text = json.dumps(item) + "\r"
        elif shape == 8:
            item["contents"] = 'says "vector": {"x": 1}'
            text = json.dumps(item)
        elif shape == 9:
            text = "  " + json.dumps(item)
        else:
            text = json.dumps(item)
        lines.append(text.encode("utf-8"))
        if n % 37 == 0:
            lines.append(b"   ")
    return lines


def _import(folder: Path, source: Path, encoder, per_line: bool, monkeypatch) -> dict:
    """Import ``source`` with one reader: every stored file's bytes (the manifest without
    its times), the notes, or the refusal."""
    with monkeypatch.context() as patch:
        if per_line:
            patch.setattr(
                vector_import, "_anserini_chunks", vector_import._anserini_chunks_per_line
            )
        out = folder / ("per-line" if per_line else "batches")
        try:
            result = import_vectors(
                encoder, source, out, scale=100, vector_format="anserini", accept_mismatch=True
            )
        except InputError as exc:
            return {"refused": str(exc)}
    stored = {}
    for path in sorted(out.iterdir()):
        data = path.read_bytes()
        if path.name == "manifest.json":
            manifest = json.loads(data)
            manifest.pop("created"), manifest.pop("updated")
            data = json.dumps(manifest, sort_keys=True).encode()
        stored[path.name] = data
    return {"stored": stored, "notes": result.notes}


def _both(tmp_path: Path, source: Path, encoder, monkeypatch) -> tuple[dict, dict]:
    return (
        _import(tmp_path, source, encoder, True, monkeypatch),
        _import(tmp_path, source, encoder, False, monkeypatch),
    )


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of 23 items and reads of 700 bytes: every boundary falls inside the corpus."""
    monkeypatch.setattr(vector_import, "CHUNK_ITEMS", 23)
    monkeypatch.setattr(vector_import, "READ_BYTES", 700)


@pytest.mark.parametrize("floats", [False, True])
@pytest.mark.parametrize("with_encoder", [False, True])
def test_silent_wrong_batches_store_what_the_per_line_reader_stores(
    floats, with_encoder, splade, tmp_path, monkeypatch, small_chunks
):
    rng = random.Random(11 + floats)
    lines = _tricky_lines(rng, list(splade.vocab), floats)
    source = tmp_path / "v.jsonl"
    source.write_bytes(b"\n".join(lines))  # the last line without its newline
    reference, batches = _both(tmp_path, source, splade if with_encoder else None, monkeypatch)
    assert "stored" in reference, reference
    assert reference == batches
    stored = reference["stored"]
    assert {"indices.npy", "data.npy", "indptr.npy", "items.parquet", "vocab.txt"} <= set(stored)
    if with_encoder:
        assert any("not in the encoder's vocabulary" in note for note in reference["notes"])


def test_silent_wrong_terms_in_vocabulary_order_store_what_the_per_line_reader_stores(
    splade, tmp_path, monkeypatch, small_chunks
):
    """Rows already in term order (as an export writes them) are kept as read."""
    vocab = list(splade.vocab)
    rng = random.Random(2)
    lines = []
    for n in range(120):
        picked = sorted(rng.sample(range(1000, 8000), rng.randint(0, 40)))
        vector = {vocab[c]: rng.randint(0, 300) for c in picked}
        lines.append(json.dumps({"id": f"d{n}", "contents": "", "vector": vector}).encode())
    source = tmp_path / "v.jsonl"
    source.write_bytes(b"\n".join(lines) + b"\n")
    reference, batches = _both(tmp_path, source, splade, monkeypatch)
    assert "stored" in reference, reference
    assert reference == batches
    # a term that is no UTF-8 among plain lines is refused with its line, as per line
    lines[50] = lines[50].replace(b'"vector": {', b'"vector": {"b\xffd": 3, ')
    source.write_bytes(b"\n".join(lines) + b"\n")
    reference, batches = _both(tmp_path, source, splade, monkeypatch)
    assert "v.jsonl:51: not JSON" in reference["refused"], reference
    assert reference == batches


def test_silent_wrong_gzip_parts_store_what_the_per_line_reader_stores(
    splade, tmp_path, monkeypatch, small_chunks
):
    lines = _tricky_lines(random.Random(5), list(splade.vocab), False)
    folder = tmp_path / "parts"
    folder.mkdir()
    (folder / "a.jsonl.gz").write_bytes(gzip.compress(b"\n".join(lines[:150]) + b"\n"))
    (folder / "b.jsonl").write_bytes(b"\n".join(lines[150:]) + b"\n")
    reference, batches = _both(tmp_path, folder, splade, monkeypatch)
    assert "stored" in reference, reference
    assert reference == batches


@pytest.mark.parametrize(
    ("bad", "expected"),
    [
        (b'{"id": "m", "contents": "", "vector": {"t": 1}\n', "not JSON"),
        (b'{"id": "m", "contents": "", "vector": {"the": 012}}\n', "not JSON"),
        (b'{"id": "m", "contents": "", "vector": {"the": 1e400}}\n', "a float weight"),
        (b'{"id": "m", "contents": "", "vector": {"the": 1.5}}\n', "a float weight in a file"),
        (b'{"id": "m", "contents": "", "vector": {"the": "x"}}\n', "not a number"),
        (b'{"id": "m", "contents": "", "vector": {"the": true}}\n', "not a number"),
        (b'{"id": "m", "contents": "", "vector": {"\\ud800": 1}}\n', "a lone surrogate"),
        (b'{"id": "d3", "contents": "", "vector": {"the": 1}}\n', "appears twice"),
        (b'{"id": "m", "contents": 5, "vector": {"the": 1}}\n', '"contents" must be a text'),
        (b'{"id": "m", "contents": "", "vector": {"t\xff": 1}}\n', "not JSON"),
        (b'{"id": "m", "contents": "", "vector": {"the": 99999999999999999999999}}\n', "float"),
    ],
)
def test_traceback_a_bad_line_in_the_middle_is_refused_as_the_per_line_reader_refuses_it(
    bad, expected, splade, tmp_path, monkeypatch, small_chunks
):
    lines = _tricky_lines(random.Random(3), list(splade.vocab), False)
    source = tmp_path / "v.jsonl"
    source.write_bytes(b"\n".join(lines[:200]) + b"\n" + bad + b"\n".join(lines[200:]) + b"\n")
    reference, batches = _both(tmp_path, source, splade, monkeypatch)
    assert "refused" in reference and expected in reference["refused"], reference
    assert reference == batches


def test_unbounded_a_huge_line_and_a_cut_gzip_are_refused_as_per_line(
    tmp_path, monkeypatch, small_chunks
):
    monkeypatch.setattr(vector_import, "MAX_LINE_BYTES", 2000)
    good = [json.dumps({"id": f"d{n}", "vector": {"t": 1.0}}).encode() for n in range(60)]
    huge = json.dumps({"id": "h", "contents": "x" * 3000, "vector": {}}).encode()
    source = tmp_path / "v.jsonl"
    source.write_bytes(b"\n".join(good[:40] + [huge] + good[40:]) + b"\n")
    reference, batches = _both(tmp_path, source, None, monkeypatch)
    assert "a line longer than 2,000 bytes" in reference["refused"], reference
    assert reference == batches
    cut = gzip.compress(b"\n".join(good) + b"\n")
    (tmp_path / "cut.jsonl.gz").write_bytes(cut[: len(cut) // 2])
    reference, batches = _both(tmp_path, tmp_path / "cut.jsonl.gz", None, monkeypatch)
    assert "cannot be read" in reference["refused"], reference
    assert reference == batches


def test_numbers_are_orjsons_bit_for_bit():
    rng = np.random.default_rng(0)
    floats = np.concatenate(
        [rng.random(3000) * 3, rng.random(500) * 1e-7, np.float32(rng.random(500)).astype(float)]
    )
    texts = [repr(float(v)) for v in floats] + [f"{v:.3e}" for v in floats[:500]]
    texts += [str(int(v)) for v in rng.integers(0, 10**8, 2000)] + ["0", "-0", "-5", "1E+2"]
    texts += ["123456789", "12345678901234567", "5e-324", "2.2250738585072014e-308"]
    line = "{" + ", ".join(f'"t{n}": {t}' for n, t in enumerate(texts)) + "}"
    buf = bytearray(b'{"id": "a", "vector": ' + line.encode() + b"}\n" + vector_lines.PAD)
    end = buf.index(b"\n")
    batch = vector_lines.Batch(
        buf, np.array([0]), np.array([end]), np.array([1]), np.zeros(0, np.int64)
    )
    found = vector_lines.parse_batch(batch, vector_lines.TermTable())
    assert found.ok[0]
    expected = list(orjson.loads(line).values())
    assert found.values.tolist() == [float(v) for v in expected]  # == is bit for bit here
    assert np.signbit(found.values).tolist() == [np.signbit(float(v)) for v in expected]
    assert found.floats.tolist() == [type(v) is float for v in expected]


def test_term_table_finds_every_spelling_and_no_other():
    tokens = ["a", "é", '"', "\\", "##s", "日本語テキスト", "x" * 32, "y" * 33, "tab\t", "ab"]
    table = vector_lines.TermTable()
    ids = {t: n for n, t in enumerate(tokens)}
    table.extend(tokens, ids)
    spellings = {json.dumps(t)[1:-1] for t in tokens} | {
        json.dumps(t, ensure_ascii=False)[1:-1] for t in tokens
    }
    others = ["b", "aa", "ba", "\\u00E9", "x" * 31, "##", "\\u0061"]
    members = sorted(spellings) + others
    line = "{" + ", ".join(f'"{s}": 1' for s in members) + "}"
    buf = bytearray(b'{"id": "a", "vector": ' + line.encode() + b"}\n" + vector_lines.PAD)
    end = buf.index(b"\n")
    batch = vector_lines.Batch(
        buf, np.array([0]), np.array([end]), np.array([1]), np.zeros(0, np.int64)
    )
    found = vector_lines.parse_batch(batch, table)
    assert found.ok[0]
    got = dict(zip(members, found.ids.tolist(), strict=True))
    for spelling in members:
        term = orjson.loads(f'"{spelling}"')
        in_table = spelling in spellings and len(spelling.encode()) <= vector_lines.MAX_TERM
        assert got[spelling] == (ids[term] if in_table else -1), spelling
