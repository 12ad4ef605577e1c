"""What Integrated Gradients attributes, and one text's inputs to it.

For a text with input word embeddings ``x = (x_1..x_n)`` and its baseline ``x'`` (see
:mod:`lexlens.analysis.attribution.words`), the target of sub-vector ``i`` is::

    F_i(x) = −||d̂_i − f_i(x)||²

with ``d̂_i`` the centroid of the code the real input gets, fixed along the path.
``GlobalT``, the whole vector, is ``−||d̂ − f(x)||² = Σ_i F_i`` (an OPQ rotation is
orthogonal), so its attribution is the sum of the M per-sub-vector ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from lexlens.analysis.attribution.words import baseline_ids


def targets(encoder, f: torch.Tensor, dhat: torch.Tensor) -> torch.Tensor:
    """``F_i = −||d̂_i − f_i||²`` for every sub-vector: ``[B, M]`` (``dhat`` [M, d])."""
    return -((dhat.unsqueeze(0) - encoder.split_torch(f)) ** 2).sum(-1)


@dataclass
class Prepared:
    """One text's inputs to IG: embeddings of the text and of its baseline, and its code."""

    tokens: list[str]
    baseline_tokens: list[str]
    x: torch.Tensor  # [T, E]
    xb: torch.Tensor  # [T, E]
    mask: torch.Tensor  # [1, T]
    codes: np.ndarray  # [M]
    dhat: torch.Tensor  # [M, d]
    gap: np.ndarray  # [M]  F_i(x) − F_i(x')
    truncated: bool


@torch.no_grad()
def prepare(encoder, text: str, baseline: str) -> Prepared:
    """Embed ``text`` and its baseline, find the text's codes and both ends' targets."""
    batch = encoder.tokenize([text])
    n = int(batch.attention_mask[0].sum())
    ids = batch.input_ids[0, :n].tolist()
    base = baseline_ids(ids, encoder.tokenizer, baseline)
    both = torch.tensor([ids, base], dtype=torch.long, device=encoder.device)
    mask = torch.ones((1, n), dtype=torch.long, device=encoder.device)
    emb = encoder.word_embeddings(both)
    f = encoder.forward_embeds(emb, mask.expand(2, -1))
    cents = encoder.centroids_torch()  # [M, K, d]
    sub = encoder.split_torch(f[:1])[0]  # [M, d]
    codes = ((sub.unsqueeze(1) - cents) ** 2).sum(-1).argmin(-1)  # [M]
    dhat = cents[torch.arange(cents.shape[0], device=cents.device), codes]  # [M, d]
    big_f = targets(encoder, f, dhat).double().cpu().numpy()  # [2, M]
    convert = encoder.tokenizer.convert_ids_to_tokens
    return Prepared(
        tokens=convert(ids),
        baseline_tokens=convert(base),
        x=emb[0],
        xb=emb[1],
        mask=mask,
        codes=codes.cpu().numpy().astype(np.int64),
        dhat=dhat,
        gap=big_f[0] - big_f[1],
        truncated=bool(batch.truncated[0]),
    )
