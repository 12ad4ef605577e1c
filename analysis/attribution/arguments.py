"""The inputs of the attribution use cases (the encoder, the texts, a source label, a
progress callback), refused in one line naming the argument; their options are checked by
the declarations of :mod:`~lexlens.analysis.attribution.options`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lexlens.analysis.core.options import OptionError
from lexlens.analysis.core.results import Progress
from lexlens.models.base import Encoder, InputError, LexlensError, Needs, check_texts


def encoder_argument(encoder: Any, needs: Needs | None = None) -> Encoder:
    """The encoder given (or loaded from its registry name or folder), checked against
    ``needs``; anything else is refused naming ``encoder``."""
    from lexlens.models.registry import as_encoder

    return as_encoder(encoder, needs=needs, argument="encoder")


def text_list(texts: Any, argument: str = "texts") -> list[str]:
    """A text or a list of texts, as a list; each a non-empty string."""
    if isinstance(texts, str):
        texts = [texts]
    if not isinstance(texts, (list, tuple)):
        raise InputError(f"{argument} must be a text or a list of texts, not {_kind(texts)}")
    if not texts:
        raise InputError(f"{argument} holds no text: give at least one")
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise InputError(f"{argument}[{i}] must be a text, not {_kind(text)}")
    return check_texts(list(texts))


def source_argument(source: Any) -> str:
    """The name of where the texts came from (shown in the report): text."""
    if not isinstance(source, str):
        raise InputError(f"source must be text (where the texts came from), not {_kind(source)}")
    return source


def progress_argument(progress: Any) -> Progress | None:
    """``None`` or a function of (fraction, message)."""
    if progress is not None and not callable(progress):
        raise InputError(
            f"progress must be a function of (fraction, message), not {_kind(progress)}"
        )
    return progress


def sequence_of(items: Any, kind: type, argument: str, wanted: str) -> list | None:
    """``None``, or a list or tuple whose items are all ``kind`` (as a list)."""
    if items is None:
        return None
    if not isinstance(items, Sequence) or isinstance(items, (str, bytes)):
        raise InputError(f"{argument} must be {wanted}, not {_kind(items)}")
    bad = [x for x in items if not isinstance(x, kind)]
    if bad:
        raise InputError(f"{argument} must be {wanted}, not a list holding {_kind(bad[0])}")
    return list(items)


def index_below(value: Any, count: int, argument: str, what: str) -> int:
    """``value`` as an index from 0 to ``count − 1`` (``what``: where the count comes from)."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise InputError(f"{argument} must be an integer, not {_kind(value)}")
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
    from lexlens.models.pq import check_m

    try:
        check_m(m, dim)
    except LexlensError as exc:
        raise OptionError(name, f"{said}: {exc}") from None
    return m


def _kind(value: Any) -> str:
    return type(value).__name__
