"""The options of Integrated Gradients per sub-vector, of the MoT masking evaluation and of
the attribution report, each declared once (:mod:`lexlens.analysis.core.options`).

- :class:`IgOptions` — IG itself (Sundararajan et al. 2017): the quadrature, the baseline,
  the sub-vectors attributed and how many interpolated inputs go through the model at once;
- :class:`AttributeOptions` — ``attribute``: IG's options, and ``m`` (refit the codebooks
  with that many sub-vectors) with the k-means ``seed``;
- :class:`MotOptions` — ``mot_evaluate`` (RepMoT, "Interpreting Dense Retrieval as Mixture
  of Topics", Table 3);
- :class:`ReportOptions` — ``attribution_report`` and ``build_report``: the attribution's
  options, the masking evaluation over the same texts (``mot``, ``keep``), and ``top`` for
  the terms report a lexical encoder gets.

The command-line flags of ``lexlens attribute``, ``mot-eval`` and ``report`` and the
Attribution page's widgets are derived from these declarations. Checks that relate an
option to an input (a sub-vector index against the codebook's M, an M against the
embedding dimension, the masking evaluation against the number of texts) are the use
cases'.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lexlens.analysis.attribution.quadrature import ADAPTIVE_LEVELS, METHODS
from lexlens.analysis.core.options import (
    BATCH_SIZE,
    SEED,
    OptionError,
    Options,
    integer_list,
    names,
    option,
    shared,
    shared_option,
)
from lexlens.analysis.lexical.terms import REPORT_TOP, TermsOptions
from lexlens.models.base import Capability, LexlensError, Needs
from lexlens.models.pq import MAX_K, check_k

#: What this analysis needs of an encoder: sub-vectors, codes, and gradients to the words.
ATTRIBUTION_NEEDS = Needs(
    "Integrated Gradients per sub-vector",
    all_of=frozenset({Capability.QUANTISED, Capability.DIFFERENTIABLE}),
)

#: The IG baseline's fill token for every word but the stop words: ``[UNK]`` or ``[PAD]``.
BASELINES = ("unk", "pad")
#: Largest node count of a fixed rule, and of the adaptive one.
STEPS_LIMIT = 1000
DEFAULT_TOLERANCE = 0.01
DEFAULT_MAX_STEPS = 257
#: How a masked word is hidden: ``[UNK]``, ``[MASK]``, or its pieces deleted.
MASKS = ("unk", "mask", "delete")


def _steps_text(text: str) -> Any:
    """A command line's ``--steps``: ``auto`` (or ``none``) is adaptive; else the number
    (a text that is not one is left for the declaration to refuse)."""
    word = text.strip().lower()
    if word in ("auto", "none", ""):
        return None
    try:
        return int(word)
    except ValueError:
        return text


def _open_fraction(value: float) -> float:
    """The tolerance lies strictly between 0 and 1."""
    if not 0 < value < 1:
        raise TOLERANCE_OPTION.refuse(value)
    return value


def _kept_share(value: float) -> float:
    """The kept share of words is above 0 (at most 1, by the declared limit)."""
    if not value > 0:
        raise KEEP_OPTION.refuse(value)
    return value


#: IG's node count (shared by every use case that runs IG).
STEPS_OPTION = shared_option(
    "steps",
    int,
    None,
    optional=True,
    low=2,
    high=STEPS_LIMIT,
    parse=_steps_text,
    wanted=f"auto or an integer from 2 to {STEPS_LIMIT:,}",
    label="IG steps",
    widget="number",
    help="IG quadrature nodes: auto adds nested Clenshaw–Curtis nodes until every "
    "sub-vector's completeness gap is within the tolerance; a number: that many nodes",
)
TOLERANCE_OPTION = shared_option(
    "tolerance",
    float,
    DEFAULT_TOLERANCE,
    low=0,
    high=1,
    check=_open_fraction,
    step=0.005,
    wanted="a fraction in (0, 1)",
    label="Tolerance",
    help="auto steps: stop once every sub-vector's |delta_i| ≤ tolerance · |F_i(x) − F_i(x′)|",
)
MAX_STEPS_OPTION = shared_option(
    "max_steps",
    int,
    DEFAULT_MAX_STEPS,
    low=ADAPTIVE_LEVELS[0],
    high=STEPS_LIMIT,
    label="Most IG steps",
    widget="number",
    help="auto steps: at most this many nodes",
)
KEEP_OPTION = shared_option(
    "keep",
    float,
    0.05,
    low=0,
    high=1,
    check=_kept_share,
    step=0.01,
    wanted="a fraction in (0, 1]",
    label="MoT: fraction of words kept",
    help="the masking evaluation keeps this share of each text's words by each ranking",
)


def _distinct_indices(value: tuple) -> tuple[int, ...]:
    """At least one sub-vector index, each a non-negative integer, none repeated."""
    try:
        indices = tuple(int(i.__index__()) for i in value if not isinstance(i, bool))
    except AttributeError:
        raise IgOptions.option("subvectors").refuse(value) from None
    if not indices or len(indices) != len(value) or min(indices) < 0:
        raise IgOptions.option("subvectors").refuse(value)
    if len(set(indices)) != len(indices):
        raise IgOptions.option("subvectors").refuse(value)
    return indices


@dataclass(frozen=True)
class IgOptions(Options):
    """How Integrated Gradients runs: the quadrature (``steps``, ``method``, and for auto
    steps ``tolerance`` and ``max_steps``), the baseline, the sub-vectors attributed, and
    ``batch_size``: the interpolated inputs per forward pass (default: as many as fit the
    memory budget of :mod:`~lexlens.analysis.attribution.memory`)."""

    what = "Integrated Gradients"

    steps: int | None = shared(STEPS_OPTION)
    method: str = option(
        "gausslegendre",
        "the quadrature rule of a fixed step count (auto steps use nested Clenshaw–Curtis levels)",
        choices=METHODS,
        label="Quadrature",
        widget="select",
    )
    tolerance: float = shared(TOLERANCE_OPTION)
    max_steps: int = shared(MAX_STEPS_OPTION)
    baseline: str = option(
        "unk",
        "the token that replaces every word but the stop words in the IG baseline: [UNK] or [PAD]",
        choices=BASELINES,
        label="Baseline",
    )
    subvectors: tuple[int, ...] | None = option(
        None,
        "the sub-vectors attributed (default: all M)",
        cli=False,
        check=_distinct_indices,
        wanted="distinct sub-vector indices ≥ 0, at least one",
    )
    batch_size: int | None = shared(BATCH_SIZE, default=None)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.steps is not None and self.method == "clenshaw-curtis" and self.steps % 2 == 0:
            raise OptionError(
                "steps", f"steps must be odd for the clenshaw-curtis method, not {self.steps}"
            )


@dataclass(frozen=True)
class AttributeOptions(IgOptions):
    """The options of ``attribute``: IG's, and ``m``, a number of sub-vectors whose M×K
    codebooks are fitted (k-means seeded by ``seed``) on the packaged corpus instead of
    the encoder's own."""

    what = "attribute"

    m: int | None = option(
        None,
        "the number of sub-vectors M: refit M×K codebooks on the "
        "packaged corpus (default: the encoder's own codebook)",
        low=2,
        label="Sub-vectors M",
        widget="number",
    )
    seed: int = shared(SEED)

    def ig_options(self) -> IgOptions:
        """The options of IG itself."""
        return IgOptions.of(**{name: getattr(self, name) for name in names(IgOptions)})


