"""The Semantic deviation clouds show a word only where an input spelled it: the words of a
dataset cloud and of each item's top-k, on the packaged ImageNet BEIR corpus, checked
against the texts themselves (a whole-word search in each text, not the package's rule)."""

from __future__ import annotations

import json
import re
import unicodedata

import pytest

from lexlens.analysis.core.samples import sample_path


def _corpus_texts() -> list[str]:
    """Title and text of every document of the packaged imagenet_beir corpus."""
    path = sample_path("benchmarks/imagenet_beir/corpus.jsonl")
    docs = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return [f"{d.get('title', '')} {d.get('text', '')}".strip() for d in docs]


def _spelled_somewhere(texts: list[str]):
    """Whether a word occurs as a whole word in one of ``texts`` (case and accents aside,
    as an uncased WordPiece tokenizer reads them)."""

    def plain(text: str) -> str:
        folded = unicodedata.normalize("NFD", text.casefold())
        return "".join(c for c in folded if unicodedata.category(c) != "Mn")

    blob = "\n".join(plain(t) for t in texts)

    def spelled(word: str) -> bool:
        return re.search(rf"(?<![^\W_]){re.escape(plain(word))}(?![^\W_])", blob) is not None

    return spelled


@pytest.fixture(scope="module")
def measured():
    from lexlens.analysis.deviation.deviation import deviation
    from lexlens.models import load_encoder

    encoder = load_encoder("splade-tiny")
    texts = _corpus_texts()
    return encoder, texts, deviation(encoder, texts, max_rows=len(texts), k=64)


def test_silent_wrong_dataset_cloud_words_are_spelled_by_some_text(measured):
    encoder, texts, result = measured
    assert len(texts) >= 200
    vocab, spelled = set(encoder.vocab), _spelled_somewhere(texts)
    cloud = [t.token for t in result.captions.cloud_terms]
    assert len(cloud) >= 50
    joined = [w for w in cloud if w not in vocab]  # a word made of pieces
    assert [w for w in joined if not spelled(w)] == []


def test_silent_wrong_item_top_words_are_spelled_by_its_own_text(measured):
    encoder, texts, result = measured
    vocab = set(encoder.vocab)
    by_text = {t: t for t in texts}
    wrong, joined = [], 0
    for row in result.captions.rows:
        own = _spelled_somewhere([by_text[row.text]])
        for word in row.top_words:
            if word not in vocab:
                joined += 1
                if not own(word):
                    wrong.append((row.id, word))
    assert joined > 0  # pieces were joined (the texts spell words the vocabulary splits)
    assert wrong == []


def test_silent_wrong_a_cloud_never_glues_pieces_side_by_side_in_a_token_list():
    """A caption's tokens are kept each once: "a pcx and a ps" → a p ##cx and ##s, where
    "and" now sits before "##s". The cloud joins "p ##s" (the text says "ps"), never
    "and ##s"."""
    import numpy as np
    import scipy.sparse as sp

    from lexlens.analysis.deviation.scoring import Scorer, caption_terms
    from lexlens.analysis.deviation.sets import SetAccumulator
    from lexlens.analysis.deviation.static_embeddings import StaticEmbeddings

    vocab = ["[CLS]", "a", "p", "##cx", "and", "##s"]
    static = StaticEmbeddings.from_table(np.eye(len(vocab), dtype=np.float32), vocab, "identity")
    acc = SetAccumulator("captions", Scorer.build(vocab, static, 5, "k"))
    text = "a pcx and a ps"
    units = ["[CLS]", "a", "p", "##cx", "and", "a", "p", "##s"]
    acc.add(
        ["0"],
        [text],
        sp.csr_matrix(np.array([[0, 0.2, 0.9, 0.7, 0.5, 0.4]], np.float32)),
        [caption_terms(units)],
    )
    out = acc.result()
    spelled = _spelled_somewhere([text])
    cloud = [t.token for t in out.cloud_terms]
    assert "ands" not in cloud and "ps" in cloud
    assert all(w in vocab or spelled(w) for w in cloud)
    assert all(w in vocab or spelled(w) for w in out.rows[0].top_words)
