"""What semantic deviation needs of an encoder, its defaults and the check of its options."""

from __future__ import annotations

from lexlens.analysis.core.gating import DEFAULT_GATE_K
from lexlens.analysis.core.inputs import check_batch_size
from lexlens.models.base import Capability, InputError, Needs

DEVIATION_NEEDS = Needs("semantic deviation", all_of=frozenset({Capability.TEXT_LEXICAL}))
#: A stored collection of dense features (``modality`` "features", a D2S head): its head,
#: which also tokenises the paired captions (``tokenize_texts``).
FEATURES_DEVIATION_NEEDS = Needs(
    "semantic deviation of dense features", all_of=frozenset({Capability.FEATURE_LEXICAL})
)


def deviation_needs_for(modality: str) -> Needs:
    """The needs of deviation on a stored collection of this ``modality``."""
    return FEATURES_DEVIATION_NEEDS if modality == "features" else DEVIATION_NEEDS


# Every number reads the gated vector at VDR's default gate (``DEFAULT_GATE_K``, 768): an
# encoder whose ``V`` is positive everywhere (VDR's elu1p) would otherwise have every
# dimension active (FLOPs ≈ |V|²/|V|); for ReLU-sparse encoders (SPLADE, D2S) with fewer
# than 768 positive terms the gate changes nothing. ``-1`` = ungated.

#: Top terms per item for Exact@k and Semantic@k.
DEFAULT_K = 20
DENOMINATORS = ("k", "active")
#: Per-item rows kept in a result (aggregates always cover every item).
DEFAULT_MAX_ROWS = 10_000
#: At most this many distinct caption words are kept as evidence for merging the cloud.
MAX_CLOUD_WORDS = 200_000
BATCH_SIZE = 64


def check_options(
    *,
    k: int = DEFAULT_K,
    gate_k: int = DEFAULT_GATE_K,
    denominator: str = "k",
    batch_size: int = BATCH_SIZE,
    max_rows: int = DEFAULT_MAX_ROWS,
) -> None:
    """Refuse bad options before anything is loaded or encoded."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InputError(f"k must be a positive integer, not {k!r}")
    if isinstance(gate_k, bool) or not isinstance(gate_k, int) or gate_k < -1:
        raise InputError(f"the gate k must be -1 (ungated), 0 (own tokens only) or more: {gate_k}")
    if denominator not in DENOMINATORS:
        raise InputError(f"denominator must be one of {', '.join(DENOMINATORS)}: {denominator!r}")
    check_batch_size(batch_size)
    if not isinstance(max_rows, int) or max_rows < 0:
        raise InputError(f"the number of rows shown must be 0 or more, not {max_rows!r}")
