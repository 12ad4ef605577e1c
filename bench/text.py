"""Text encoding of the default encoder (splade-tiny): batched vs one text at a time, and
the vocabulary projection against its FLOP floor.

``keep_units=False`` (what collections and deviation runs use): the real tokens of a batch
are packed and projected onto the 30,522 terms in chunks, and reduced with a max per text
(``models.projection``). The projection is the dominant cost, ``2 · n_real · H · |V|``
FLOPs; its floor is that count divided by the rate ``torch.mm`` reaches on the same shapes
in this run, and the figure is the share of that floor the whole batched encoding reaches
(tokenisation, the BERT body and Python included).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable

from bench.run import figure, timed


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


def _mm_rate(rows: int, hidden: int, weight, n_real: int) -> tuple[float, float]:
    """FLOP/s of ``torch.mm`` on the projection's shapes ([rows, H] @ [H, |V|], into one
    reused buffer), enough calls to cover ``n_real`` rows; and of one ``[n_real, H]`` call."""
    import torch

    vocab = weight.shape[0]
    a = torch.randn(rows, hidden)
    buffer = torch.empty(rows, vocab)
    calls = math.ceil(n_real / rows)
    chunked = timed(lambda: [torch.mm(a, weight.T, out=buffer) for _ in range(calls)], repeat=3)
    whole = torch.randn(n_real, hidden)
    one = timed(lambda: torch.mm(whole, weight.T), repeat=3)
    flops = 2.0 * hidden * vocab
    return flops * calls * rows / chunked, flops * n_real / one


def _sparse_encoder_texts() -> dict[str, list[str]]:
    """Short texts (the first 10 words of 400 stdlib docstring paragraphs) and long ones
    (1,500 whole paragraphs, 40–600 characters)."""
    from bench.collections import corpus

    paragraphs = corpus(1900)
    return {
        "short": [" ".join(t.split()[:10]) for t in paragraphs[1500:1900]],
        "long": paragraphs[:1500],
    }


def _cpu_and_wall(fn: Callable[[], object]) -> tuple[float, float]:
    """CPU seconds of this process (every thread) and wall seconds of one call."""
    cpu, wall = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - cpu, time.perf_counter() - wall


def _best_interleaved(
    calls: dict[str, Callable[[], object]], repeat: int
) -> dict[str, dict[str, float]]:
    """Least CPU and least wall seconds of each call over ``repeat`` rounds; the calls
    alternate within a round, so a change in the machine's load falls on all of them."""
    best = {name: {"cpu_s": math.inf, "wall_s": math.inf} for name in calls}
    for _ in range(repeat):
        for name, call in calls.items():
            cpu, wall = _cpu_and_wall(call)
            best[name]["cpu_s"] = min(best[name]["cpu_s"], cpu)
            best[name]["wall_s"] = min(best[name]["wall_s"], wall)
    return best


def _encoding_runs(encoder, peer, texts: list[str], repeat: int) -> dict[str, dict]:
    """Lexlens and SparseEncoder on ``texts``, one torch thread each and then torch's default
    thread count (restored after)."""
    import torch

    default = torch.get_num_threads()
    calls = {
        "lexlens": lambda: encoder.encode_texts(texts, side="document", keep_units=False),
        "sparse_encoder": lambda: peer.encode(texts, batch_size=32, convert_to_tensor=True),
    }
    runs = {}
    for threads in sorted({1, default}):
        torch.set_num_threads(threads)
        try:
            best = _best_interleaved(calls, repeat)
        finally:
            torch.set_num_threads(default)
        ours, theirs = best["lexlens"], best["sparse_encoder"]
        runs[f"threads_{threads}"] = {
            "lexlens": ours,
            "sparse_encoder": theirs,
            "cpu_ratio": theirs["cpu_s"] / ours["cpu_s"],
            "wall_ratio": theirs["wall_s"] / ours["wall_s"],
        }
    return runs


