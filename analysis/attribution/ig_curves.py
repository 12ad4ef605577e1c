"""Are the Integrated Gradients per sub-vector true? Deletion and insertion curves of each
sub-vector's objective, in the order of its own attributions (MoT) against RandT and GlobalT.

For sub-vector ``i`` the objective is IG's own target ``F_i(x) = −||d̂_i − f_i(x)||²``
(:mod:`lexlens.analysis.attribution.objective`; ``d̂_i`` the centroid of the code the
unmasked text gets). The words IG can credit are those the baseline changes (every word but
the stop words, which keep their embedding in RepMoT's baseline and score exactly 0). In a
ranking's order, for ``k = 0…K``:

- **deletion**: the first ``k`` words replaced by the baseline's fill token ([UNK], or
  [PAD]) in the real text, the model run, ``F_i`` read: a faithful ranking makes it fall
  fastest; AOPC = the mean drop ``1/(K+1) Σ_k (F_i(x) − F_i(x^(k)))`` (Samek et al. 2017);
- **insertion**: the first ``k`` words put back into the baseline ``x'``: a faithful ranking
  makes it rise fastest; AOPC = the mean gain ``1/(K+1) Σ_k (F_i(x^(+k)) − F_i(x'))``
  (Petsiuk et al. 2018, "RISE", deletion and insertion games).

Rankings (RepMoT's attribution baselines): **MoT**, sub-vector ``i``'s own attributions;
**RandT**, the attributions of another, random sub-vector ``j(i)``
(:func:`lexlens.analysis.attribution.subvector.random_other`, the same draw the masking
evaluation uses); **GlobalT**, the whole vector's. Ties by word position. Every point is the
model run on the edited token sequence (one batch of every distinct sequence), never the
attributions themselves; curves are averaged over the sub-vectors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lexlens.analysis.attribution.options import ATTRIBUTION_NEEDS
from lexlens.analysis.attribution.subvector import SubvectorAttribution, random_other
from lexlens.analysis.core.arguments import encoder_argument
from lexlens.analysis.core.curves import MEASURED_BY, aopc, insertion_aopc
from lexlens.analysis.core.options import SEED
from lexlens.analysis.core.results import Result
from lexlens.models.base import InputError

#: The rankings compared, in the order shown.
RANKINGS = ("MoT", "RandT", "GlobalT")
#: Sequences run through the model at once.
FORWARD_BATCH = 256


@dataclass(frozen=True)
class IgCurves(Result):
    """One text's deletion and insertion curves per ranking, averaged over the sub-vectors
    (``deletion[name][k]``: mean ``F_i`` after ``k`` words), each sub-vector's AOPCs
    (``aopc[name]``: one per sub-vector of ``subvectors``) and their means."""

    file_stem = "ig_curves"

    text: str
    words: list[str]  # the words IG can credit (the baseline changes them)
    subvectors: list[int]
    k: int
    deletion: dict  # ranking → mean curve over the sub-vectors
    insertion: dict
    deletion_aopc: dict  # ranking → [per sub-vector]
    insertion_aopc: dict
    mean_deletion_aopc: dict  # ranking → mean over the sub-vectors
    mean_insertion_aopc: dict
    seed: int = 0
    measured_by: str = MEASURED_BY
    notes: list[str] = field(default_factory=list)


def _order(scores: np.ndarray, candidates: list[int]) -> list[int]:
    """The candidate words by score, highest first (ties by position)."""
    return sorted(candidates, key=lambda w: (-float(scores[w]), w))


def _subvectors(encoder, sequences: list[list[int]]) -> np.ndarray:
    """``f_i(seq)`` for every sequence and sub-vector ``[n, M, d]`` (float64)."""
    import torch  # heavy: torch loads on first use

    out = []
    pad = encoder.tokenizer.pad_token_id
    with torch.no_grad():
        for start in range(0, len(sequences), FORWARD_BATCH):
            chunk = sequences[start : start + FORWARD_BATCH]
            width = max(len(s) for s in chunk)
            ids = torch.full((len(chunk), width), pad, dtype=torch.long)
            mask = torch.zeros((len(chunk), width), dtype=torch.long)
            for r, seq in enumerate(chunk):
                ids[r, : len(seq)] = torch.tensor(seq)
                mask[r, : len(seq)] = 1
            f = encoder.forward_ids(ids.to(encoder.device), mask.to(encoder.device))
            sub = encoder.split_torch(f).double().cpu().numpy()
            out.append(sub)
    return np.concatenate(out)


def ig_curves(
    encoder, attribution: SubvectorAttribution, *, k: int = 10, seed: int = 0
) -> IgCurves:
    """The deletion and insertion curves of one text's attributions (``encoder`` with the
    codebook the attributions were made with; at most ``k`` words along each curve)."""
    a = attribution
    if not isinstance(a, SubvectorAttribution):
        raise InputError(f"attribution must be a SubvectorAttribution, not {type(a).__name__}")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InputError(f"k must be a positive integer, not {k!r}")
    convert = encoder.tokenizer.convert_tokens_to_ids
    ids, base = convert(list(a.tokens)), convert(list(a.baseline_tokens))
    if len(ids) != len(base):
        raise InputError("the attribution's text and baseline differ in length")
    groups = a.word_groups
    changed = [w for w, g in enumerate(groups) if any(ids[j] != base[j] for j in g)]
    kk = min(k, len(changed))
    centroids = np.asarray(encoder.centroids, dtype=np.float64)
    codes = np.asarray(a.codes)
    dhat = centroids[np.arange(len(codes)), codes]
    orders: dict[str, list[list[int]]] = {"GlobalT": [_order(a.global_attributions, changed)]}
    own = [_order(a.attributions[r], changed) for r in range(len(a.subvectors))]
    orders["MoT"] = own
    all_m = a.subvectors == list(range(a.m)) and a.m > 1
    if all_m:
        orders["RandT"] = [own[j] for j in random_other(a.m, seed)]

    def sequence(order: list[int], j: int, deleting: bool) -> tuple[int, ...]:
        picked = {t for w in order[:j] for t in groups[w]}
        if deleting:
            return tuple(base[t] if t in picked else ids[t] for t in range(len(ids)))
        return tuple(ids[t] if t in picked else base[t] for t in range(len(ids)))

    wanted = {
        sequence(o, j, d)
        for os in orders.values()
        for o in os
        for j in range(kk + 1)
        for d in (True, False)
    }
    listed = sorted(wanted)
    sub = _subvectors(encoder, [list(s) for s in listed])
    row_of = {s: n for n, s in enumerate(listed)}
    real = sub[row_of[tuple(ids)]]  # [M, d]
    if not np.array_equal(((real[:, None] - centroids) ** 2).sum(-1).argmin(-1), codes):
        raise InputError("the encoder's codebook is not the one these attributions were made with")
    objective = -((sub - dhat[None]) ** 2).sum(-1)
    return _curves(a, orders, sequence, objective, row_of, kk, seed, [a.words[w] for w in changed])


def _curves(a, orders, sequence, objective, row_of, kk, seed, words) -> IgCurves:
    """Each ranking's curves from the objectives of the distinct sequences."""
    rows = list(range(len(a.subvectors)))
    deletion, insertion, d_aopc, i_aopc = {}, {}, {}, {}
    for name in RANKINGS:
        if name not in orders:
            continue
        per = orders[name] if name != "GlobalT" else orders[name] * len(rows)
        dels, ins = [], []
        for r, order in zip(rows, per, strict=True):
            sv = a.subvectors[r]
            dels.append([objective[row_of[sequence(order, j, True)], sv] for j in range(kk + 1)])
            ins.append([objective[row_of[sequence(order, j, False)], sv] for j in range(kk + 1)])
        deletion[name] = np.mean(dels, axis=0).tolist()
        insertion[name] = np.mean(ins, axis=0).tolist()
        d_aopc[name] = [aopc(c) for c in dels]
        i_aopc[name] = [insertion_aopc(c) for c in ins]
    notes = [] if "RandT" in orders else ["RandT needs the attributions of all M sub-vectors"]
    return IgCurves(
        text=a.text,
        words=words,
        subvectors=list(a.subvectors),
        k=kk,
        deletion=deletion,
        insertion=insertion,
        deletion_aopc=d_aopc,
        insertion_aopc=i_aopc,
        mean_deletion_aopc={n: float(np.mean(v)) for n, v in d_aopc.items()},
        mean_insertion_aopc={n: float(np.mean(v)) for n, v in i_aopc.items()},
        seed=seed,
        notes=notes,
    )


def ig_faithfulness(
    encoder, report_or_result: Any, text: int = 0, *, k: int = 10, seed: int = 0
) -> IgCurves:
    """The curves of text number ``text`` of an attribution (an ``AttributionResult`` or an
    ``AttributionReport``), with the encoder refitted to its M when it differs (the same
    cached codebooks as the attribution, seeded by ``seed``)."""
    from lexlens.analysis.attribution.attribution import with_subvectors  # heavy: loads torch

    encoder = encoder_argument(encoder, needs=ATTRIBUTION_NEEDS)
    seed = SEED.check(seed)
    result = getattr(report_or_result, "attribution", report_or_result)
    texts = getattr(result, "texts", None)
    if not isinstance(texts, list) or not texts:
        raise InputError("give an attribution result (or report) with at least one text")
    if isinstance(text, bool) or not isinstance(text, int) or not 0 <= text < len(texts):
        raise InputError(f"text must be an index from 0 to {len(texts) - 1}, not {text!r}")
    enc = with_subvectors(encoder, result.m, seed)
    return ig_curves(enc, texts[text], k=k, seed=seed)
