"""One text's Integrated Gradients per sub-vector (a record), and RandT.

RandT (RepMoT's random-target baseline) scores the words of sub-vector ``i`` with the
attributions of another sub-vector ``j(i) ≠ i``, drawn once per seed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lexlens.analysis.core.results import Record
from lexlens.models.base import InputError


@dataclass(frozen=True, kw_only=True)
class SubvectorAttribution(Record):
    """IG of one text for the selected sub-vectors of a quantised encoder.

    Rows of ``token_attributions``, ``attributions``, ``delta`` and ``target_gap`` follow
    ``subvectors`` (all M, ``0..M-1``, unless a subset was asked for); ``codes`` has all M.
    ``attribution_sums``, ``global_sum`` and ``global_gap`` are derived from the others when
    the record is made (they are part of its JSON, every number unrounded); ``target_gap``,
    when not given, is derived from completeness.
    """

    text: str
    tokens: list[str]  # word pieces incl. [CLS]/[SEP]
    baseline_tokens: list[str] = field(default_factory=list)  # x' as tokens
    words: list[str]  # word pieces merged into words ([CLS]/[SEP] dropped)
    word_groups: list[list[int]] = field(default_factory=list)  # token indices of each word
    subvectors: list[int] = field(default_factory=list)
    codes: np.ndarray  # [M]  the code of each sub-vector
    token_attributions: np.ndarray  # [S, n_tokens]  summed over the embedding dimension
    attributions: np.ndarray  # [S, n_words]   word pieces summed
    attribution_sums: np.ndarray = field(init=False)  # [S]  Σ_w attributions
    target_gap: np.ndarray | None = None  # [S]  F_i(x) − F_i(x')
    delta: np.ndarray  # [S]  Σ token attributions − (F_i(x) − F_i(x'))
    global_attributions: np.ndarray  # [n_words]  GlobalT (whole vector)
    global_sum: float = field(init=False)
    global_gap: float = field(init=False)  # F(x) − F(x') of the whole vector
    global_delta: float
    steps: int  # quadrature nodes used
    method: str = "gausslegendre"
    baseline: str = "unk"
    converged: bool | None = None  # every |delta_i| within the tolerance
    truncated: bool

    def __post_init__(self) -> None:
        rows = np.asarray(self.attributions, dtype=np.float64)
        glob = np.asarray(self.global_attributions, dtype=np.float64)
        derived = {
            "attribution_sums": rows.sum(axis=1),
            "global_sum": float(glob.sum()),
            "global_gap": float(glob.sum() - float(self.global_delta)),
        }
        if self.target_gap is None:
            tokens = np.asarray(self.token_attributions, np.float64)
            derived["target_gap"] = tokens.sum(1) - np.asarray(self.delta)
        for name, value in derived.items():
            object.__setattr__(self, name, value)

    @property
    def m(self) -> int:
        """Sub-vectors of the codebook (all of them, attributed or not)."""
        return int(len(self.codes))

    def row(self, subvector: int) -> int:
        """Row of ``attributions`` holding sub-vector ``subvector``."""
        try:
            return self.subvectors.index(int(subvector))
        except ValueError:
            raise InputError(f"sub-vector {subvector} was not attributed") from None

    def gap(self) -> np.ndarray:
        """``F_i(x) − F_i(x')`` per row."""
        return np.asarray(self.target_gap, dtype=np.float64)

    def relative_delta(self) -> np.ndarray:
        """``|delta_i| / |F_i(x) − F_i(x')|`` per row (``inf`` where the gap is 0)."""
        gap = np.abs(self.gap())
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(gap > 0, np.abs(self.delta) / gap, np.inf)

    def tolerance_scale(self) -> np.ndarray:
        """What the tolerance multiplies, per row: ``max(|F_i(x) − F_i(x')|, mean_j |…|)`` (a
        sub-vector whose own gap is near 0 is judged against the text's mean gap)."""
        gap = np.abs(self.gap())
        return np.maximum(gap, gap.mean()) if gap.size else gap


def random_other(m: int, seed: int = 0) -> np.ndarray:
    """For each sub-vector i a random j ≠ i (RandT); ``[M]`` int, fixed by ``seed``."""
    if m < 2:
        raise InputError("RandT needs at least two sub-vectors")
    rng = np.random.default_rng(seed)
    draw = rng.integers(0, m - 1, size=m)
    return np.where(draw >= np.arange(m), draw + 1, draw)


def randt_attributions(attr: SubvectorAttribution, seed: int = 0) -> np.ndarray:
    """RandT word scores ``[M, n_words]``: row i = the attributions of sub-vector j(i) ≠ i."""
    if attr.subvectors != list(range(attr.m)):
        raise InputError("RandT needs the attributions of all M sub-vectors")
    return attr.attributions[random_other(attr.m, seed)]
