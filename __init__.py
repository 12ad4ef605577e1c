"""Lexlens: an interpretability workbench for retrieval encoders.

The notebook API (every analysis returns a typed result with ``to_dict()``, the same
document ``lexlens COMMAND --json`` prints)::

    import lexlens
    enc = lexlens.load_encoder("splade-tiny")
    lexlens.terms(enc, text="a cat sleeping on a book").top(5)
    img = lexlens.load_encoder("efficientnet-lite0-lexical")
    lexlens.terms(img, image="photo.jpg", box=(0, 0, 0.5, 1)).top(5)
    lexlens.contrib(enc, query="cat on a book", doc="a kitten asleep on a novel").score
    lexlens.attribute(lexlens.load_encoder("minilm-pq"), "espresso is a strong coffee")

Heavy libraries (torch, transformers) load on first use, not on ``import lexlens``.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from typing import Any

__version__ = "0.1.0"

#: Public name → the module that defines it (imported on first access).
_EXPORTS = {
    # encoders
    "load_encoder": "lexlens.models.registry",
    "available_encoders": "lexlens.models.registry",
    "load_image": "lexlens.models.images",
    "Capability": "lexlens.models.base",
    "LexlensError": "lexlens.models.base",
    "InputError": "lexlens.models.base",
    # one use case per analysis: plain inputs in, one typed result (``to_dict()``) out
    "terms": "lexlens.analysis.lexical.terms",
    "contrib": "lexlens.analysis.lexical.contrib",
    "build_index": "lexlens.analysis.collections.indexing",
    "open_index": "lexlens.analysis.collections.store",
    "search_index": "lexlens.analysis.search.search",
    "search_file": "lexlens.analysis.search.search",
    "evaluate_index": "lexlens.analysis.search.table_evaluation",
    "deviation": "lexlens.analysis.deviation.deviation",
    "deviation_of_index": "lexlens.analysis.deviation.deviation",
    "attribute": "lexlens.analysis.attribution.attribution",
    "mot_evaluate": "lexlens.analysis.attribution.mot",
    "compare": "lexlens.analysis.compare.compare",
    "compare_indexes": "lexlens.analysis.compare.compare_collections",
    # a researcher's benchmark: read it, evaluate and explain it, export it
    "open_benchmark": "lexlens.analysis.datasets.readers",
    "evaluate_benchmark": "lexlens.analysis.evaluation.evaluate",
    "export_index": "lexlens.analysis.export.export",
    # is an explanation true? measured by re-encoding the edited input, against random
    "failures_faithfulness": "lexlens.analysis.faithfulness.benchmark",
    "with_faithfulness": "lexlens.analysis.faithfulness.benchmark",
    "contrib_faithfulness": "lexlens.analysis.faithfulness.contrib",
    "provenance_faithfulness": "lexlens.analysis.faithfulness.provenance",
    "occlusion_faithfulness": "lexlens.analysis.faithfulness.occlusion",
    "ig_faithfulness": "lexlens.analysis.attribution.ig_curves",
    "report_ig_curves": "lexlens.analysis.attribution.report",
    # what it would take: the smallest verified edit that ranks an item first
    "counterfactual": "lexlens.analysis.counterfactual.counterfactual",
    # is B better than A, on which queries, and why: several systems on one benchmark
    "evaluate_systems": "lexlens.analysis.systems.comparison",
    "compare_systems": "lexlens.analysis.systems.comparison",
    "why_of": "lexlens.analysis.systems.comparison",
    "systems_of": "lexlens.analysis.systems.systems",
    "SystemsSpec": "lexlens.analysis.systems.systems",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        if inspect.isfunction(value):
            value = _arguments_checked(value)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'lexlens' has no attribute {name!r}")


def _arguments_checked(func: Any) -> Any:
    """``func`` as the API offers it: arguments that do not fit its signature (an unknown
    keyword, a missing or extra argument) are a ``LexlensError`` naming them, like every
    other wrong argument, not a ``TypeError``; the function itself checks types and values."""
    signature = inspect.signature(func)

    @functools.wraps(func)
    def checked(*args: Any, **kwargs: Any) -> Any:
        try:
            signature.bind(*args, **kwargs)
        except TypeError as exc:
            from lexlens.models.base import InputError  # import lexlens stays light

            raise InputError(f"{func.__name__}(): {exc}") from None
        return func(*args, **kwargs)

    return checked
