"""The settings of an export, declared once (:mod:`lexlens.analysis.core.options`):
``lexlens export`` derives its flags from :class:`ExportOptions`; ``export_index`` checks its
keywords through it."""

from __future__ import annotations

from dataclasses import dataclass

from lexlens.analysis.core.gating import GATE_K
from lexlens.analysis.core.options import QUERY_MODE, OptionError, Options, option, shared
from lexlens.analysis.retrieval.options import TOP

#: The formats an export writes (see :mod:`lexlens.analysis.export.export`).
FORMATS = ("trec-run", "anserini", "seismic", "hard-negatives", "expansions")
#: The formats read from a stored evaluation (``--evaluation``), nothing ranked again.
TRAINING_FORMATS = ("hard-negatives", "expansions")
#: Anserini's integer impacts: weight × scale, rounded (SPLADE's and Anserini's usual 100).
DEFAULT_SCALE = 100.0
MIN_SCALE = 1.0
MAX_SCALE = 1e6


@dataclass(frozen=True)
class ExportOptions(Options):
    """How a collection is exported (``lexlens export``, ``export_index``): the format, the
    Anserini scale, the items of a TREC run per query and how the queries are encoded."""

    what = "export"

    format: str = option(
        None,
        "what is written (required) — trec-run: the collection searched with every "
        "query; anserini: JsonVectorCollection (integer impacts) and its queries; seismic: "
        "Seismic's JSONL; hard-negatives: a stored evaluation's failing queries with the "
        "items ranked above their relevant one (query, positive, negatives JSONL); "
        "expansions: the query words each relevant item of a failure lacks",
        choices=FORMATS,
        metavar="FORMAT",
        label="Format",
        wanted="one of " + ", ".join(FORMATS),
    )
    scale: float = option(
        DEFAULT_SCALE,
        "anserini: each weight × scale, rounded to an integer impact",
        low=MIN_SCALE,
        high=MAX_SCALE,
        label="Scale",
        wanted="a finite number from 1 to 1,000,000",
    )
    negatives: int = option(
        10,
        "hard-negatives: items kept per failing query, hardest first",
        low=1,
        high=1000,
        label="Negatives",
    )
    top: int = shared(TOP, help="trec-run: items ranked per query")
    query_mode: str = shared(QUERY_MODE)
    gate_k: int = shared(GATE_K)

    def __post_init__(self) -> None:
        if self.format is None:  # the one option without a default
            raise OptionError("format", f"format must be given: one of {', '.join(FORMATS)}")
        super().__post_init__()
