"""Lexlens as PyTerrier stages: ``from lexlens.pyterrier import LexlensRetriever, LexlensExplain``
(``pip install "lexlens[pyterrier]"``; no Java needed). See :mod:`lexlens.app.pipelines`.

Python run from the checkout's root has that folder on ``sys.path``, where this file would
stand in for PyTerrier itself (``import pyterrier``, as pyterrier-pisa does): imported under
that name, it loads the real PyTerrier in its place.
"""

from __future__ import annotations

import sys

if __name__ == "pyterrier":  # found as PyTerrier from the checkout's root: load the real one
    import importlib.machinery
    import importlib.util
    import os

    _here = os.path.dirname(os.path.abspath(__file__))
    _path = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]
    _spec = importlib.machinery.PathFinder.find_spec("pyterrier", _path)
    if _spec is None or _spec.loader is None:
        raise ImportError('No module named pyterrier: pip install "lexlens[pyterrier]"')
    _real = importlib.util.module_from_spec(_spec)
    sys.modules["pyterrier"] = _real
    _spec.loader.exec_module(_real)
else:
    from lexlens.app.pipelines import LexlensExplain, LexlensRetriever, column_prefix

    __all__ = ["LexlensExplain", "LexlensRetriever", "column_prefix"]
