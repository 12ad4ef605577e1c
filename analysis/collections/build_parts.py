"""What every way of building an index shares: the manifest's encoder entry (with the
weight fingerprint that decides whether stored vectors may be reused), and the result a
build returns. Its settings are declared once in :mod:`.options`.

The builds themselves: a source of texts or images (:mod:`.source_index`, in this process
or on Ray), a file of dense features through a D2S head (:mod:`.features_index`); the
entry points that choose between them: :mod:`.indexing`.
"""

from __future__ import annotations

import hashlib
import weakref
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from lexlens.analysis.collections.manifest import Manifest
from lexlens.analysis.collections.store import StoredIndex, vocab_hash
from lexlens.analysis.core.results import Result, internal
from lexlens.analysis.datasets.items import Skipped
from lexlens.models.base import Encoder

#: Skipped items a build's result lists (the first ones; ``skipped_count`` counts them all),
#: so a source of a million empty rows gives a small document, not one entry per row.
MAX_SKIPPED_LISTED = 100


def listed_skipped(manifest: Manifest) -> list[Skipped]:
    """The skipped items a build's result lists: the first :data:`MAX_SKIPPED_LISTED` of
    those its manifest names."""
    return list(manifest.skipped[:MAX_SKIPPED_LISTED])


@dataclass(frozen=True)
class IndexResult(Result):
    """What a build did: counts, skipped items (:func:`listed_skipped`; the JSON document
    counts them all in ``manifest.counts.skipped``), where the index is, its manifest."""

    file_stem: ClassVar[str] = "index"

    out: str
    encoder: str
    items: int
    encoded: int
    reused: int
    skipped: list[Skipped]
    up_to_date: bool
    #: Wall time of the build (shown by the CLI; not part of the JSON document).
    seconds: float = internal()
    manifest: dict
    notes: list[str]

    @property
    def skipped_count(self) -> int:
        """Every skipped item, listed or not: the manifest's ``counts.skipped``."""
        return int(self.manifest.get("counts", {}).get("skipped", len(self.skipped)))

    @property
    def nnz(self) -> int:
        """Non-zero weights the index holds: the manifest's ``counts.nnz``."""
        return Manifest.read(self.manifest).counts.nnz

    @property
    def kept_benchmark(self) -> dict | None:
        """The counts of the benchmark the index was built from (``queries``,
        ``judged_queries``, ``judgements``, …) as its manifest records them, else ``None``."""
        benchmark = Manifest.read(self.manifest).kept_benchmark
        return None if benchmark is None else benchmark.to_dict()


def unchanged(out: str, encoder: Encoder, old: StoredIndex, seconds: float) -> IndexResult:
    """The result of a build that found its index up to date: nothing encoded, every stored
    item reused."""
    return IndexResult(
        out=out,
        encoder=encoder.name,
        items=len(old),
        encoded=0,
        reused=len(old),
        skipped=listed_skipped(old.manifest),
        up_to_date=True,
        seconds=seconds,
        manifest=old.manifest.to_dict(),
        notes=["source and encoder unchanged: nothing to encode"],
    )


#: Each live encoder's fingerprint (forgotten with the encoder).
_FINGERPRINTS: weakref.WeakKeyDictionary[Encoder, str] = weakref.WeakKeyDictionary()


def encoder_fingerprint(encoder: Encoder) -> str:
    """A hash of the encoder's weights: every tensor, module and array it holds.

    Two loads of the same checkpoint give the same fingerprint; any changed weight (or a
    changed class→vocabulary map) gives another, so stored vectors are only reused when
    they would be computed again identically.
    """
    cached = _FINGERPRINTS.get(encoder)
    if cached is not None:
        return cached
    import torch  # heavy: torch loads on first use

    digest = hashlib.blake2b(digest_size=16)
    digest.update(f"{type(encoder).__module__}.{type(encoder).__qualname__}".encode())
    digest.update(vocab_hash(list(getattr(encoder, "vocab", []) or [])).encode())
    digest.update(repr(bool(encoder.bow_normalize)).encode())

    def feed(name: str, value: Any, depth: int = 0) -> None:
        if isinstance(value, torch.nn.Module):
            for key, tensor in sorted(value.state_dict().items()):
                feed(f"{name}.{key}", tensor, depth)
        elif isinstance(value, torch.Tensor):
            array = value.detach().cpu().contiguous()
            digest.update(f"{name}:{array.dtype}:{tuple(array.shape)}".encode())
            digest.update(array.reshape(-1).view(torch.uint8).numpy().tobytes())
        elif isinstance(value, np.ndarray):
            digest.update(f"{name}:{value.dtype}:{value.shape}".encode())
            digest.update(np.ascontiguousarray(value).tobytes())
        elif depth == 0 and hasattr(value, "__dict__") and not isinstance(value, type):
            for key, inner in sorted(vars(value).items()):
                feed(f"{name}.{key}", inner, depth + 1)

    for key, value in sorted(vars(encoder).items()):
        feed(key, value)
    fingerprint = digest.hexdigest()
    _FINGERPRINTS[encoder] = fingerprint
    return fingerprint


def encoder_entry(encoder: Encoder, spec: str | None = None) -> dict:
    """The manifest's ``encoder`` entry: what reopening, searching and reusing rely on."""
    return {
        "name": encoder.name,
        "spec": spec or encoder.name,
        "fingerprint": encoder_fingerprint(encoder),
        "class": type(encoder).__name__,
        "capabilities": sorted(str(c) for c in encoder.capabilities),
        "bow_normalize": bool(encoder.bow_normalize),
    }
