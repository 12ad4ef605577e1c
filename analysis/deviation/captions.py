"""Caption sets for semantic deviation: read from a file, its bytes or a list, and encoded into gated rows."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from lexlens.analysis.core.gating import DEFAULT_GATE_K
from lexlens.analysis.core.inputs import TextTable, read_texts
from lexlens.analysis.core.results import Progress
from lexlens.analysis.deviation.options import CAPTION_BATCH, DEVIATION_NEEDS
from lexlens.analysis.deviation.scoring import caption_terms
from lexlens.analysis.retrieval.queries import QuerySpec
from lexlens.models.base import Encoder, InputError

CaptionSource = str | Path | bytes | bytearray | list[str] | TextTable


def read_captions(
    source: CaptionSource, name: str | None = None, *, suffix: str | None = None
) -> TextTable:
    """Captions from a file (.txt one per line, .csv/.jsonl with a ``text`` column), its
    bytes (an upload: pass its ``name``), or a list of texts (empty ones skipped)."""
    if isinstance(source, TextTable):
        return source
    if isinstance(source, (list, tuple)):
        bad = next((i for i, t in enumerate(source) if not isinstance(t, str)), None)
        if bad is not None:
            raise InputError(f"captions: item {bad} is {type(source[bad]).__name__}, not text")
        texts = [t.strip() for t in source]
        kept = [t for t in texts if t]
        if not kept:
            raise InputError("no captions given (every text is empty)")
        return TextTable([str(i) for i in range(len(kept))], kept, [], len(texts) - len(kept))
    if not isinstance(source, (str, Path, bytes, bytearray)):
        raise InputError(
            "captions must be a file path, a file's bytes or a list of texts, not "
            f"{type(source).__name__}"
        )
    return read_texts(source, name, suffix=suffix, what="caption")


def input_name(source: CaptionSource, name: str | None) -> str:
    """The name a result records for its input: the file's base name (same from CLI and app)."""
    if name:
        return Path(name).name
    if isinstance(source, (str, Path)):
        return Path(source).name
    return "captions" if isinstance(source, (list, TextTable)) else "uploaded file"


@dataclass(frozen=True)
class EncodedCaptions:
    """A caption set's gated vectors (CSR, O(non-zeros)) and caption tokens."""

    ids: list[str]
    texts: list[str]
    vectors: sp.csr_matrix  # [n, |V|] E = V ⊙ G
    tokens: list[list[str]]
    gate_k: int
    truncated: int = 0

    def batches(self, size: int = 256) -> Iterator[tuple[list[str], list[str], sp.csr_matrix]]:
        for lo in range(0, len(self.ids), size):
            hi = lo + size
            yield self.ids[lo:hi], self.texts[lo:hi], self.vectors[lo:hi]


def encode_captions(
    encoder: Encoder,
    table: TextTable,
    *,
    gate_k: int = DEFAULT_GATE_K,
    batch_size: int = CAPTION_BATCH,
    progress: Progress | None = None,
) -> EncodedCaptions:
    """Encode captions in batches (query tower), keeping only gated CSR rows and tokens."""
    DEVIATION_NEEDS.check(encoder)
    spec = QuerySpec(encoder, "parametric", gate_k)  # a caption reads as a text query
    parts, tokens, truncated = [], [], 0
    total = len(table.texts)
    for lo in range(0, total, batch_size):
        encoded = spec.encode(table.texts[lo : lo + batch_size])
        parts.append(sp.csr_matrix(np.stack([vector for vector, _ in encoded])))
        tokens += [caption_terms(e.units) for _, e in encoded]
        truncated += sum(e.truncated for _, e in encoded)
        if progress:
            done = min(total, lo + batch_size)
            progress(done / total, f"Encoded {done} of {total} captions")
    vectors = sp.vstack(parts, format="csr") if parts else sp.csr_matrix((0, len(encoder.vocab)))
    return EncodedCaptions(list(table.ids), list(table.texts), vectors, tokens, gate_k, truncated)
