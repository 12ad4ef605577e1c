"""The thread count of model-heavy analyses: one torch thread and one OpenMP/BLAS thread on
a small machine (or ``LEXLENS_THREADS``), restored when the last overlapping analysis ends."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_info

from lexlens.analysis.core.threads import analysis_threads, thread_count
from lexlens.models.base import InputError


def _blas_threads() -> set[int]:
    return {p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"}


def test_silent_wrong_thread_count_set_inside_and_restored_after_the_last_user(monkeypatch):
    """torch's count here (the BLAS pools' in a fresh process, below: in a long-lived one
    an OpenBLAS may keep its count, seen after the app tests)."""
    np.ones((4, 4)) @ np.ones((4, 4))  # the BLAS library loaded
    torch_before, blas_before = torch.get_num_threads(), _blas_threads()
    monkeypatch.setenv("LEXLENS_THREADS", "1")
    with thread_count():
        assert torch.get_num_threads() == 1
        with thread_count():  # an overlapping analysis (another session)
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 1  # still held
    assert torch.get_num_threads() == torch_before and _blas_threads() == blas_before


def test_silent_wrong_a_blas_library_loaded_later_is_held_too():
    """In a fresh process: numpy's OpenBLAS and torch's OpenMP held to one thread, and the
    libraries faiss and scipy.linalg load after a first analysis (their own OpenBLAS and
    OpenMP) by the next one."""
    code = """
import os
os.environ["LEXLENS_THREADS"] = "1"
import numpy as np
from threadpoolctl import threadpool_info
from lexlens.analysis.core.threads import thread_count
np.ones((4, 4)) @ np.ones((4, 4))
with thread_count():
    assert {p["num_threads"] for p in threadpool_info()} == {1}, threadpool_info()
import faiss, scipy.linalg
with thread_count():
    held = {(p["internal_api"], p["filepath"], p["num_threads"]) for p in threadpool_info()}
assert len({path for _, path, _ in held}) >= 3, held
assert {n for _, _, n in held} == {1}, held
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


def test_silent_wrong_thread_count_restored_when_the_block_fails(monkeypatch):
    before = torch.get_num_threads()
    monkeypatch.setenv("LEXLENS_THREADS", "1")
    with pytest.raises(RuntimeError), thread_count():
        raise RuntimeError("the analysis failed")
    assert torch.get_num_threads() == before


def test_bad_input_thread_variable_is_refused_in_one_line(monkeypatch):
    monkeypatch.setenv("LEXLENS_THREADS", "many")
    with pytest.raises(InputError, match="LEXLENS_THREADS must be a whole number"):
        analysis_threads()
    monkeypatch.setenv("LEXLENS_THREADS", "3")
    assert analysis_threads() == 3
    monkeypatch.delenv("LEXLENS_THREADS")
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert analysis_threads() == 1
    monkeypatch.setattr("os.cpu_count", lambda: 16)
    assert analysis_threads() is None  # a larger machine: the libraries' own choice
