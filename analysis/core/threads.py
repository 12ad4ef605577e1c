"""How many threads the model-heavy analyses run with on a small machine.

Integrated Gradients (a backward pass: a long chain of mid-sized operations) and the
counterfactual search (many small encodings, each followed by numpy and scipy work) run
badly with two threads on a two-core machine where anything else runs: each OpenMP or BLAS
thread waits, spinning, for the other's time slice. Measured here: the same 33-node,
M = 24 IG pass took 29.5 s with two threads against 5.4 s with one (``bench/attribution.py``);
a text-level counterfactual over 100,000 items 40–52 ms wall (80–95 ms CPU) with two threads
against 29–31 ms with one. So on machines with at most two CPUs these analyses run with one
torch intra-op thread and one thread in the OpenMP and BLAS pools numpy and scipy use
(threadpoolctl), restored afterwards; ``LEXLENS_THREADS=N`` overrides the choice. The BLAS
limit is a request: in a long-lived process an OpenBLAS was seen to keep its count (after
the app's tests had run in it); torch's own count always holds.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from typing import Any

import torch

from lexlens.models.base import InputError

VARIABLE = "LEXLENS_THREADS"


def analysis_threads() -> int | None:
    """Threads for a model-heavy analysis: ``LEXLENS_THREADS``, else 1 on machines with at
    most 2 CPUs (``None``: leave the libraries' own choice)."""
    value = os.environ.get(VARIABLE, "").strip()
    if value:
        try:
            return max(1, int(value))
        except ValueError:
            raise InputError(f"{VARIABLE} must be a whole number, got {value!r}") from None
    return 1 if (os.cpu_count() or 1) <= 2 else None


_LOCK = threading.Lock()
_STATE: dict[str, Any] = {
    "users": 0,
    "torch": None,
    "pools": None,
    "controller": None,
    "modules": None,
}


def _pools() -> Any:
    """threadpoolctl's view of the loaded OpenMP and BLAS libraries, read again after any
    new import (a module may have loaded another library: scipy's, faiss's)."""
    if _STATE["modules"] != len(sys.modules):
        from threadpoolctl import ThreadpoolController  # lexlens --help stays fast

        _STATE["controller"] = ThreadpoolController()
        _STATE["modules"] = len(sys.modules)
    return _STATE["controller"]


@contextlib.contextmanager
def thread_count() -> Iterator[None]:
    """Run the block with :func:`analysis_threads` threads; the first caller in sets them and
    the last one out restores them (analyses may overlap in an app serving sessions)."""
    want = analysis_threads()
    if want is None:
        yield
        return
    with _LOCK:
        if _STATE["users"] == 0:
            _STATE["torch"] = torch.get_num_threads()
            torch.set_num_threads(want)
            _STATE["pools"] = _pools().limit(limits=want)
        _STATE["users"] += 1
    try:
        yield
    finally:
        with _LOCK:
            _STATE["users"] -= 1
            if _STATE["users"] == 0:
                _STATE["pools"].restore_original_limits()
                torch.set_num_threads(int(_STATE["torch"]))
