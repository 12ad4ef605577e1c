"""Deviation of a stored text collection reads what the index keeps (each item's input token
ids, its vectors) and never runs the encoder's forward pass; its numbers equal D2S's
Exact@k / Semantic@k computed here item by item from the encoder's own encodings."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from lexlens.analysis.collections.indexing import build_index
from lexlens.analysis.collections.store import MANIFEST, open_index
from lexlens.analysis.collections.token_ids import TOKEN_IDS, TOKEN_INDPTR, stored_token_ids
from lexlens.analysis.core.gating import gate
from lexlens.analysis.core.vocabulary import is_special_token
from lexlens.analysis.deviation.deviation import deviation, deviation_of_index
from lexlens.models.base import InputError
from tests.helpers import close_to, model_tolerance

CORPUS = "data/benchmarks/imagenet_beir/corpus.jsonl"
K = 20


def corpus_texts() -> list[str]:
    """The sample corpus' texts (a few hundred real definitions, as the index reads them)."""
    with open(CORPUS, encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    return [r["text"] for r in rows]


@pytest.fixture(scope="module")
def stored(tmp_path_factory, splade):
    folder = tmp_path_factory.mktemp("dev_stored")
    source = folder / "texts.jsonl"
    texts = corpus_texts()
    source.write_text(
        "".join(json.dumps({"id": f"t{i}", "text": t}) + "\n" for i, t in enumerate(texts))
    )
    build_index(splade, source, folder / "ix", gate_k=768)
    return folder / "ix", texts


def reference(splade, texts: list[str], k: int = K) -> dict[str, np.ndarray]:
    """D2S's Exact@k and Semantic@k item by item, straight from the formulas: the encoder's
    encodings gated at 768, the top k non-special positive terms (weight, then id), the
    text's own non-special tokens, cosines of the input word-embedding table."""
    table, tokens = splade.static_embeddings()
    unit = table / np.maximum(np.linalg.norm(table, axis=1, keepdims=True), 1e-12)
    row_of = {t: i for i, t in reversed(list(enumerate(tokens)))}
    exact, semantic = [], []
    for enc in splade.encode_texts(texts, keep_units=False):
        weights = gate(enc, splade.vocab, 768)
        terms = [
            (-float(weights[i]), int(i))
            for i in np.flatnonzero(weights > 0)
            if not is_special_token(splade.vocab[i])
        ]
        top = [splade.vocab[i] for _, i in sorted(terms)[:k]]
        own = [u for u in dict.fromkeys(enc.units) if not is_special_token(u)]
        exact.append(sum(t in own for t in top) / k)
        own_vectors = unit[[row_of[u] for u in own]]
        semantic.append(sum(float(np.max(own_vectors @ unit[row_of[t]])) for t in top) / k)
    return {"exact": np.array(exact), "semantic": np.array(semantic)}


def test_silent_wrong_stored_deviation_equals_the_formulas_and_in_memory(splade, stored):
    folder, texts = stored
    result = deviation_of_index(folder, splade, k=K, batch_size=100)
    items = result.captions
    ref = reference(splade, texts)
    assert items.n == items.n_measured == len(texts) > 200
    rows = {r.id: r for r in items.rows}
    got_exact = np.array([rows[f"t{i}"].exact_at_k for i in range(len(texts))])
    got_semantic = np.array([rows[f"t{i}"].semantic_at_k for i in range(len(texts))])
    assert np.abs(got_exact - ref["exact"]).max() < 1e-9
    # Semantic@k: a mean of cosines of unit vectors, each cosine's |products| adding up to
    # at most 1: the |terms| of an item's or a set's Semantic@k add up to at most 1.
    assert np.abs(got_semantic - ref["semantic"]).max() <= model_tolerance(1.0)
    assert items.exact == pytest.approx(ref["exact"].mean(), abs=1e-9)
    assert items.semantic == close_to(ref["semantic"].mean(), terms=1.0)
    # The same texts through the in-memory path (encoded now, at the same gate).
    memory = deviation(splade, texts, k=K, gate_k=768).captions
    assert memory.exact == pytest.approx(items.exact, abs=1e-6)
    assert memory.semantic == close_to(items.semantic, terms=1.0)
    assert memory.flops == pytest.approx(items.flops, rel=1e-9)


def test_data_lost_token_ids_kept_with_each_text(splade, stored):
    folder, texts = stored
    ix = open_index(folder)
    assert {TOKEN_IDS, TOKEN_INDPTR} <= set(ix.manifest.files)
    kept = stored_token_ids(ix)
    assert kept.ids.dtype == np.uint16  # 30,522 ids fit in 16 bits
    for i in (0, 7, len(texts) - 1):
        enc = splade.encode_texts([texts[i]], keep_units=False)[0]
        assert kept.row(i).tolist() == enc.input_ids  # splade's vocabulary is its tokenizer's


def test_unbounded_stored_deviation_never_runs_the_encoder(splade, stored, monkeypatch):
    folder, _ = stored
    before = deviation_of_index(folder, splade, k=K).to_dict()

    def forward(*args, **kwargs):
        raise AssertionError("the encoder ran: a stored collection is read, not recomputed")

    monkeypatch.setattr(splade, "encode_texts", forward)
    assert deviation_of_index(folder, splade, k=K).to_dict() == before


def test_silent_wrong_older_index_without_token_ids_is_tokenised_again(splade, stored, tmp_path):
    folder, _ = stored
    old = tmp_path / "old_ix"
    shutil.copytree(folder, old)
    manifest = json.loads((old / MANIFEST).read_text())
    for name in (TOKEN_IDS, TOKEN_INDPTR):
        del manifest["files"][name]
        del manifest["checksums"][name]
        (old / name).unlink()
    (old / MANIFEST).write_text(json.dumps(manifest))
    expected = deviation_of_index(folder, splade, k=K).to_dict()
    got = deviation_of_index(old, splade, k=K).to_dict()
    got["input"]["index"] = expected["input"]["index"]
    assert got == expected


def test_silent_wrong_damaged_token_ids_refused_in_one_line(splade, stored, tmp_path):
    folder, _ = stored
    bad = tmp_path / "bad_ix"
    shutil.copytree(folder, bad)
    manifest = json.loads((bad / MANIFEST).read_text())
    indptr = np.load(bad / TOKEN_INDPTR)
    indptr[1:] = indptr[-1]  # every row after the first claims the whole array
    indptr[1] = indptr[-1] + 5
    np.save(bad / TOKEN_INDPTR, indptr)
    manifest["checksums"].pop(TOKEN_INDPTR)
    manifest["files"][TOKEN_INDPTR] = (bad / TOKEN_INDPTR).stat().st_size
    (bad / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(InputError, match=r"not a valid Lexlens index \(token_indptr.npy"):
        deviation_of_index(bad, splade, k=K)
