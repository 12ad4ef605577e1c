"""A GloVe file for Semantic@k is a regular file: a FIFO (which would wait for a writer
forever) or a device is refused in one line before it is opened, by the option's check and
by the reader alike."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from lexlens.analysis.deviation.options import DeviationOptions
from lexlens.analysis.deviation.static_embeddings import StaticEmbeddings
from lexlens.models.base import InputError
from tests.helpers import one_line_error

CAPTIONS = "data/captions.txt"


@contextmanager
def returns_within(seconds: int, what: str) -> Iterator[None]:
    """Fail (instead of hanging the suite) when the body has not returned in ``seconds``."""

    def hung(signum, frame):
        raise AssertionError(f"{what} did not return in {seconds} s")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize(
    ("what", "read"),
    [
        ("DeviationOptions.of", lambda path: DeviationOptions.of(glove=path)),
        ("StaticEmbeddings.from_glove", lambda path: StaticEmbeddings.from_glove(path)),
    ],
)
def test_unbounded_a_glove_fifo_or_device_is_refused_before_it_is_opened(
    what: str, read: Callable, tmp_path
):
    fifo = tmp_path / "glove.txt"
    os.mkfifo(fifo)
    for path in (fifo, "/dev/zero"):
        with (
            returns_within(10, f"{what}({path})"),
            pytest.raises(InputError, match="not a regular file"),
        ):
            read(path)


def test_unbounded_deviation_with_a_glove_fifo_is_one_line(tmp_path, cli):
    fifo = tmp_path / "glove.txt"
    os.mkfifo(fifo)
    with returns_within(60, "lexlens deviation --glove FIFO"):
        run = cli("deviation", "--encoder", "splade-tiny", "--captions", CAPTIONS, "--glove", fifo)
    one_line_error(run, f"{fifo}: not a regular file")
