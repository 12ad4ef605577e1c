"""The inputs the attribution use cases alone take (a source label, attributions, a
sub-vector or code index, the sub-vectors an M selects), refused in one line naming the
argument; the encoder, the texts and the progress callback are checked as every use case
checks them (:mod:`lexlens.analysis.core.arguments`), the options by the declarations of
:mod:`~lexlens.analysis.attribution.options`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lexlens.analysis.core.arguments import shown, text_argument
from lexlens.analysis.core.options import OptionError
from lexlens.models.base import InputError, LexlensError
from lexlens.models.pq import check_m


def source_argument(source: Any) -> str:
    """The name of where the texts came from (shown in the report): text."""
    return text_argument(source, "source", about="where the texts came from")


def sequence_of(items: Any, kind: type, argument: str, wanted: str) -> list | None:
    """``None``, or a list or tuple whose items are all ``kind`` (as a list)."""
    if items is None:
        return None
    if not isinstance(items, Sequence) or isinstance(items, (str, bytes)):
        raise InputError(f"{argument} must be {wanted}, not {shown(items)}")
    bad = [x for x in items if not isinstance(x, kind)]
    if bad:
        raise InputError(f"{argument} must be {wanted}, not a list holding {shown(bad[0])}")
    return list(items)


def index_below(value: Any, count: int, argument: str, what: str) -> int:
    """``value`` as an index from 0 to ``count − 1`` (``what``: where the count comes from)."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise InputError(f"{argument} must be an integer, not {shown(value)}")
    index = int(value.__index__())
    if not 0 <= index < count:
        raise InputError(f"{argument} {index} is out of range 0..{count - 1}: {what}")
    return index


def selected_subvectors(subvectors: Sequence[int] | None, m: int) -> list[int]:
    """The sub-vectors an option selects (all M when ``None``), each below the codebook's M."""
    if subvectors is None:
        return list(range(m))
    beyond = [i for i in subvectors if i >= m]
    if beyond:
        raise OptionError(
            "subvectors",
            f"subvectors holds {beyond[0]}, out of range 0..{m - 1}: the codebook has M={m}",
        )
    return list(subvectors)


def splitting(m: int, dim: int, name: str, said: str) -> int:
    """``m`` when it splits the embedding dimension ``dim`` into equal sub-vectors, else
    the models' refusal after ``said`` (how the option and its value read: ``m=7``)."""

    try:
        check_m(m, dim)
    except LexlensError as exc:
        raise OptionError(name, f"{said}: {exc}") from None
    return m