def _m_values(value: tuple) -> tuple[int, ...]:
    """At least one M, each an integer ≥ 2 (RandT needs another sub-vector), none repeated."""
    refuse = MotOptions.option("m_values").refuse
    if not value or any(isinstance(m, bool) or not hasattr(m, "__index__") for m in value):
        raise refuse(value)
    values = tuple(int(m.__index__()) for m in value)
    if min(values) < 2 or len(set(values)) != len(values):
        raise refuse(value)
    return values


def _power_of_two(k: int) -> int:
    """K is a power of two (faiss stores each code in log2 K bits: the models' rule)."""
    try:
        return check_k(k)
    except LexlensError:
        raise MotOptions.option("k").refuse(k) from None


@dataclass(frozen=True)
class MotOptions(Options):
    """The options of the masking evaluation (``mot_evaluate``): the M values and their K,
    the share of words kept, how the others are hidden, IG's quadrature, the sample and
    the seed (sampling, the Rand and RandT rankings, k-means). ``batch_size``: texts
    embedded at once to fit the codebooks, and IG's interpolated inputs per forward pass
    (default: the encoder's own batch, and the memory budget)."""

    what = "mot_evaluate"

    m_values: tuple[int, ...] = option(
        (12, 24, 48),
        "the numbers of sub-vectors M compared (a codebook fitted per M)",
        parse=integer_list,
        check=_m_values,
        metavar="M,M,…",
        label="M values",
        wanted="distinct integers, each at least 2 (RandT needs another sub-vector)",
    )
    keep: float = shared(KEEP_OPTION)
    steps: int | None = shared(STEPS_OPTION)
    tolerance: float = shared(TOLERANCE_OPTION)
    max_steps: int = shared(MAX_STEPS_OPTION)
    k: int = option(
        256,
        "centroids per sub-space K",
        low=2,
        high=MAX_K,
        check=_power_of_two,
        wanted=f"a power of two from 2 to {MAX_K:,}",
        label="K",
    )
    seed: int = shared(SEED)
    limit: int | None = option(
        None,
        "evaluate a seeded random sample of this many texts (IDF "
        "and the codebooks still use every text)",
        low=2,
        label="Texts evaluated",
        widget="number",
    )
    mask: str = option(
        "unk",
        "how a dropped word is hidden: [UNK], [MASK], or its pieces deleted",
        choices=MASKS,
        label="Mask",
    )
    own_codebook: bool = option(
        False,
        "evaluate the encoder's own codebook (its one M) instead of one fitted per M on the corpus",
        label="The encoder's own codebook",
    )
    batch_size: int | None = shared(BATCH_SIZE, default=None)

    def ig_options(self) -> IgOptions:
        """The options of the IG run on each document."""
        return IgOptions.of(
            steps=self.steps,
            tolerance=self.tolerance,
            max_steps=self.max_steps,
            batch_size=self.batch_size,
        )


