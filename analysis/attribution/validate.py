"""The options of Integrated Gradients and of the masking evaluation, and their checks.

Every use case checks its whole request with these before any model runs, so a bad option
fails at once with one clear line (an :class:`~lexlens.models.base.InputError`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lexlens.analysis.attribution.quadrature import ADAPTIVE_LEVELS, METHODS
from lexlens.models.base import Capability, InputError, Needs

#: What this analysis needs of an encoder: sub-vectors, codes, and gradients to the words.
ATTRIBUTION_NEEDS = Needs(
    "Integrated Gradients per sub-vector",
    all_of=frozenset({Capability.QUANTISED, Capability.DIFFERENTIABLE}),
)

BASELINES = ("unk", "pad")
#: Largest step count (nodes) of a fixed rule, and of the adaptive one.
MAX_STEPS = 1000
DEFAULT_TOLERANCE = 0.01
DEFAULT_MAX_STEPS = 257
#: How a masked word is hidden: ``[UNK]``, ``[MASK]``, or its pieces deleted.
MASKS = ("unk", "mask", "delete")


def check_baseline(baseline: str) -> str:
    """``unk`` or ``pad``: the token that replaces the non-stop words in the IG baseline."""
    if baseline not in BASELINES:
        raise InputError(f"unknown baseline {baseline!r}: use one of {', '.join(BASELINES)}")
    return baseline


def check_steps(steps: int | None) -> int | None:
    """``None`` (adaptive) or an integer number of nodes in ``2..MAX_STEPS``."""
    if steps is None:
        return None
    if isinstance(steps, bool) or not isinstance(steps, int | np.integer):
        raise InputError(f"steps must be an integer between 2 and {MAX_STEPS}, got {steps!r}")
    if not 2 <= int(steps) <= MAX_STEPS:
        raise InputError(f"steps must be between 2 and {MAX_STEPS}, got {steps}")
    return int(steps)


def check_method(method: str, steps: int | None) -> str:
    """A known quadrature rule; Clenshaw–Curtis takes an odd number of fixed steps."""
    if method not in METHODS:
        raise InputError(f"unknown quadrature {method!r}: use one of {', '.join(METHODS)}")
    if steps is not None and method == "clenshaw-curtis" and steps % 2 == 0:
        raise InputError("Clenshaw–Curtis needs an odd number of steps")
    return method


def check_tolerance(tolerance: float) -> float:
    """The adaptive rule's relative completeness tolerance: a fraction in (0, 1)."""
    if not isinstance(tolerance, int | float) or not 0 < float(tolerance) < 1:
        raise InputError(f"the tolerance must be a fraction in (0, 1), got {tolerance!r}")
    return float(tolerance)


def check_max_steps(max_steps: int) -> int:
    """The adaptive rule's largest node count: from the first level to ``MAX_STEPS``."""
    if isinstance(max_steps, bool) or not isinstance(max_steps, int | np.integer):
        raise InputError(f"max steps must be an integer, got {max_steps!r}")
    if not ADAPTIVE_LEVELS[0] <= int(max_steps) <= MAX_STEPS:
        raise InputError(
            f"max steps must be between {ADAPTIVE_LEVELS[0]} and {MAX_STEPS}, got {max_steps}"
        )
    return int(max_steps)


def check_subvectors(subvectors: Sequence[int] | int | None, m: int) -> list[int]:
    """The selected sub-vector indices (all M when ``None``), validated."""
    if subvectors is None:
        return list(range(m))
    if isinstance(subvectors, int | np.integer):
        subvectors = [int(subvectors)]
    sel = [int(i) for i in subvectors]
    if not sel:
        raise InputError("select at least one sub-vector")
    bad = [i for i in sel if not 0 <= i < m]
    if bad:
        raise InputError(
            f"sub-vector index {bad[0]} out of range: the codebook has M={m} (0..{m - 1})"
        )
    if len(set(sel)) != len(sel):
        raise InputError("sub-vector indices must not repeat")
    return sel


def check_subvector_count(m: int | None) -> int | None:
    """``None`` (the encoder's own codebook) or a number of sub-vectors M ≥ 2 to refit."""
    if m is not None and (isinstance(m, bool) or not isinstance(m, int | np.integer) or m < 2):
        raise InputError(f"M must be an integer ≥ 2, got {m!r}")
    return None if m is None else int(m)


def check_m_values(m_values: Sequence[int], dim: int) -> list[int]:
    """The masking evaluation's M values: distinct integers ≥ 2 that divide ``dim``."""
    from lexlens.models.pq import check_m

    out = []
    for m in m_values:
        if isinstance(m, bool) or not isinstance(m, int | np.integer):
            raise InputError(f"M must be an integer, got {m!r}")
        if m < 2:
            raise InputError("M must be at least 2 (RandT needs another sub-vector)")
        check_m(int(m), dim)
        out.append(int(m))
    if not out:
        raise InputError("give at least one M")
    if len(set(out)) != len(out):
        raise InputError("M values must not repeat")
    return out


def check_keep(keep: float) -> float:
    """The share of each document's words the masking evaluation keeps: in (0, 1]."""
    if isinstance(keep, bool) or not isinstance(keep, int | float) or not 0 < keep <= 1:
        raise InputError(f"keep must be a fraction in (0, 1], got {keep!r}")
    return keep


def check_mask(mask: str) -> str:
    """How masked words are hidden: one of :data:`MASKS`."""
    if mask not in MASKS:
        raise InputError(f"unknown mask {mask!r}: use one of {', '.join(MASKS)}")
    return mask


def check_seed(seed: int) -> int:
    """A seed for the sampling, RandT and k-means: an integer in ``0 .. 2**31 − 1``."""
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or not 0 <= seed < 2**31:
        raise InputError(f"the seed must be an integer from 0 to {2**31 - 1}, got {seed!r}")
    return int(seed)


def check_limit(limit: int | None) -> int | None:
    """``None`` (every document) or a sample size of at least two documents."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 2):
        raise InputError(f"the document limit must be an integer ≥ 2, got {limit!r}")
    return limit


def check_mot_corpus(corpus: Sequence[str]) -> list[str]:
    """The masking evaluation's texts: a list of at least two."""
    if isinstance(corpus, str) or not isinstance(corpus, list | tuple):
        raise InputError("the corpus must be a list of texts")
    if len(corpus) < 2:
        raise InputError("the masking evaluation needs at least two texts")
    return list(corpus)
