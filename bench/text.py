"""Text encoding throughput of the default encoder: batched vs one text at a time."""

from __future__ import annotations

from bench.run import timed


def _texts(n: int) -> list[str]:
    """Deterministic sentence-length texts of varied length."""
    words = [
        "retrieval",
        "sparse",
        "lexical",
        "encoder",
        "image",
        "caption",
        "query",
        "document",
        "token",
        "weight",
        "vocabulary",
        "cat",
        "dog",
        "book",
        "train",
        "bay",
        "river",
        "mountain",
        "city",
        "night",
        "market",
    ]
    return [" ".join(words[(i * 7 + j) % len(words)] for j in range(6 + i % 20)) for i in range(n)]


def run() -> list[dict]:
    from lexlens.models import load_encoder

    encoder = load_encoder("splade-tiny")
    texts = _texts(256)
    encoder.encode_texts(texts[:8])  # warm-up
    batched = timed(lambda: encoder.encode_texts(texts, keep_units=False), repeat=3)
    single = timed(lambda: [encoder.encode_texts([t], keep_units=False) for t in texts], repeat=2)
    return [
        {
            "name": "encode_texts_batched_vs_single",
            "encoder": encoder.name,
            "n_texts": len(texts),
            "batch_size": encoder.batch_size,
            "batched_texts_per_s": len(texts) / batched,
            "single_texts_per_s": len(texts) / single,
            "speedup_batched_over_single": single / batched,
        }
    ]
