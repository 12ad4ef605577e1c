"""The settings of every faithfulness check, declared once (:mod:`lexlens.analysis.core.options`):
how many random draws the baseline averages over, how far a curve goes, the seed.
``lexlens evaluate --faithfulness`` and the pages read them from :class:`FaithfulnessOptions`."""

from __future__ import annotations

from dataclasses import dataclass

from lexlens.analysis.core.options import SEED, Options, option, shared

#: Random draws (subsets, orders, cells) the baseline averages over.
DEFAULT_DRAWS = 10
#: Parts removed along a deletion curve, at most (AOPC over k = 0…K).
DEFAULT_CURVE_K = 5


@dataclass(frozen=True)
class FaithfulnessOptions(Options):
    """How an explanation's faithfulness is measured: the random baseline's draws, the
    length of the deletion curves, the seed of the random choices."""

    what = "faithfulness"

    draws: int = option(
        DEFAULT_DRAWS,
        "random draws the baseline averages over (seeded)",
        low=1,
        high=1000,
        label="Random draws",
        widget="number",
    )
    curve_k: int = option(
        DEFAULT_CURVE_K,
        "parts (words, cells) removed along a deletion curve, at most: AOPC over k = 0…K",
        low=1,
        high=100,
        label="Curve length K",
        widget="number",
    )
    seed: int = shared(SEED)
