"""How many intra-op threads Integrated Gradients runs with.

A backward pass is a long chain of mid-sized operations; with two OpenMP threads on a
two-core machine where anything else runs, each of them waits for the other thread's time
slice (measured here: the same 33-node, M = 24 pass took 29.5 s with two threads against
5.4 s with one, see ``bench/attribution.py``). So on machines with at most two CPUs IG runs
with one intra-op thread (restored afterwards); ``LEXLENS_IG_THREADS=N`` overrides the
choice.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

import torch

from lexlens.models.base import InputError


def ig_threads() -> int | None:
    """Intra-op threads for IG: ``LEXLENS_IG_THREADS``, else 1 on machines with ≤ 2 CPUs."""
    value = os.environ.get("LEXLENS_IG_THREADS", "").strip()
    if value:
        try:
            return max(1, int(value))
        except ValueError:
            raise InputError(f"LEXLENS_IG_THREADS must be a whole number, got {value!r}") from None
    return 1 if (os.cpu_count() or 1) <= 2 else None


_THREADS_LOCK = threading.Lock()
_THREADS_STATE = {"users": 0, "saved": None}


@contextlib.contextmanager
def ig_thread_count() -> Iterator[None]:
    """Run the block with :func:`ig_threads` intra-op threads; the first caller in sets it
    and the last one out restores it (IG runs may overlap in an app serving sessions)."""
    want = ig_threads()
    if want is None:
        yield
        return
    with _THREADS_LOCK:
        if _THREADS_STATE["users"] == 0:
            _THREADS_STATE["saved"] = torch.get_num_threads()
            torch.set_num_threads(want)
        _THREADS_STATE["users"] += 1
    try:
        yield
    finally:
        with _THREADS_LOCK:
            _THREADS_STATE["users"] -= 1
            if _THREADS_STATE["users"] == 0:
                torch.set_num_threads(int(_THREADS_STATE["saved"]))