@dataclass(frozen=True)
class ReportOptions(AttributeOptions):
    """The options of the report (``attribution_report``, ``build_report``): the
    attribution's, ``mot`` (the masking evaluation over the same texts and codebook) with
    its ``keep``, ``ig_curves`` (each text's deletion and insertion curves in report.html),
    and ``top``, the terms per text of a lexical encoder's report."""

    what = "the report"

    mot: bool = option(
        False,
        "add the MoT masking evaluation over the texts (two or more)",
        label="MoT masking (≥ 2 texts)",
    )
    keep: float = shared(KEEP_OPTION)
    top: int = shared(TermsOptions.option("top"), default=REPORT_TOP)
    ig_curves: bool = option(
        False,
        "add each text's IG deletion and insertion curves against "
        "RandT and GlobalT (measured by re-encoding) to report.html",
        label="IG curves in the report",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.mot and self.subvectors is not None:
            raise OptionError(
                "subvectors",
                "subvectors must be none with mot: the masking evaluation reads every sub-vector",
            )

    def attribute_options(self) -> AttributeOptions:
        """The options of the attribution."""
        return AttributeOptions.of(
            **{name: getattr(self, name) for name in names(AttributeOptions)}
        )

    def mot_options(self) -> MotOptions:
        """The options of the masking evaluation over the attributed texts."""
        return MotOptions.of(
            keep=self.keep,
            steps=self.steps,
            tolerance=self.tolerance,
            max_steps=self.max_steps,
            seed=self.seed,
            batch_size=self.batch_size,
        )
