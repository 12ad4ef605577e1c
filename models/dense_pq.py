"""Deprecated location: the dense+PQ encoder now lives in ``lexlens.models.dense``.

Kept only while an importer remains (the lead removes it); import from
``lexlens.models.dense`` (encoder), ``lexlens.models.pq`` (quantiser),
``lexlens.models.faiss_index`` (faiss reader), ``lexlens.models.packaged`` (default corpus).
"""

from lexlens.models.dense import (  # noqa: F401
    DEFAULT_K,
    DEFAULT_M,
    DEFAULT_SEED,
    DensePQEncoder,
    ProductQuantizer,
    check_m,
    default_corpus,
    divisors,
    load_faiss_index,
)