def beside_sparse_encoder(encoder, *, repeat: int = 3) -> list[dict]:
    """Lexlens's splade-tiny against sentence-transformers' ``SparseEncoder`` on the same
    checkpoint (MLM + SPLADE max pooling): CPU-time ratio, one thread each, outputs compared.

    The machine is shared: the figure is the ratio of CPU seconds with one torch thread each
    (what the work costs); the ratios at torch's default thread count, CPU and wall, are in
    the details, measured in the same run.
    """
    import numpy as np
    from sentence_transformers import SparseEncoder

    from lexlens.models.packaged import splade_tiny_dir

    peer = SparseEncoder(str(splade_tiny_dir()), device="cpu")
    out = []
    for kind, texts in _sparse_encoder_texts().items():
        encoder.encode_texts(texts[:64], side="document", keep_units=False)  # warm-up
        peer.encode(texts[:64], batch_size=32, convert_to_tensor=True)
        runs = _encoding_runs(encoder, peer, texts, repeat)
        ours = np.stack([e.weights for e in encoder.encode_texts(texts, keep_units=False)])
        theirs = peer.encode(texts, batch_size=32, convert_to_tensor=True).to_dense().numpy()
        difference = float(np.abs(ours - theirs).max())
        one = runs["threads_1"]
        out.append(
            figure(
                f"text_encoding_{kind}_over_sparse_encoder",
                one["cpu_ratio"] if difference <= 1e-5 else None,
                "x",
                goal=(">=", 3.0),
                measured_with=f"least CPU seconds of {repeat} interleaved runs, one torch thread "
                f"each: {len(texts):,} {kind} texts (stdlib docstrings) encoded by Lexlens's "
                "splade-tiny (keep_units=False) and by sentence-transformers' SparseEncoder on "
                "the same checkpoint (batch 32), same process; counted only when every output "
                "equals to 1e-5 (details: the same at torch's default thread count)",
                details={
                    "texts": len(texts),
                    "lexlens_s": one["lexlens"]["cpu_s"],
                    "sparse_encoder_s": one["sparse_encoder"]["cpu_s"],
                    "runs": runs,
                    "max_abs_difference": difference,
                    "mean_chars": float(np.mean([len(t) for t in texts])),
                    "load_average_1min": os.getloadavg()[0],
                },
            )
        )
    return out


def run() -> list[dict]:
    import torch

    from lexlens.models import load_encoder

    encoder = load_encoder("splade-tiny")
    texts = _texts(256)
    encoder.encode_texts(texts[:8], keep_units=False)  # warm-up
    batched = timed(lambda: encoder.encode_texts(texts, keep_units=False), repeat=3)
    single = timed(lambda: [encoder.encode_texts([t], keep_units=False) for t in texts], repeat=2)

    n_real = sum(len(e.units) for e in encoder.encode_texts(texts, keep_units=False))
    _, decoder = encoder.head
    weight = decoder.weight.detach()
    vocab, hidden = weight.shape
    projection_flops = 2.0 * n_real * hidden * vocab
    rows = encoder.projection_rows
    mm_rate, one_call_rate = _mm_rate(rows, hidden, weight, n_real)
    floor = projection_flops / mm_rate
    return [
        *beside_sparse_encoder(encoder),
        figure(
            "text_batched_over_single",
            single / batched,
            "x",
            goal=(">=", 1.5),
            measured_with=f"best of 3 (batched) / 2 (single): {len(texts)} texts of 6–25 words, "
            "keep_units=False, one call vs one call per text",
            details={
                "encoder": encoder.name,
                "n_texts": len(texts),
                "pooled_batch_size": encoder.pooled_batch_size,
                "batched_texts_per_s": len(texts) / batched,
                "single_texts_per_s": len(texts) / single,
                "torch_threads": torch.get_num_threads(),
            },
        ),
        figure(
            "text_projection_share_of_flop_floor",
            floor / batched,
            "fraction",
            goal=(">=", 0.40),
            measured_with="projection FLOPs 2·n_real·H·|V| at the rate torch.mm reaches on "
            f"[{rows}, H] @ [H, |V|] in this run, divided by the whole batched encoding's time",
            details={
                "n_real_tokens": n_real,
                "hidden": hidden,
                "vocab": vocab,
                "projection_gflop": projection_flops / 1e9,
                "matmul_gflop_per_s": mm_rate / 1e9,
                "one_call_matmul_gflop_per_s": one_call_rate / 1e9,
                "floor_s": floor,
                "batched_s": batched,
                "achieved_gflop_per_s": projection_flops / batched / 1e9,
            },
        ),
    ]
