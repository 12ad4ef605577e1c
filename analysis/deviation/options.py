"""What semantic deviation needs of an encoder, and its options declared once
(:class:`DeviationOptions`: ``lexlens deviation``, the Semantic deviation page, the API)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lexlens.analysis.core.gating import DEFAULT_GATE_K, GATE_K
from lexlens.analysis.core.options import BATCH_SIZE, Options, option, shared, shared_option
from lexlens.analysis.deviation.static_embeddings import check_glove
from lexlens.models.base import Capability, Needs

DEVIATION_NEEDS = Needs("semantic deviation", all_of=frozenset({Capability.TEXT_LEXICAL}))
#: A stored collection of dense features (``modality`` "features", a D2S head): its head,
#: which also tokenises the paired captions (``tokenize_texts``).
FEATURES_DEVIATION_NEEDS = Needs(
    "semantic deviation of dense features", all_of=frozenset({Capability.FEATURE_LEXICAL})
)


def deviation_needs_for(modality: str) -> Needs:
    """The needs of deviation on a stored collection of this ``modality``."""
    return FEATURES_DEVIATION_NEEDS if modality == "features" else DEVIATION_NEEDS


#: Top terms per item for Exact@k and Semantic@k (D2S).
DEFAULT_K = 20
#: The largest k: every kept row lists its k top terms.
MAX_K = 1000
#: k of Exact@k and Semantic@k as an option: one declaration for every analysis that reads
#: them (deviation, the comparison of two collections).
DEVIATION_K = shared_option(
    "k",
    int,
    DEFAULT_K,
    low=1,
    high=MAX_K,
    label="k (top terms)",
    widget="number",
    help="k of Exact@k and Semantic@k: the top terms of each item",
)
DENOMINATORS = ("k", "active")
#: Per-item rows kept in a result (aggregates always cover every item).
DEFAULT_MAX_ROWS = 10_000
#: At most this many distinct caption words are kept as evidence for merging the cloud, read
#: from at most this many items (as a stored index's strongest terms read their first ones).
MAX_CLOUD_WORDS = 200_000
MAX_EVIDENCE_ITEMS = 100_000
#: Captions encoded at once, and a stored collection's rows read at once.
CAPTION_BATCH = 64
STORED_BATCH = 1024


@dataclass(frozen=True)
class DeviationOptions(Options):
    """How semantic deviation is measured, on a caption set or a stored collection.

    Every number reads the gated vector ``E = V ⊙ G``: an encoder whose ``V`` is positive
    everywhere (VDR's elu1p) would otherwise have every dimension active (FLOPs ≈ |V|);
    for ReLU-sparse encoders (SPLADE, D2S) with fewer than 768 positive terms the gate
    changes nothing. A stored collection keeps the gate it was built with.
    """

    what = "deviation"

    k: int = shared(DEVIATION_K)
    gate_k: int | None = shared(
        GATE_K,
        None,
        help=GATE_K.spec.help + f"; left out: {DEFAULT_GATE_K} (VDR's text default) for "
        "captions, a stored collection's own gate",
    )
    denominator: str = option(
        "k",
        "k (the paper's) or active = min(k, the item's positive terms)",
        choices=DENOMINATORS,
        label="Denominator",
        widget="radio",
    )
    glove: str | Path | None = option(
        None,
        "GloVe-format static embeddings for Semantic@k (left out: the encoder's own "
        "input word embeddings)",
        check=check_glove,
        label="GloVe file",
        metavar="FILE",
        wanted="a GloVe-format text file (a word, then numbers, per line)",
    )
    max_rows: int = option(
        DEFAULT_MAX_ROWS,
        "per-item rows kept in the result (the means cover every item)",
        low=0,
        label="Rows kept",
        widget="number",
    )
    batch_size: int | None = shared(
        BATCH_SIZE,
        None,
        help=f"captions encoded at once (left out: {CAPTION_BATCH}), or a stored "
        f"collection's items read at once (left out: {STORED_BATCH})",
    )

    def caption_gate(self) -> int:
        """The gate k of captions encoded here (:data:`DEFAULT_GATE_K` when left out)."""
        return DEFAULT_GATE_K if self.gate_k is None else self.gate_k
