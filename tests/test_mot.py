"""The MoT masking evaluation on a small real corpus (few steps, small codebooks)."""

from __future__ import annotations

import numpy as np
import pytest

from lexlens.models import InputError, LexlensError


@pytest.fixture(scope="module")
def base():
    from lexlens.models.dense import DensePQEncoder

    return DensePQEncoder.packaged_base("cpu")


@pytest.fixture(scope="module")
def corpus():
    from lexlens.models.dense import default_corpus

    return default_corpus()[100:116]


@pytest.fixture(scope="module")
def result(base, corpus):
    from lexlens.analysis.mot import mot_evaluate

    return mot_evaluate(base, corpus, m_values=(12, 24), k=8, steps=3, limit=3, seed=1)


def test_table_has_every_ranking_and_m(result):
    from lexlens.analysis.mot import RANKINGS, REFERENCE_ROWS

    table = result.table
    assert list(table.index) == list(RANKINGS) + list(REFERENCE_ROWS)
    assert list(table.columns) == [12, 24]
    assert np.isfinite(table.to_numpy()).all() and (table.to_numpy() >= 0).all()
    assert result.settings["n_docs"] == 3 and result.settings["k"] == {"12": 8, "24": 8}
    sig = result.significance
    assert len(sig) == 2 * 8 and set(sig["baseline"]) == set(RANKINGS) - {"MoT"}
    assert sig["wilcoxon_p"].between(0, 1).all() and sig["ttest_p"].between(0, 1).all()
    assert result.to_dict()["table"]["12"]["MoT"] == pytest.approx(table.loc["MoT", 12])


def _independent_errors(base, corpus, result, m: int, doc: int, k_words: int):
    """Recompute three rows for one document through the plain text path."""
    from lexlens.analysis.attribution import group_word_pieces
    from lexlens.models.dense import ProductQuantizer

    pq = ProductQuantizer.fit(base.embed_texts(corpus), m, 8, seed=1)
    enc = base.with_quantizer(pq)
    text = corpus[doc]
    dhat = pq.decode(enc.codes([text]))[0]

    def err(t: str) -> float:
        return float(((pq.split(enc.embed_texts([t]))[0] - dhat) ** 2).sum(-1).mean())

    words, groups = group_word_pieces(base.tokenizer.tokenize(text))
    n_pieces = sum(len(g) for g in groups)
    head = [w if j < k_words else " ".join(["[UNK]"] * len(groups[j])) for j, w in enumerate(words)]
    return err(text), err(" ".join(["[UNK]"] * n_pieces)), err(" ".join(head))


def test_rows_match_an_independent_masking(base, corpus, result):
    from lexlens.analysis.attribution import group_word_pieces
    from lexlens.analysis.mot import keep_count

    m = 12
    frame = result.per_doc[m]
    doc = int(frame.index[0])
    n_words = len(group_word_pieces(base.tokenizer.tokenize(corpus[doc]))[0])
    none, every, head = _independent_errors(base, corpus, result, m, doc, keep_count(n_words, 0.05))
    assert frame.loc[doc, "(none masked)"] == pytest.approx(none, rel=1e-4, abs=1e-7)
    assert frame.loc[doc, "(all masked)"] == pytest.approx(every, rel=1e-4, abs=1e-7)
    assert frame.loc[doc, "Head"] == pytest.approx(head, rel=1e-4, abs=1e-7)


def test_keep_count_and_masking_helpers():
    from lexlens.analysis.mot import keep_count, masked_ids

    assert keep_count(10, 0.05) == 1 and keep_count(30, 0.05) == 2 and keep_count(50, 0.05) == 3
    assert keep_count(3, 1.0) == 3
    ids, groups = [101, 7, 8, 9, 102], [[1, 2], [3]]
    assert masked_ids(ids, groups, frozenset({1}), 100) == [101, 100, 100, 9, 102]
    assert masked_ids(ids, groups, frozenset({0}), None) == [101, 7, 8, 102]


def test_bad_input(base, corpus):
    from lexlens.analysis.mot import mot_evaluate

    with pytest.raises(InputError, match="empty"):
        mot_evaluate(base, [], m_values=(12,))
    with pytest.raises(LexlensError, match="does not divide"):
        mot_evaluate(base, corpus, m_values=(10,))
    with pytest.raises(LexlensError, match="keep"):
        mot_evaluate(base, corpus, m_values=(12,), keep=0)
    with pytest.raises(LexlensError, match="mask"):
        mot_evaluate(base, corpus, m_values=(12,), mask="blank")


def test_own_codebook_reuses_given_attributions(base, corpus):
    from lexlens.analysis.attribution import attribute_corpus
    from lexlens.analysis.mot import mot_evaluate

    enc = base.fit_codebooks(corpus, 12, 4, seed=0, cache=False)
    texts = corpus[:3]
    attrs = attribute_corpus(enc, texts, steps=2)
    reused = mot_evaluate(enc, texts, attributions=attrs, seed=2)
    fresh = mot_evaluate(enc, texts, own_codebook=True, steps=2, seed=2)
    assert list(reused.table.columns) == [12] and reused.settings["codebook"] == "encoder's own"
    np.testing.assert_allclose(reused.table.to_numpy(), fresh.table.to_numpy(), rtol=1e-4)
    with pytest.raises(LexlensError, match="every corpus text"):
        mot_evaluate(enc, texts, attributions=attrs[:2])
