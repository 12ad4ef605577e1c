"""Both co-activation numbers of a caption set are shown, each under its own name: FLOPs as
SPLADE and D2S define it (Σ_j p̄_j², self-pairs included) and the mean over pairs of
different captions; references computed here from the gated vectors' activation counts."""

from __future__ import annotations

import numpy as np
import pytest

from lexlens.analysis.core.gating import DEFAULT_GATE_K, gate
from lexlens.analysis.deviation.deviation import deviation
from lexlens.analysis.deviation.flops import FLOPS_LABEL, PAIRS_LABEL
from lexlens.app.cli.deviation import render

CAPTIONS = [
    "a dog running on the beach",
    "two dogs playing in the snow",
    "a cup of espresso on a wooden table",
    "a red rocket launching into the night sky",
    "a cat sleeping on a sofa",
]


def test_silent_wrong_each_flops_number_is_named_for_what_it_counts(splade):
    result = deviation(splade, CAPTIONS)
    (part,) = result.sets
    encodings = splade.encode_texts(CAPTIONS, side="document")
    active = np.stack([gate(e, splade.vocab, DEFAULT_GATE_K) != 0 for e in encodings])
    counts = active.sum(axis=0).astype(np.float64)
    n = len(CAPTIONS)
    # integer counts summed in float64: exact, up to the division's rounding
    with_self = float(np.sum((counts / n) ** 2))
    different = float((counts @ counts - counts.sum()) / (n * (n - 1)))
    assert part.flops_with_self_pairs == pytest.approx(with_self, rel=1e-12)
    assert part.flops == pytest.approx(different, rel=1e-12)
    assert with_self > different  # the self-pairs add Σ_j p̄_j / n
    text = render(result)
    assert f"{FLOPS_LABEL}: {with_self:.3f}" in text, text
    assert f"{PAIRS_LABEL}: {different:.3f}" in text, text
    assert "self-pairs included" in FLOPS_LABEL and "Σⱼ p̄ⱼ²" in FLOPS_LABEL
