"""Which devices a piece of work ran on: the device of every encoder an analysis loads or is
given (each goes through :mod:`.arguments`), noted while :func:`devices_used` is open.

A job of the app opens it around its analysis and keeps the list with its run, so the device
``auto`` chose is the one the encoder was loaded on, never a second guess. The note is kept
per thread (a context variable): a job's worker notes only its own encoders.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from lexlens.models.base import Encoder

_USED: ContextVar[list[str] | None] = ContextVar("lexlens_devices_used", default=None)


@contextmanager
def devices_used() -> Iterator[list[str]]:
    """A list that fills, while the block runs, with the devices of the encoders the work
    loads or is given (each once, in the order first used)."""
    used: list[str] = []
    token = _USED.set(used)
    try:
        yield used
    finally:
        _USED.reset(token)


def note_device(encoder: Encoder) -> Encoder:
    """Note ``encoder``'s device for the :func:`devices_used` block open in this thread, if
    any; returns the encoder."""
    used = _USED.get()
    device = str(getattr(encoder, "device", "") or "")
    if used is not None and device and device not in used:
        used.append(device)
    return encoder
