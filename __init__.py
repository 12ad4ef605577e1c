"""Lexlens: an interpretability workbench for retrieval encoders.

The notebook API (every function returns a typed result with ``to_dict()``)::

    import lexlens
    enc = lexlens.load_encoder("splade-tiny")
    lexlens.terms(enc, text="a cat sleeping on a book").top(5)

Heavy libraries (torch, transformers) load on first use, not on ``import lexlens``.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

#: Public name → the module that defines it (imported on first access).
_EXPORTS = {
    "load_encoder": "lexlens.models.registry",
    "available_encoders": "lexlens.models.registry",
    "LexlensError": "lexlens.models.base",
    "InputError": "lexlens.models.base",
    "Capability": "lexlens.models.base",
    "load_image": "lexlens.models.images",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'lexlens' has no attribute {name!r}")
